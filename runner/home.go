package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"peal/internal/gitrepo"
	"peal/worktree"
)

// When the kernel confines files, the run's tasks do not work in the work
// tree itself: a call could be kept out of its .git only by refusing it
// the work tree's top folder (nothing could be made or removed there).
// They work in the run's worktree (its home, see worktree.Set.AddHome): the
// work tree's HEAD checked out, what git ignores in the work tree linked
// into it; the work of each task that completes comes back to the work
// tree, fast-forward, and at the end of the run so does the rest of what
// was committed there. Work never committed (a task cut short) is kept on
// a branch, never brought into the work tree.

// moveHome makes the run's worktree and makes it the home of the run's
// tasks, before the first agent call of a task. A repository without a
// commit keeps its tasks in the work tree (one warning: what a confined
// call cannot do there).
func (r *run) moveHome(ctx context.Context) error {
	main := r.home
	head, err := main.git.Head(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		r.log.Warn("the repository has no commit yet, so its tasks work in the work tree itself, where a confined call cannot make, remove or rename anything directly in the top folder (beside .git): make a first commit to have them work in a worktree of the run")
		return nil
	}
	changes, err := main.git.Changes(ctx)
	if err != nil {
		return err
	}
	if len(changes) > 0 {
		r.log.Warn("the work tree has changes git does not hold ("+gitrepo.ListPaths(changes, 3)+"): confined tasks work in a worktree of the run made from HEAD, which does not have them; commit them to let the tasks see them",
			"paths", len(changes))
	}
	t, linked, err := r.trees.AddHome(ctx, head, []string{r.cfg.StateDir, r.cfg.KnowledgeDir, r.cfg.AgentLogDir})
	if err != nil {
		return fmt.Errorf("making the run's worktree for confined tasks: %w", err)
	}
	caller := r.caller
	caller.Dir = t.Dir
	at := &site{caller: caller, tree: t.Path, main: main.tree, git: main.git.In(caller, t.Dir, false), commits: true}
	for _, p := range linked {
		at.writable = append(at.writable, filepath.Join(main.tree, filepath.FromSlash(strings.TrimSuffix(p, "/"))))
	}
	at.reviewer = main.reviewer.InWorkTree(caller, at.git, phase3Agent{r, at}, t.Review, r.trees.Lock())
	r.guard.watch(t.Path, t.Dir)
	r.main, r.home = main, at
	r.trees.Into(at.git)
	r.log.Info("the run's tasks work in a worktree of their own; each completed task's work comes back to the work tree", "worktree", t.Path,
		"branch", t.Branch, "linked_from_the_work_tree", len(linked))
	return nil
}

// bringBack brings what the run's worktree committed into the work tree,
// fast-forward; nothing when the tasks work in the work tree.
func (r *run) bringBack(ctx context.Context) error {
	if r.main == nil {
		return nil
	}
	cctx, cancel := r.trees.CleanupContext(ctx)
	defer cancel()
	moved, err := r.trees.FastForward(cctx)
	if moved {
		r.log.Info("the work tree took the run's work", "branch", r.trees.Home().Branch)
	}
	return err
}

// leaveHome ends the run's worktree, whatever ended the run: what was
// committed there comes back to the work tree, what was not is committed
// on its branch, which is then kept; the worktree goes.
func (r *run) leaveHome(ctx context.Context) {
	if r.main == nil {
		return
	}
	cctx, cancel := r.trees.CleanupContext(ctx)
	defer cancel()
	if err := r.bringBack(cctx); err != nil {
		r.log.Error("the work tree could not take the run's work; it stays on its branch", "err", err)
	}
	if changes, err := r.home.git.Changes(cctx); err == nil && len(changes) > 0 {
		if _, err := r.home.git.CommitMessage(cctx, "peal: unfinished work (not brought into the work tree)"); err != nil {
			r.log.Warn("could not commit the unfinished work of the run's worktree; it is lost with the worktree", "paths", gitrepo.ListPaths(changes, 3), "err", err)
		}
	}
	r.guard.forget(r.home.tree)
	kept, err := r.trees.DropHome(cctx)
	if err != nil {
		r.log.Warn("could not remove the run's worktree; the next run removes it", "err", err)
	}
	if kept != "" {
		r.log.Warn("work of the run's worktree that did not reach the work tree is kept on a branch (an unfinished task's, or what the work tree refused)", "branch", kept)
	}
	r.home, r.main = r.main, nil
	r.trees.Into(nil)
}

// homeTree is the run's worktree, when the tasks work in one.
func (r *run) homeTree() *worktree.Tree {
	if r.main == nil {
		return nil
	}
	return r.trees.Home()
}
