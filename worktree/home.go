package worktree

import (
	"context"
	"fmt"
	"path/filepath"
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
func (s *Set) AddHome(ctx context.Context, base string, own []string) (*Tree, []string, error) {
	t, err := s.add(ctx, s.Home(), base, false)
	if err != nil {
		return nil, nil, err
	}
	ignored, err := s.ignored(ctx, own)
	if err == nil {
		err = s.linkIgnored(t, ignored)
	}
	if err != nil {
		s.discard(ctx, t)
		return nil, nil, err
	}
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
		if err := linkPath(top, rel, t.Path); err != nil {
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
// uncommitted changes the commits would overwrite, is an error naming the
// branch that holds them.
func (s *Set) FastForward(ctx context.Context) (bool, error) {
	h := s.Home()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.git.IsAncestor(ctx, h.Branch, "HEAD") {
		return false, nil
	}
	if err := s.git.Merge(ctx, h.Branch, "", true); err != nil {
		return false, fmt.Errorf("the work tree cannot take the run's work, fast-forward, from branch %s: %w", h.Branch, err)
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
