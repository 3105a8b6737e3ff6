package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/sourcegraph/conc/pool"

	"peal/check"
	"peal/phase"
	"peal/plan"
	"peal/state"
	"peal/worktree"
)

// runIsolated runs a parallel block under parallel_isolation = worktree:
// each task, on a work-conserving pool of max_parallel, in a worktree of its
// own on a branch made from base, as a sequential task runs (its commit,
// its review session and address loop); each task's work is merged into
// the work tree in index order as soon as every earlier task has ended, so
// that the result never depends on which task finished first. The outcomes
// are recorded in index order as a sequential run's would be; a task whose
// merge conflicted runs again, alone, after the block under
// parallel_conflict = retry. red are the checks that fail on base: none of
// the tasks is charged with them.
func (b *block) runIsolated(ctx context.Context, tl *tally, base string, red check.Set) error {
	r := b.r
	r.log.Info("each task of the block works in a worktree of its own", "base", base, "worktrees", r.trees.Root())
	if r.chk.all() != nil {
		// The merged tree's checks run at the run's home: it is made now,
		// before the block's goroutines read where it is.
		if _, err := r.atHome(ctx); err != nil {
			return err
		}
	}
	var err error
	if b.refs, err = r.trees.MarkRefs(ctx); err != nil {
		for _, bt := range b.tasks {
			r.tickets.release(bt.task)
		}
		return err
	}
	slots := b.setUp(ctx, base)
	// One goroutine merges, in index order, while the pool runs the tasks:
	// a merge, and the checks of the merged tree, never hold a slot.
	kick, merged := make(chan struct{}, 1), make(chan struct{})
	go func() {
		defer close(merged)
		for range kick {
			b.mergeReady(ctx)
		}
	}()
	p := pool.New().WithMaxGoroutines(slots)
	for i, bt := range b.tasks {
		t := bt.task
		p.Go(func() {
			if !b.start(i) {
				r.log.Info("task not started: the run stops after this block", "task", t.Index)
				b.mu.Lock()
				b.tasks[i].refused = true
				b.mu.Unlock()
			} else {
				res, branch := b.isolatedTask(ctx, t, base, red)
				b.mu.Lock()
				b.tasks[i].done, b.tasks[i].err, b.tasks[i].res, b.tasks[i].branch = true, res.err, res, branch
				b.mu.Unlock()
			}
			select {
			case kick <- struct{}{}:
			default: // a merge pass is due already, and will see this task
			}
		})
	}
	p.Wait()
	close(kick)
	<-merged
	b.removals.Wait()
	if len(r.cfg.WorktreeLink) > 0 {
		r.trees.CloseBlock(ctx)
	}
	// Every worker has returned: b is no longer shared.
	b.settleBranches(ctx)
	return b.finishIsolated(ctx, tl)
}

// isolatedTask runs task t of block b in a new worktree at base; the
// worktree is removed in the background once the task ends (the block
// waits for it before it ends). The branch holding its work is returned
// when the task completed (or was deferred), for the merge; otherwise it is
// deleted.
func (b *block) isolatedTask(ctx context.Context, t plan.Task, base string, red check.Set) (res taskResult, branch string) {
	r := b.r
	if b.setUpErr != nil {
		return taskResult{err: b.setUpErr}, ""
	}
	tt, err := r.trees.Add(ctx, t.Index, base)
	if err != nil {
		return taskResult{err: err}, ""
	}
	r.log.Info("task worktree made", "task", t.Index, "worktree", tt.Path, "branch", tt.Branch)
	ran := false // an agent call may have made work to keep
	if err := r.recoverTask(t, func() {
		if err := r.prepareTree(ctx, tt); err != nil {
			res = taskResult{err: err}
			return
		}
		at := r.worktreeSite(tt)
		taskRed, err := r.chk.sparse(ctx, at, t, red)
		if err != nil {
			res = taskResult{err: err}
			return
		}
		ran = true
		res = r.runTask(ctx, at, t, taskRed)
	}); err != nil {
		res = taskResult{err: err}
	}
	// History is only added to: a ref of the user's the task moved is put
	// back, and the task fails.
	if moved, err := r.trees.RefsBack(ctx, b.refs); len(moved) > 0 {
		res = taskResult{err: &worktree.HistoryError{Task: t.Index, What: moved}}
	} else if err != nil {
		r.log.Warn("could not compare the repository's refs with how they were before the block", "task", t.Index, "err", err)
	}
	// Only a completed task's work is merged; a task that did not complete
	// (failed, deferred, cut off) has its work kept on a branch.
	failed := !res.completed()
	remove := func() {
		if failed && ran {
			r.trees.KeepTask(ctx, tt, base, whyKept(res), r.now())
		}
		r.guard.Forget(tt.Path)
		r.trees.Retire(ctx, tt, base, !failed)
	}
	if b.diskBound {
		// The disk holds only so many worktrees: this one is gone before
		// the task's slot takes another task.
		remove()
	} else {
		b.removals.Go(remove)
	}
	if failed {
		return res, ""
	}
	r.log.Info("task ended in its worktree, its work waits to be merged", "task", t.Index, "branch", tt.Branch)
	return res, tt.Branch
}

// worktreeSite is where a task of a block works in its worktree tt: its
// calls (the agent's, stet's, git's) run in the worktree, its review
// folder is the task's own, and its work is always committed, on the
// task's branch, for the merge.
func (r *run) worktreeSite(tt *worktree.Tree) *site {
	caller := r.caller
	caller.Dir = tt.Dir
	if r.caller.Observer != nil {
		caller.Observer = phase.At(r.caller.Observer, "worktree "+filepath.Base(tt.Path)+" on "+tt.Branch)
	}
	at := &site{caller: caller, git: r.main.git.In(caller, tt.Path, tt.Dir, r.trees.Sparse()), commits: true,
		tree: tt.Path, main: r.main.tree, linked: r.linkedPaths()}
	r.guard.Add(tt.Path, tt.Dir)
	at.reviewer = r.main.reviewer.InWorkTree(caller, at.git, r.agents.At(r.callSite(at)), tt.Review, r.trees.Lock())
	return at
}

// mergeReady merges, in index order, the work of every task whose earlier
// tasks have all ended, and stops at the first task still running. With
// check_commands, the merged tree's checks then run: a check that fails
// there and did not fail before the merge undoes it, as a conflict would.
// A merge that holds saves the task's outcome at once: state.json records
// a task of a block as completed only once its work is in the work tree,
// checked. Only the merging goroutine of the block calls it.
func (b *block) mergeReady(ctx context.Context) {
	r := b.r
	for ctx.Err() == nil {
		b.mu.Lock()
		if b.nextMerge >= len(b.tasks) {
			b.mu.Unlock()
			return
		}
		i := b.nextMerge
		bt := b.tasks[i]
		if !bt.done && !bt.refused {
			b.mu.Unlock()
			return
		}
		b.nextMerge++
		b.mu.Unlock()
		if bt.branch == "" {
			continue // failed, or never started: nothing to merge
		}
		note := &mergeNote{start: r.now()}
		// A merge that started is let finish (it is short) even if a signal
		// comes meanwhile, so that its outcome is known and saved: git
		// killed after its commit would leave merged work unrecorded.
		mctx, cancel := r.trees.CleanupContext(context.WithoutCancel(ctx))
		before, err := r.trees.Merge(mctx, bt.task.Index, bt.branch)
		cancel()
		if before != "" {
			r.homeMoved()
		}
		if err == nil && before != "" {
			err = b.checkMerged(ctx, bt.task, bt.branch, before)
		}
		note.end = r.now()
		b.mu.Lock()
		b.tasks[i].merge = note
		if err != nil && ctx.Err() != nil {
			note.interrupted = true
			b.mu.Unlock()
			return // interrupted: the merge was undone; settleBranches keeps the work
		}
		switch c, ok := asConflict(err); {
		case err == nil:
			b.tasks[i].merged = true
		case ok:
			b.tasks[i].conflict = c
			if conflictAction(r.cfg.ParallelConflict).fails() {
				// A failure, final: the block stops starting tasks if
				// recording it would stop the run.
				b.tasks[i].err = c
			}
		default:
			b.tasks[i].res = taskResult{err: err}
			b.tasks[i].err = err
		}
		b.mu.Unlock()
		if err != nil {
			r.log.Error("task's work could not be merged", "task", bt.task.Index, "err", err)
			continue
		}
		r.log.Info("task merged into the work tree", "task", bt.task.Index, "branch", bt.branch)
		// The ticket's attempt ends before state.json records the task,
		// as for a sequential task: a kill in between leaves a task that
		// runs again, never a completed task whose attempt stays open.
		r.tickets.finishTask(bt.task, bt.res)
		if serr := r.save(ctx, bt.task, bt.res); serr != nil {
			r.log.Error("could not save a task's outcome", "task", bt.task.Index, "err", serr)
		}
		if before != "" {
			r.trees.MergeDone()
		}
	}
}

// mergeNote is what the run record keeps of a merge: when it ran, and
// whether a signal cut it short.
type mergeNote struct {
	start, end  time.Time
	interrupted bool
}

// checkMerged runs the checks on the work tree that now holds task t's
// work, merged from branch on top of before. A check that fails and did
// not fail before undoes the merge: the error is then a *checksConflict
// naming the checks. A signal during the checks undoes it too.
func (b *block) checkMerged(ctx context.Context, t plan.Task, branch, before string) error {
	r := b.r
	c, err := r.chk.atHome(ctx)
	if c == nil || err != nil {
		return err
	}
	results, err := c.Run(ctx, t.Index, check.Merge, 0)
	if err != nil {
		uctx, cancel := r.trees.CleanupContext(ctx)
		defer cancel()
		defer r.homeMoved()
		if uerr := r.trees.Unmerge(uctx, t.Index, before); uerr != nil {
			r.log.Warn("could not undo a merge whose checks were cut short; the next run undoes it", "task", t.Index, "err", uerr)
		}
		return err
	}
	red, _ := r.chk.Now()
	charged := results.Charged(red)
	if len(charged) == 0 {
		r.chk.Ran(results.Failing())
		return nil
	}
	r.log.Warn("the work tree fails the checks once the task's work is merged: the merge is undone", "task", t.Index, "checks", check.Summaries(charged, 3))
	defer r.homeMoved()
	if uerr := r.trees.Unmerge(ctx, t.Index, before); uerr != nil {
		r.chk.Ran(results.Failing()) // the tree stays merged
		return fmt.Errorf("the work tree fails the checks once task %d is merged (%s), and %w", t.Index, check.Summaries(charged, 3), uerr)
	}
	return &checksConflict{Task: t.Index, Branch: branch, Checks: charged}
}

// settleBranches decides, once the block's workers have returned, what
// becomes of each task's branch: a merged task's goes, a conflicting
// task's is kept for the user, and so is the work of a task whose merge
// failed, or that completed but could not be merged before an interruption.
func (b *block) settleBranches(ctx context.Context) {
	r := b.r
	cctx, cancel := r.trees.CleanupContext(ctx)
	defer cancel()
	for i := range b.tasks {
		bt := &b.tasks[i]
		switch {
		case bt.branch == "":
		case bt.merged:
			if err := r.trees.DeleteBranch(cctx, bt.branch); err != nil {
				r.log.Warn("could not delete a merged task's branch", "task", bt.task.Index, "branch", bt.branch, "err", err)
			}
		default:
			kept, err := r.trees.Keep(cctx, bt.task.Index, bt.branch)
			if err != nil {
				r.log.Warn("could not rename a task's branch to keep it; the next run deletes it", "task", bt.task.Index, "branch", bt.branch, "err", err)
			}
			bt.branch = kept
			// Its work is not in the work tree: the next call that
			// continues its conversation is told so.
			r.sessions.PutBack(bt.task.Index)
			switch {
			case bt.conflict != nil:
				bt.conflict.setBranch(kept)
				continue
			case bt.res.err != nil:
				// The merge failed (mergeReady logged why): the error
				// stays the task's outcome.
				r.log.Warn("the work of a task that could not be merged is kept on a branch", "task", bt.task.Index, "branch", kept)
				continue
			}
			// Only an interruption stops mergeReady before every task
			// with a branch is merged or has failed.
			r.log.Warn("task completed in its worktree but was not merged (the run was interrupted): its work is kept on a branch, and the task runs again next time",
				"task", bt.task.Index, "branch", kept)
			bt.res = taskResult{err: &phase.InterruptedError{Phase: phase.Merge, Cause: context.Cause(ctx)}}
		}
	}
}

// finishIsolated records the outcome of every started task of an isolated
// block in index order, as a sequential run would (see finishBlock), then,
// under parallel_conflict = retry, runs each task whose merge conflicted
// again, alone, in the work tree that now holds the work of the block.
func (b *block) finishIsolated(ctx context.Context, tl *tally) error {
	r := b.r
	var stop error
	var again []plan.Task
	for _, bt := range b.tasks {
		if !bt.started {
			r.tickets.release(bt.task)
			continue
		}
		res := bt.res
		pt := state.ParallelTask{Task: bt.task.Index, Worktree: r.trees.Of(bt.task.Index).Path, Branch: bt.branch, Merged: bt.merged}
		if c := bt.conflict; c != nil {
			res = taskResult{err: c}
			pt.Branch, pt.Conflict = c.branch(), c.record()
			r.log.Error("task's work could not join the work merged before it", "task", bt.task.Index, "err", c)
		}
		r.rec.merge(bt)
		tl.out.Parallel = append(tl.out.Parallel, pt)
		if !bt.merged { // a merged task's attempt ended at its merge
			r.tickets.finishTask(bt.task, res)
		}
		if bt.conflict != nil && conflictAction(r.cfg.ParallelConflict).retries() && ctx.Err() == nil {
			r.rec.taskEnd(bt.task, res) // the retry records its own start and end
			again = append(again, bt.task)
			continue
		}
		if stop == nil {
			stop = r.record(ctx, tl, bt.task, res)
			continue
		}
		// Once the run stops at an earlier task, a later task's outcome
		// was saved when it was merged (if it was); it is not counted.
		r.rec.taskEnd(bt.task, res)
	}
	if stop != nil {
		return stop
	}
	for _, t := range again {
		r.log.Info("running the conflicting task again, alone, on the work merged so far (parallel_conflict = retry)", "task", t.Index)
		res, err := r.runTicketedTask(ctx, t)
		if err != nil {
			return err
		}
		if err := r.record(ctx, tl, t, res); err != nil {
			return err
		}
	}
	return nil
}

// linkedPaths are the worktree_link paths in the main work tree.
func (r *run) linkedPaths() []string {
	var out []string
	for _, p := range r.cfg.WorktreeLink {
		out = append(out, filepath.Join(r.cfg.RepoPath, p))
	}
	return out
}
