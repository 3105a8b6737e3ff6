package runner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"peal/internal/gitrepo"
	"peal/internal/text"
	"peal/worktree"
)

// When the kernel confines files, the run's tasks (those not in a worktree
// of a parallel block) and its checks do not work in the work tree itself:
// a call could be kept out of its .git only by refusing it the work tree's
// top folder (nothing could be made or removed there). They work in the
// run's worktree, a mirror of the work tree whose work comes back to it as
// each task ends, as it would have been left there (worktree.Mirror). The
// run decides when: the mirror is made when a task or a check first needs
// it, mirrored again after a block's merges moved the work tree, and its
// work brought back after every task that worked there and at the end of
// the run.

// atHome is the site where the run's tasks (those not in a worktree of a
// parallel block) and its checks work, ready for them: the work tree, or,
// where the kernel confines files, the run's worktree, made or mirrored
// now when it must be.
func (r *run) atHome(ctx context.Context) (*site, error) {
	if !r.confined.Files() {
		return r.main, nil
	}
	if r.mirror == nil {
		// The site is made once the worktree is there: its git names the
		// worktree's git folder, read from it now.
		var at *site
		gitOf := func(t *worktree.Tree) *gitrepo.Repo {
			at = r.homeSite(t)
			return at.git
		}
		m, err := r.trees.OpenMirror(ctx, gitOf, r.main.commits, filepath.Join(r.cfg.StateDir, "tmp"),
			[]string{r.cfg.StateDir, r.cfg.KnowledgeDir, r.cfg.AgentLogDir})
		if err != nil {
			return nil, err
		}
		r.mirror, r.home = m, at
		r.guard.Add(m.Tree.Path, m.Tree.Dir)
		r.log.Info("the run's tasks work in a worktree of their own; their work comes back to the work tree as each ends", "worktree", m.Tree.Path,
			"branch", m.Tree.Branch, "linked_from_the_work_tree", len(m.Linked))
	}
	if err := r.mirror.Use(ctx); err != nil {
		return nil, err
	}
	r.home.writable = r.mirror.LinkedIn(r.main.tree)
	return r.home, nil
}

// homeMoved notes that the work tree moved (a block's merge, or its
// undoing): the run's worktree is mirrored again before its next use.
func (r *run) homeMoved() {
	if r.mirror != nil {
		r.mirror.Moved()
	}
}

// homeSite is the site of the run's worktree t: the work tree's, moved.
func (r *run) homeSite(t *worktree.Tree) *site {
	caller := r.caller
	caller.Dir = t.Dir
	at := &site{caller: caller, tree: t.Path, main: r.main.tree, git: r.main.git.In(caller, t.Path, t.Dir, false), commits: r.main.commits}
	at.reviewer = r.main.reviewer.Moved(caller, at.git, r.agents.At(r.callSite(at)), r.trees.Lock())
	return at
}

// bringBack brings into the work tree what was done in the run's worktree
// since its work last came back (the work of task, -1: of no task): after
// each task that worked there, and at the end of the run. Work the work
// tree cannot take is kept on a branch, which the error names
// (worktree.Mirror.Keep), and the run's worktree is made again for the
// next task.
func (r *run) bringBack(ctx context.Context, task int) error {
	if r.mirror == nil {
		return nil
	}
	cctx, cancel := r.trees.KeepContext(ctx)
	defer cancel()
	err := r.mirror.Bring(cctx)
	if err == nil {
		return nil
	}
	// The worktree goes: peal's git no longer watches its .git file.
	r.guard.Forget(r.mirror.Tree.Path)
	err = r.mirror.Keep(cctx, task, err)
	r.mirror, r.home = nil, r.main
	return err
}

// homeBack ends the work of tasks (one task, or a block sharing its work)
// at the run's home, which ended with res: the work of tasks that
// completed comes to the work tree (bringBack), a task whose work the work
// tree cannot take did not complete; the work of tasks that did not is
// kept on a branch (a task's work reaches the user's branch only once it
// completed).
func (r *run) homeBack(ctx context.Context, tasks []int, res taskResult) taskResult {
	if r.mirror == nil || res.skipped {
		return res
	}
	if !res.completed() {
		cctx, cancel := r.trees.KeepContext(ctx)
		defer cancel()
		r.guard.Forget(r.mirror.Tree.Path)
		kept, err := r.mirror.KeepTask(cctx, tasks[0], whyKept(res), r.now())
		if r.mirror.Dropped() {
			r.mirror, r.home = nil, r.main
		} else {
			r.guard.Add(r.mirror.Tree.Path, r.mirror.Tree.Dir)
		}
		if err == nil && kept != nil && res.err != nil {
			res.err = &worktree.KeptError{Err: res.err, Kept: kept}
		}
		return res
	}
	if err := r.bringBack(ctx, tasks[0]); err != nil {
		return taskResult{err: err}
	}
	return res
}

// whyKept is why the work of a task that ended with res is kept apart.
func whyKept(res taskResult) string {
	switch {
	case res.deferred:
		return "deferred to the next run with findings or failing checks left (on_findings_remaining = defer)"
	case isInterrupted(res.err):
		return "the run was interrupted before the task completed"
	case res.err != nil:
		return "the task did not complete: " + text.Snippet(res.err.Error(), 200)
	}
	return "the task did not complete"
}

// markHome marks the work tree before tasks work at the run's home (see
// worktree.Mark): what the run puts back when they do not complete, or
// rewrite history.
func (r *run) markHome(ctx context.Context, tasks []int) (*worktree.Mark, error) {
	m, err := r.trees.Mark(ctx, tasks)
	if err != nil {
		return nil, fmt.Errorf("noting the work tree before task %d (so that it can be put back): %w", tasks[0], err)
	}
	r.chk.Mark()
	return m, nil
}

// settleHome ends the mark m of tasks that ended with res (see
// worktree.Set.Settle, which says what it kept): a task that rewrote
// history failed, its refs put back.
func (r *run) settleHome(ctx context.Context, m *worktree.Mark, res taskResult) taskResult {
	if m == nil || res.skipped {
		return res
	}
	cctx, cancel := r.trees.KeepContext(ctx)
	defer cancel()
	st, err := r.trees.Settle(cctx, m, res.completed(), !r.confined.Files(), whyKept(res), r.now())
	if len(st.Rewrote) > 0 {
		res = taskResult{err: &worktree.HistoryError{Task: m.Tasks[0], What: st.Rewrote, Kept: st.Work}}
	}
	switch {
	case err != nil && res.completed() && endsRun(err):
		// peal's git refuses to run (the guard): the work stays as it
		// landed, and the run ends at its next git command.
		r.log.Error("could not compare the work tree with how it was before the task", "task", m.Tasks[0], "err", err)
	case err != nil:
		r.log.Error("could not put the work tree back as it was before the task, or keep what it removed: it is as the task left it", "task", m.Tasks[0], "err", err)
		if res.completed() {
			res = taskResult{err: err}
		}
	}
	if !st.Landed {
		r.sessions.PutBack(m.Tasks...) // their conversations are told before they go on
		r.homeMoved()                  // the work tree was put back
		if err == nil {
			r.chk.putBack(m.Tasks[0])
		}
	}
	if st.Work != nil && res.err != nil && len(st.Rewrote) == 0 {
		res.err = &worktree.KeptError{Err: res.err, Kept: st.Work}
	}
	return res
}

// leaveHome ends the run's use of its worktree, whatever ended the run:
// what was done there since it last came back comes to the work tree. The
// worktree stays for the next run. The error is the work tree's refusal of
// that work (kept on a branch).
func (r *run) leaveHome(ctx context.Context) error {
	err := r.bringBack(ctx, -1)
	if r.mirror != nil {
		r.guard.Forget(r.mirror.Tree.Path)
		r.mirror.Close()
	}
	r.mirror, r.home = nil, r.main
	return err
}

// settleLeft settles the task an earlier run was killed in (or before its
// outcome was saved), as that run would have: its work stays when it is
// saved as completed, and is otherwise kept on a branch, the work tree put
// back as it was before the task.
func (r *run) settleLeft(ctx context.Context) {
	m, ok := r.trees.LeftMark(ctx)
	if !ok {
		return
	}
	completed := slices.ContainsFunc(m.Tasks, r.store.Completed)
	if !completed {
		r.log.Warn("an earlier run ended before its task completed: the work tree is put back as it was before the task", "task", m.Tasks[0])
	}
	res := taskResult{err: errCutOff}
	if completed {
		res = taskResult{}
	}
	r.settleHome(ctx, m, res)
	if completed {
		r.trees.Unmark(ctx)
	} else {
		r.chk.completedOnTree(m.Tasks[0]) // no work of it is left in the tree
	}
}

// errCutOff is how a task an earlier run was killed in ended.
var errCutOff = errors.New("the run it ran in was killed before the task completed")
