package worktree

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"peal/internal/gitrepo"
	"peal/internal/safefs"
)

// The home worktree is where the tasks of a confined run work instead of
// the work tree itself: the kernel can keep a call out of a folder's .git
// only by refusing it the folder's top (nothing could be made or removed
// there), and a linked worktree's git data lies in the repository's .git,
// outside its tree. It is a whole checkout of the work tree's HEAD, with
// the entries git ignores in the work tree (dependencies, builds, .env)
// linked into it, so that a task finds what it would find in the work
// tree; its commits come back to the work tree, fast-forward, as tasks
// complete. The worktrees of parallel blocks are made from it and merged
// into it.
const homeName = "home"

// broughtName is the file, in the worktrees folder, that names the last of
// the home worktree's commits whose work the work tree holds as changes (a
// run that does not commit brings its work back that way).
const broughtName = homeName + ".brought"

// leftHome is what Sweep found of a home worktree an earlier run left.
type leftHome struct {
	brought string // see broughtName; "" when it named none
}

// Home is the home worktree of the runs on the state folder.
func (s *Set) Home() *Tree {
	path := filepath.Join(s.root, homeName)
	return &Tree{Task: -1, Path: path, Dir: filepath.Join(path, s.rel), Branch: s.prefix + homeName, Review: path + ".review"}
}

// AddHome makes the home worktree at base and links into it, from the
// work tree, every entry git ignores there but own (peal's folders, full
// paths). It returns the tree and the linked entries (relative to the top,
// a folder's with a trailing /). The folders linked are named in the
// section of info/exclude, so that no commit takes a link for a file.
//
// When Sweep found the home worktree of an earlier run that died, on a
// branch that still holds the work tree's HEAD, AddHome takes it up again
// as it is instead (its commits, its uncommitted changes, its review
// folder), so that the run goes on with all of the work, as a run in the
// work tree itself would.
func (s *Set) AddHome(ctx context.Context, base string, own []string) (*Tree, []string, error) {
	t := s.Home()
	if s.left == nil {
		var err error
		if t, err = s.add(ctx, t, base, false); err != nil {
			return nil, nil, err
		}
	}
	ignored, err := s.ignored(ctx, own)
	if err == nil {
		err = s.linkIgnored(t, ignored)
	}
	if err != nil {
		if s.left == nil {
			s.discard(ctx, t)
		}
		return nil, nil, err
	}
	s.left = nil
	return t, ignored, nil
}

// ignored lists the entries of the work tree that git ignores (a folder
// wholly ignored as one entry), from its top, but those in own.
func (s *Set) ignored(ctx context.Context, own []string) ([]string, error) {
	top := s.git.Top()
	out, err := s.git.Command("status", "--porcelain", "-z", "--ignored=matching").Env("GIT_OPTIONAL_LOCKS=0").Dir(top).Run(ctx)
	if err != nil {
		return nil, err
	}
	var list []string
	for _, rec := range strings.Split(out, "\x00") {
		p, ok := strings.CutPrefix(rec, "!! ")
		if !ok || p == "" {
			continue
		}
		full := filepath.Join(top, filepath.FromSlash(strings.TrimSuffix(p, "/")))
		if p == ".review/" || strings.HasPrefix(p, ".review/") || inAny(full, own) {
			continue // stet's and peal's own folders
		}
		list = append(list, p)
	}
	return list, nil
}

// inAny reports whether path is one of dirs or inside one.
func inAny(path string, dirs []string) bool {
	for _, d := range dirs {
		if d != "" && safefs.Within(path, filepath.Clean(d)) {
			return true
		}
	}
	return false
}

// linkIgnored links each ignored entry into the home worktree t and names
// the folders among them in info/exclude.
func (s *Set) linkIgnored(t *Tree, ignored []string) error {
	top := s.git.Top()
	var folders []string
	for _, p := range ignored {
		rel := filepath.FromSlash(strings.TrimSuffix(p, "/"))
		if s.left != nil && linkedTo(filepath.Join(top, rel), filepath.Join(t.Path, rel)) {
			// Taken up again: linked by the run that made it.
		} else if err := linkPath(top, rel, t.Path); err != nil {
			return fmt.Errorf("linking %s into the run's worktree: %w", p, err)
		}
		if strings.HasSuffix(p, "/") {
			folders = append(folders, strings.TrimSuffix(p, "/"))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.homeLinks = folders
	if len(folders) == 0 {
		return nil
	}
	return s.writeSection(context.Background(), nil)
}

// linkedTo reports whether link is a symbolic link to target.
func linkedTo(target, link string) bool {
	dest, err := os.Readlink(link)
	return err == nil && dest == target
}

// LeftHome reports whether AddHome takes up the home worktree of an
// earlier run that died (see Sweep), and the last of its commits whose work
// the work tree holds as changes ("" when none was noted: the work tree's
// HEAD).
func (s *Set) LeftHome() (brought string, ok bool) {
	if s.left == nil {
		return "", false
	}
	return s.left.brought, true
}

// NoteBrought notes, atomically, that the work tree holds the work of the
// home worktree's commits up to commit as changes, for a run that takes
// the home up again after this one died.
func (s *Set) NoteBrought(commit string) error {
	d, err := safefs.OpenDir(s.root, true)
	if err != nil {
		return fmt.Errorf("worktrees folder %s: %w", s.root, safefs.Reason(err))
	}
	defer d.Close()
	if err := d.WriteFile(broughtName, []byte(commit+"\n")); err != nil {
		return fmt.Errorf("noting the work the work tree took: %w", safefs.Reason(err))
	}
	return nil
}

// findLeftHome is the home worktree an earlier run left, when it can be
// taken up again: git knows it (listed in worktrees, its git folder
// pointing back at it), it is on its branch, and its branch holds the work
// tree's HEAD (the work tree did not move elsewhere since). Its .git file,
// which a call of that run could rewrite, is written again. Callers hold
// mu.
func (s *Set) findLeftHome(ctx context.Context, registered []string) *leftHome {
	h := s.Home()
	if !slices.Contains(registered, h.Path) || !s.git.IsAncestor(ctx, "HEAD", h.Branch) {
		return nil
	}
	common, err := s.git.CommonDir(ctx)
	if err != nil {
		return nil
	}
	admin := filepath.Join(common, "worktrees", homeName)
	back, err := safefs.ReadFile(filepath.Join(admin, "gitdir"), 4096)
	if err != nil || filepath.Clean(strings.TrimSpace(string(back))) != filepath.Join(h.Path, ".git") {
		return nil
	}
	head, err := safefs.ReadFile(filepath.Join(admin, "HEAD"), 4096)
	if err != nil || strings.TrimSpace(string(head)) != "ref: refs/heads/"+h.Branch {
		return nil
	}
	pointer := "gitdir: " + admin + "\n"
	// A call could also have made it a named pipe: safefs refuses that.
	if now, err := safefs.ReadFile(filepath.Join(h.Path, ".git"), 4096); err != nil || string(now) != pointer {
		if err := safefs.WriteFile(filepath.Join(h.Path, ".git"), []byte(pointer)); err != nil {
			return nil
		}
		s.log.Warn("the .git file of the run's worktree an earlier run left was changed: written again", "worktree", h.Path)
	}
	left := &leftHome{}
	if d, err := safefs.OpenDir(s.root, false); err == nil {
		data, rerr := d.ReadFile(broughtName, 128)
		d.Close()
		if c := strings.TrimSpace(string(data)); rerr == nil && c != "" && s.git.IsAncestor(ctx, "HEAD", c) && s.git.IsAncestor(ctx, c, h.Branch) {
			left.brought = c
		}
	}
	return left
}

// Into is the same set, its worktrees merged into the work tree of git
// (the home worktree) instead of the work tree: they share the lock, the
// folder and the branch namespace; the paths they link and copy still come
// from the work tree.
func (s *Set) Into(git *gitrepo.Repo) *Set {
	s.into = git
	return s
}

// target is the git whose work tree the worktrees are merged into.
func (s *Set) target() *gitrepo.Repo {
	if s.into != nil {
		return s.into
	}
	return s.git
}

// FastForward brings the commits of the home worktree into the work tree
// (git merge --ff-only: its hooks run as for any merge), and reports
// whether there were any. A work tree that moved meanwhile, or whose
// uncommitted changes the commits would overwrite, is an error (the caller
// names the branch that keeps the work, once it has its last name).
func (s *Set) FastForward(ctx context.Context) (bool, error) {
	h := s.Home()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.git.IsAncestor(ctx, h.Branch, "HEAD") {
		return false, nil
	}
	if err := s.git.Merge(ctx, h.Branch, "", true); err != nil {
		return false, fmt.Errorf("the work tree cannot take the run's work, fast-forward: %w", err)
	}
	return true, nil
}

// DropHome removes the home worktree and its folders' lines of
// info/exclude; its branch goes with it when the work tree holds all its
// work, and, when keep is set, is kept otherwise (work that never reached
// the work tree: an unfinished task's, or what a fast-forward refused),
// under a name it returns.
func (s *Set) DropHome(ctx context.Context, keep bool) (kept string, err error) {
	h := s.Home()
	rerr := s.Remove(ctx, h)
	if err := os.Remove(filepath.Join(s.root, broughtName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("could not remove the note of the work the work tree took; the next run removes it", "err", err)
	}
	s.mu.Lock()
	s.homeLinks = nil
	werr := s.writeSection(ctx, nil)
	s.mu.Unlock()
	if keep && !s.git.IsAncestor(ctx, h.Branch, "HEAD") {
		kept, err = s.Keep(ctx, -1, h.Branch)
	} else {
		err = s.DeleteBranch(ctx, h.Branch)
	}
	switch {
	case rerr != nil:
		return kept, fmt.Errorf("removing the run's worktree %s: %w", h.Path, rerr)
	case werr != nil:
		return kept, fmt.Errorf("removing the run's linked folders from info/exclude: %w", werr)
	}
	return kept, err
}
