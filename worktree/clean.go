package worktree

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"peal/config"
	"peal/internal/gitrepo"
	"peal/internal/safefs"
	"peal/phase"
	"peal/state"
)

// CleanRuns is `peal clean`: what the runs on cfg's state folder keep
// between runs in the repository, removed (Set.Clean) under the state
// folder's lock, never while a run uses it. It starts git only.
func CleanRuns(ctx context.Context, cfg *config.Config, log *slog.Logger) (Cleaned, error) {
	release, err := state.LockFolder(cfg.StateDir)
	if err != nil {
		return Cleaned{}, err
	}
	defer release()
	timeout := time.Duration(cfg.PhaseTimeoutSec) * time.Second
	caller := phase.Caller{Dir: cfg.RepoPath, Log: log, Scope: state.CallScope(cfg.StateDir),
		Limits: phase.Limits{Timeout: timeout, KillGrace: time.Duration(cfg.KillGraceSec) * time.Second}}
	git := gitrepo.New(caller, log, timeout, cfg.RepoPath, cfg.StateDir, cfg.KnowledgeDir, cfg.AgentLogDir)
	return New(git, log, cfg.StateDir, caller.Scope, cfg.WorktreeSparsePaths).Clean(ctx, filepath.Join(cfg.StateDir, "tmp"))
}

// Cleaned is what Clean did, and what it left and why, a line each.
type Cleaned struct {
	Removed []string
	Left    []string
	// Kept are the branches peal kept for the user (KeptPrefix): never
	// removed.
	Kept []string
}

// Clean removes what peal keeps between the runs on the state folder, as
// far as nothing of it holds work found nowhere else: the run's worktree
// (home) with its branch, notes and lines of info/exclude, when everything
// it holds is in the work tree; the worktrees and branches of tasks of a
// parallel block that a killed run left, when their work is in the work
// tree's history (their commits in HEAD) and nothing of theirs is
// uncommitted; branches of the state folder's runs without a worktree, on
// the same rule. Whatever holds work of its own is left, and said; the
// kept branches (KeptPrefix) are the user's, only named. tmp is where a
// temporary index may go. The caller holds the state folder's lock: no run
// uses any of it.
func (s *Set) Clean(ctx context.Context, tmp string) (Cleaned, error) {
	var out Cleaned
	paths, err := s.git.Worktrees(ctx)
	if err != nil {
		return out, fmt.Errorf("listing the repository's worktrees: %w", err)
	}
	home := s.Home()
	s.mu.Lock()
	s.homeFound = s.findHome(ctx, paths)
	found := s.homeFound
	s.mu.Unlock()
	if found {
		s.cleanHome(ctx, tmp, &out)
	}
	var branches []string // of the worktrees still there
	for _, path := range paths {
		if !safefs.Within(path, s.root) || path == home.Path {
			if path == home.Path && !found {
				out.Left = append(out.Left, fmt.Sprintf("%s: a worktree of the run that is not whole (git lists it, its notes do not hold): the next peal run removes it", path))
			}
			continue
		}
		t := &Tree{Task: -1, Path: path, Dir: path, Branch: s.prefix + filepath.Base(path), Review: path + ".review"}
		if why := s.ownWork(ctx, t.Path, t.Branch); why != "" {
			out.Left = append(out.Left, fmt.Sprintf("%s (branch %s), left by a run in a parallel block: %s", path, t.Branch, why))
			branches = append(branches, t.Branch)
			continue
		}
		if err := s.Remove(ctx, t); err != nil {
			out.Left = append(out.Left, fmt.Sprintf("%s: could not be removed: %v", path, err))
			branches = append(branches, t.Branch)
			continue
		}
		out.Removed = append(out.Removed, fmt.Sprintf("%s, the worktree of a task of a parallel block a killed run left (its work is in the work tree's history)", path))
	}
	s.mu.Lock()
	s.prune(ctx)
	s.mu.Unlock()
	ours, err := s.git.Branches(ctx, s.prefix)
	if err != nil {
		return out, fmt.Errorf("listing peal's branches: %w", err)
	}
	for _, b := range ours {
		if slices.Contains(branches, b) || (found && b == home.Branch) {
			continue // its worktree stays, said above
		}
		if !s.git.IsAncestor(ctx, b, "HEAD") {
			out.Left = append(out.Left, fmt.Sprintf("branch %s: it holds commits the work tree's history does not; merge it, or delete it yourself (git branch -D %s)", b, b))
			continue
		}
		if err := s.DeleteBranch(ctx, b); err != nil {
			out.Left = append(out.Left, fmt.Sprintf("branch %s: could not be deleted: %v", b, err))
			continue
		}
		out.Removed = append(out.Removed, fmt.Sprintf("branch %s (its commits are in the work tree's history)", b))
	}
	if out.Kept, err = s.git.Branches(ctx, KeptPrefix); err != nil {
		return out, fmt.Errorf("listing the kept branches: %w", err)
	}
	return out, nil
}

// cleanHome removes the run's worktree when the work tree holds all it
// holds, and says what it did.
func (s *Set) cleanHome(ctx context.Context, tmp string, out *Cleaned) {
	h := s.Home()
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		out.Left = append(out.Left, fmt.Sprintf("%s (branch %s), the run's worktree: %v", h.Path, h.Branch, err))
		return
	}
	m := &Mirror{set: s, Tree: h, git: s.git.At(h.Path), main: s.git, tmp: tmp}
	b, noted := s.HomeBrought()
	nothing, err := m.leftNothing(ctx, b, noted)
	switch {
	case err != nil:
		out.Left = append(out.Left, fmt.Sprintf("%s (branch %s), the run's worktree: cannot tell whether the work tree holds all it holds: %v", h.Path, h.Branch, err))
		return
	case !nothing:
		out.Left = append(out.Left, fmt.Sprintf("%s (branch %s), the run's worktree: it holds work the work tree has not taken (a run stopped before it came back); the next peal run brings it into the work tree, or keeps it on a branch of its own",
			h.Path, h.Branch))
		return
	}
	if err := s.DropHome(ctx); err != nil {
		out.Left = append(out.Left, fmt.Sprintf("%s (branch %s), the run's worktree: %v", h.Path, h.Branch, err))
		return
	}
	out.Removed = append(out.Removed, homeRemoved(h))
}

// homeRemoved says that the run's worktree h was removed.
func homeRemoved(h *Tree) string {
	return fmt.Sprintf("%s and branch %s, the run's worktree (all it held is in the work tree; the next run makes it again)", h.Path, h.Branch)
}

// ownWork says what work of its own the worktree at path on branch holds,
// found nowhere else: uncommitted changes, or commits the work tree's
// history lacks; "" when none.
func (s *Set) ownWork(ctx context.Context, path, branch string) string {
	st, err := s.git.At(path).Status(ctx)
	switch {
	case err != nil:
		return fmt.Sprintf("cannot tell what it holds (%v)", err)
	case st.Staged || len(st.Unstaged) > 0:
		return "it holds uncommitted changes"
	case st.Head != "" && !s.git.IsAncestor(ctx, st.Head, "HEAD"):
		return fmt.Sprintf("it holds commits the work tree's history does not (merge branch %s, or the next peal run removes it and runs its task again)", branch)
	}
	return ""
}
