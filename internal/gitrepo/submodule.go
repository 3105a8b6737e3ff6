package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"peal/internal/safefs"
)

// What a worktree that mirrors the work tree needs of its submodules: the
// submodules the work tree has checked out, the git of each (its own
// repository, named in every command: never found through a .git a call
// may rewrite), a checkout of its own in the worktree, and what it holds
// kept on a branch of its repository. peal never commits in a submodule.

// Submodule is a submodule the work tree has checked out: its path (slash
// form, from the top of the work tree) and the git folder of its checkout.
type Submodule struct {
	Path, GitDir string
}

// Submodules are the submodules .gitmodules names that the index holds
// (gitlinks) and the work tree has checked out, in the order .gitmodules
// lists them. Their own submodules are theirs to list (Module).
func (g *Repo) Submodules(ctx context.Context) ([]Submodule, error) {
	file := filepath.Join(g.top, ".gitmodules")
	if _, err := os.Lstat(file); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	out, err := g.Command("config", "-f", file, "-z", "--get-regexp", `^submodule\..*\.path$`).Run(ctx)
	if Exited(err, 1) {
		return nil, nil // no submodule named
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	var paths []string
	for _, rec := range strings.Split(out, "\x00") {
		if _, p, ok := strings.Cut(rec, "\n"); ok && p != "" {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return nil, nil
	}
	args := []string{"ls-files", "-s", "-z", "--"}
	for _, p := range paths {
		args = append(args, ":(top,literal)"+p)
	}
	out, err = g.Command(args...).Run(ctx)
	if err != nil {
		return nil, err
	}
	gitlinks := map[string]bool{}
	for _, rec := range strings.Split(out, "\x00") {
		// mode id stage TAB path
		if info, p, ok := strings.Cut(rec, "\t"); ok && strings.HasPrefix(info, "160000 ") {
			gitlinks[p] = true
		}
	}
	var subs []Submodule
	for _, p := range paths {
		rel := filepath.FromSlash(p)
		if !gitlinks[p] || !filepath.IsLocal(rel) {
			continue
		}
		dir, err := checkoutGitDir(filepath.Join(g.top, rel))
		if err != nil {
			return nil, fmt.Errorf("the submodule %s: %w", p, err)
		}
		if dir != "" {
			subs = append(subs, Submodule{Path: p, GitDir: dir})
		}
	}
	return subs, nil
}

// checkoutGitDir is the git folder of the checkout in dir: dir/.git, a
// folder, or the one a .git file names; "" when dir holds none (a
// submodule not checked out).
func checkoutGitDir(dir string) (string, error) {
	dotgit := filepath.Join(dir, ".git")
	info, err := os.Lstat(dotgit)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case err != nil:
		return "", err
	case info.IsDir():
		return dotgit, nil
	case !info.Mode().IsRegular():
		return "", fmt.Errorf("%s is neither a folder nor a file", dotgit)
	}
	data, err := safefs.ReadFile(dotgit, 4096)
	if err != nil {
		return "", err
	}
	to, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir: ")
	if !ok {
		return "", fmt.Errorf("%s names no git folder", dotgit)
	}
	if !filepath.IsAbs(to) {
		to = filepath.Join(dir, to)
	}
	if _, err := os.Stat(filepath.Join(to, "HEAD")); err != nil {
		return "", fmt.Errorf("%s names %s, which holds no repository", dotgit, to)
	}
	return filepath.Clean(to), nil
}

// Module is the git of the submodule s of the work tree, working in its
// checkout there, its commands calls of the same caller; its git folder is
// the one the work tree's checkout names now, named in every command. It
// runs no hook: peal commits nothing in a submodule.
func (g *Repo) Module(s Submodule) *Repo {
	top := filepath.Join(g.top, filepath.FromSlash(s.Path))
	m := newAt(g.caller, g.log, g.timeout, top, top)
	m.guard, m.ident = g.guard, g.ident
	f := &folders{gitDir: s.GitDir, common: s.GitDir, top: top, hooks: os.DevNull}
	if data, err := safefs.ReadFile(filepath.Join(s.GitDir, "commondir"), 4096); err == nil {
		common := strings.TrimSpace(string(data))
		if !filepath.IsAbs(common) {
			common = filepath.Join(s.GitDir, common)
		}
		f.common = filepath.Clean(common)
	}
	m.where = f
	return m
}

// Registered reports whether the Repo's git folder is there: for one made
// by In (At), whether the repository records a worktree at its top.
func (g *Repo) Registered() bool {
	gitDir, _ := g.GitDir()
	_, err := os.Stat(filepath.Join(gitDir, "HEAD"))
	return gitDir != "" && err == nil
}

// AddDetached registers a worktree of the repository at path (a missing or
// empty folder), detached at commit, without checking its files out (see
// Populate). The records of worktrees whose folders are gone are dropped
// first: one may be at path.
func (g *Repo) AddDetached(ctx context.Context, path, commit string) error {
	if err := g.PruneWorktrees(ctx); err != nil {
		return err
	}
	_, err := g.Command("worktree", "add", "-q", "-f", "--detach", "--no-checkout", path, commit).Run(ctx)
	return err
}

// Checkout makes a detached worktree's HEAD commit and its index and files
// tree (a Snapshot): tracked files that differ are written, those tree does
// not hold removed, and files neither tracked nor ignored removed too, but
// keep (paths from its top, taken literally: the entries linked into it).
// What git ignores stays.
func (g *Repo) Checkout(ctx context.Context, commit, tree string, keep []string) error {
	if commit == "" {
		return fmt.Errorf("%s: a checkout at no commit", g.top)
	}
	if _, err := g.Command("update-ref", "--no-deref", "HEAD", commit).Run(ctx); err != nil {
		return err
	}
	if _, err := g.Command("read-tree", "--reset", "-u", tree).Run(ctx); err != nil {
		return err
	}
	args := []string{"clean", "-f", "-d", "-q", "--"}
	for _, k := range keep {
		args = append(args, ":(top,exclude,literal)"+strings.TrimSuffix(k, "/"))
	}
	_, err := g.Command(args...).Run(ctx)
	return err
}

// KeepOn makes what the work tree holds (its HEAD and its uncommitted
// changes, staged first: State) a commit of message msg, under peal's own
// identity, and returns it; HEAD, the files and any branch stay as they
// are.
func (g *Repo) KeepOn(ctx context.Context, msg string) (string, error) {
	tree, err := g.State(ctx)
	if err != nil {
		return "", err
	}
	head, err := g.HeadOrNone(ctx)
	if err != nil {
		return "", err
	}
	args := []string{"commit-tree", tree, "-m", msg}
	if head != "" {
		args = append(args, "-p", head)
	}
	out, err := g.Command(args...).Env("GIT_AUTHOR_NAME=peal", "GIT_AUTHOR_EMAIL=peal@localhost", "GIT_COMMITTER_NAME=peal", "GIT_COMMITTER_EMAIL=peal@localhost").Run(ctx)
	return strings.TrimSpace(out), err
}
