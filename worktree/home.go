package worktree

import (
	"context"
	"encoding/json"
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
// outside its tree. It mirrors the work tree (its HEAD, and what the work
// tree holds uncommitted), with the entries git ignores in the work tree
// (dependencies, builds, .env) linked into it, so that a task finds what it
// would find in the work tree; what the tasks change there is brought back
// (Bring). It outlives the run: the next run moves it to the work tree as it
// then is, which git does by writing only what changed, instead of checking
// the whole tree out again. The runner decides when it is made, moved and
// brought back.
const homeName = "home"

// Note files of the home worktree, in the worktrees folder: what the work
// tree took of it (broughtName), and the entries of the work tree linked
// into it (linksName).
const (
	broughtName = homeName + ".brought"
	linksName   = homeName + ".links"
)

// Home is the home worktree of the runs on the state folder.
func (s *Set) Home() *Tree {
	path := filepath.Join(s.root, homeName)
	return &Tree{Task: -1, Path: path, Dir: filepath.Join(path, s.rel), Branch: s.prefix + homeName, Review: path + ".review"}
}

// HomeFound reports whether Sweep found the home worktree an earlier run
// left, whole: git knows it, its git folder points back at it, and it is on
// its branch (made or not). Its .git file, which a call could rewrite, was
// written again.
func (s *Set) HomeFound() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.homeFound
}

// findHome is what HomeFound reports, found among the worktrees git lists
// (registered). Callers hold mu.
func (s *Set) findHome(ctx context.Context, registered []string) bool {
	h := s.Home()
	if !slices.Contains(registered, h.Path) {
		return false
	}
	common, err := s.git.CommonDir(ctx)
	if err != nil {
		return false
	}
	admin := filepath.Join(common, "worktrees", homeName)
	back, err := safefs.ReadFile(filepath.Join(admin, "gitdir"), 4096)
	if err != nil || filepath.Clean(strings.TrimSpace(string(back))) != filepath.Join(h.Path, ".git") {
		return false
	}
	head, err := safefs.ReadFile(filepath.Join(admin, "HEAD"), 4096)
	if err != nil || strings.TrimSpace(string(head)) != "ref: refs/heads/"+h.Branch {
		return false
	}
	pointer := "gitdir: " + admin + "\n"
	// A call could also have made it a named pipe: safefs refuses that.
	if now, err := safefs.ReadFile(filepath.Join(h.Path, ".git"), 4096); err != nil || string(now) != pointer {
		if err := safefs.WriteFile(filepath.Join(h.Path, ".git"), []byte(pointer)); err != nil {
			return false
		}
		s.log.Warn("the .git file of the run's worktree was changed: written again", "worktree", h.Path)
	}
	return true
}

// AddHome makes the home worktree at base, on its branch; base "" makes it
// on an unborn branch with nothing checked out (a repository without a
// commit yet), whose first commit is a root commit, as the work tree's
// would be.
func (s *Set) AddHome(ctx context.Context, base string) (*Tree, error) {
	t := s.Home()
	if base != "" {
		t, err := s.add(ctx, t, base, false)
		if err == nil {
			s.mu.Lock()
			s.homeFound = true
			s.mu.Unlock()
		}
		return t, err
	}
	// git (before 2.42) makes a worktree only at a commit: it is made at a
	// commit of the empty tree that no branch keeps, then its branch is
	// made unborn again.
	empty, err := s.git.EmptyTree(ctx)
	if err != nil {
		return nil, err
	}
	c, err := s.git.Command("commit-tree", empty, "-m", "peal: the run's worktree of a repository without a commit").
		Env("GIT_AUTHOR_NAME=peal", "GIT_AUTHOR_EMAIL=peal@localhost", "GIT_COMMITTER_NAME=peal", "GIT_COMMITTER_EMAIL=peal@localhost").Run(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.register(ctx, t, strings.TrimSpace(c), false); err != nil {
		s.discard(ctx, t)
		return nil, err
	}
	home := s.git.At(t.Path)
	if _, err = home.Command("update-ref", "-d", "refs/heads/"+t.Branch).Run(ctx); err == nil {
		_, err = home.Command("read-tree", "--empty").Run(ctx)
	}
	if err != nil {
		s.discard(ctx, t)
		return nil, fmt.Errorf("making the run's worktree on an unborn branch: %w", err)
	}
	s.mu.Lock()
	s.homeFound = true
	s.mu.Unlock()
	return t, nil
}

// LinkIgnored links into the home worktree, from the work tree, every
// entry git ignores there but own (peal's folders, full paths), and removes
// the links it made before to entries that are no longer there or no
// longer ignored. It returns the entries linked (relative to the top, a
// folder's with a trailing /). They are named in the section of
// info/exclude, so that git in the home worktree never takes a link for a
// file to commit.
func (s *Set) LinkIgnored(ctx context.Context, own []string) ([]string, error) {
	return s.linkIgnored(ctx, own, nil)
}

// linkIgnored is LinkIgnored, the entries git ignores in the work tree's
// checkouts of the submodules mods linked too (each from the top).
func (s *Set) linkIgnored(ctx context.Context, own []string, mods []*module) ([]string, error) {
	ignored, err := s.ignored(ctx, s.git, "", own)
	if err != nil {
		return nil, err
	}
	for _, mod := range mods {
		in, err := s.ignored(ctx, mod.main, mod.path, own)
		if err != nil {
			return nil, fmt.Errorf("the submodule %s: %w", mod.path, err)
		}
		ignored = append(ignored, in...)
	}
	h := s.Home()
	top := s.git.Top()
	for _, p := range s.readLinks() {
		if slices.Contains(ignored, p) {
			continue
		}
		rel := filepath.FromSlash(strings.TrimSuffix(p, "/"))
		if linkedTo(filepath.Join(top, rel), filepath.Join(h.Path, rel)) {
			if err := os.Remove(filepath.Join(h.Path, rel)); err != nil {
				return nil, fmt.Errorf("removing the link of %s from the run's worktree: %w", p, err)
			}
		}
	}
	// Every link is named in info/exclude: a link is never a folder to
	// git, and a .gitignore that is a link is not read, so the rules that
	// ignore the entry in the work tree may not ignore its link.
	var names []string
	for _, p := range ignored {
		rel := filepath.FromSlash(strings.TrimSuffix(p, "/"))
		if !linkedTo(filepath.Join(top, rel), filepath.Join(h.Path, rel)) {
			if err := linkPath(top, rel, h.Path); err != nil {
				return nil, fmt.Errorf("linking %s into the run's worktree: %w", p, err)
			}
		}
		names = append(names, strings.TrimSuffix(p, "/"))
	}
	if err := s.writeHomeNote(linksName, ignored); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.homeLinks = names
	return ignored, s.writeSection(ctx, nil)
}

// NoteLinks notes the entries linked into the home worktree (after
// BringIgnored moved and linked some), in the note and in info/exclude.
func (s *Set) NoteLinks(ctx context.Context, linked []string) error {
	if err := s.writeHomeNote(linksName, linked); err != nil {
		return err
	}
	names := make([]string, len(linked))
	for i, p := range linked {
		names[i] = strings.TrimSuffix(p, "/")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.homeLinks = names
	return s.writeSection(ctx, nil)
}

// Linked are the entries of the work tree linked into the home worktree,
// as git status lists them there: a link is no folder to git, so with no
// trailing /.
func (s *Set) Linked() []string {
	links := s.readLinks()
	for i, p := range links {
		links[i] = strings.TrimSuffix(p, "/")
	}
	return links
}

// readLinks are the entries LinkIgnored linked last (none when the note
// cannot be read: a link it then misses is left as it is).
func (s *Set) readLinks() []string {
	var links []string
	if data, ok := s.readHomeNote(linksName); ok && json.Unmarshal(data, &links) != nil {
		links = nil
	}
	return links
}

// ignored lists the entries of the work tree of git (the work tree's, or
// its checkout of a submodule at prefix) that git ignores (a folder wholly
// ignored as one entry), from the top of the work tree, but those in own.
func (s *Set) ignored(ctx context.Context, git *gitrepo.Repo, prefix string, own []string) ([]string, error) {
	top := git.Top()
	out, err := git.Command("status", "--porcelain", "-z", "--ignored=matching").Env("GIT_OPTIONAL_LOCKS=0").Dir(top).Run(ctx)
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
		if prefix != "" {
			p = prefix + "/" + p
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

// linkedTo reports whether link is a symbolic link to target.
func linkedTo(target, link string) bool {
	dest, err := os.Readlink(link)
	return err == nil && dest == target
}

// Brought is what the work tree holds of the home worktree: the commit its
// HEAD is ("" in a repository without a commit) and the tree of all it
// holds, that commit and its uncommitted changes. What the home worktree
// holds beyond it is what its tasks did since.
type Brought struct {
	Commit string `json:"commit"`
	Tree   string `json:"tree"`
}

// HomeBrought is what the work tree held of the home worktree when it last
// took its work (NoteBrought); false when nothing was noted, or the note
// cannot be read.
func (s *Set) HomeBrought() (Brought, bool) {
	var b Brought
	data, ok := s.readHomeNote(broughtName)
	if !ok || json.Unmarshal(data, &b) != nil || (b.Tree == "" && b.Commit == "") {
		return Brought{}, false
	}
	return b, true
}

// NoteBrought notes, atomically, what the work tree holds of the home
// worktree, for the run that takes the home worktree up after this one.
func (s *Set) NoteBrought(b Brought) error {
	if err := s.writeHomeNote(broughtName, b); err != nil {
		return fmt.Errorf("noting the work the work tree took: %w", err)
	}
	return nil
}

// readHomeNote reads a note of the home worktree.
func (s *Set) readHomeNote(name string) ([]byte, bool) {
	d, err := safefs.OpenDir(s.root, false)
	if err != nil {
		return nil, false
	}
	defer d.Close()
	data, err := d.ReadFile(name, 1<<20)
	return data, err == nil
}

// writeHomeNote writes v as the JSON note name of the home worktree.
func (s *Set) writeHomeNote(name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	d, err := safefs.OpenDir(s.root, true)
	if err != nil {
		return fmt.Errorf("worktrees folder %s: %w", s.root, safefs.Reason(err))
	}
	defer d.Close()
	return safefs.Reason(d.WriteFile(name, append(data, '\n')))
}

// DropHome removes the home worktree, its branch, its notes and its
// folders' lines of info/exclude.
func (s *Set) DropHome(ctx context.Context) error {
	h := s.Home()
	rerr := s.Remove(ctx, h)
	for _, name := range []string{broughtName, linksName} {
		if err := os.Remove(filepath.Join(s.root, name)); err != nil && !errors.Is(err, fs.ErrNotExist) && rerr == nil {
			rerr = err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.homeFound = false
	s.homeLinks = nil
	werr := s.writeSection(ctx, nil)
	if s.branchExists(ctx, h.Branch) {
		if err := s.git.DeleteBranch(ctx, h.Branch); err != nil && rerr == nil {
			rerr = err
		}
	}
	switch {
	case rerr != nil:
		return fmt.Errorf("removing the run's worktree %s: %w", h.Path, rerr)
	case werr != nil:
		return fmt.Errorf("removing the run's linked folders from info/exclude: %w", werr)
	}
	return nil
}

// FastForward brings the commits of the home worktree into the work tree
// (git merge --ff-only: its hooks run as for any merge). A work tree that
// moved meanwhile, whose uncommitted changes the commits would overwrite,
// or that holds untracked where the commits add a path (an ignored .env
// the task committed a link in place of: InTheWay), is an error (the work
// is then kept on a branch of its own, which the caller names).
func (s *Set) FastForward(ctx context.Context) error {
	h := s.Home()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.InTheWay(ctx, h.Branch); err != nil {
		return err
	}
	if err := s.git.Merge(ctx, h.Branch, "", true); err != nil {
		if path := s.editedToo(ctx, h.Branch); path != "" {
			return &BringError{Path: path, Why: "it changed in the work tree while the run worked, and the run's work changes it too", Edited: true}
		}
		return fmt.Errorf("the work tree cannot take the run's work, fast-forward: %w", err)
	}
	return nil
}

// editedToo is a path that both the work tree's uncommitted changes and the
// commits of branch change (a concurrent edit of the person's), "" when
// there is none; the caller holds mu.
func (s *Set) editedToo(ctx context.Context, branch string) string {
	changed, err := s.git.Changes(ctx)
	if err != nil {
		return ""
	}
	theirs, err := s.git.ChangedFiles(ctx, "HEAD", branch)
	if err != nil {
		return ""
	}
	for _, p := range changed {
		if slices.Contains(theirs, p) {
			return p
		}
	}
	return ""
}
