package runner

import (
	"context"
	"errors"
	"fmt"
	"peal/plan"
	"sync"

	"github.com/sourcegraph/conc/panics"
	"github.com/sourcegraph/conc/pool"

	"peal/check"
	"peal/config"
	"peal/review"
	"peal/worktree"
)

// runsAsBlock reports whether a segment's pending tasks run concurrently:
// a parallel block, parallel on, more than one slot and more than one task.
func (r *run) runsAsBlock(seg plan.Segment, pending []plan.Task) bool {
	return seg.Parallel && r.cfg.Parallel && r.cfg.MaxParallel > 1 && len(pending) > 1
}

// blockTask is one task of a parallel block and how its Phases 1–2 ended.
type blockTask struct {
	task     plan.Task
	started  bool
	done     bool
	planText string
	err      error

	// Under parallel_isolation = worktree: how the task ended in its
	// worktree, the branch holding its work (while it waits to be merged),
	// whether it was merged, and a conflict of its merge.
	res      taskResult
	branch   string
	refused  bool // not started: the run stops after the block
	merged   bool
	conflict conflict
	merge    *mergeNote // nil: no merge was tried
}

// block is what the tasks of a running parallel block share: which started,
// which ended and how, so that a worker can tell whether it may start.
type block struct {
	r         *run
	mu        sync.Mutex
	tasks     []blockTask
	keepGoing bool // continue_with_remaining_tasks
	maxFails  int  // max_consecutive_task_failures; 0: no cap
	carried   int  // consecutive failures counted before the block

	// Under parallel_isolation = worktree: the next task to merge, in index
	// order.
	nextMerge int
	removals  sync.WaitGroup // worktrees being removed
	// setUpErr fails every task of the block before it starts: a
	// worktree_link refused, no disk space for one worktree.
	setUpErr error
	// diskBound: the disk limits how many worktrees exist at once, so a
	// task's worktree is removed before its slot takes the next task.
	diskBound bool
	// mark is the work tree before a block that shares it (see
	// worktree.Mark); refs the user's refs before a block in worktrees.
	mark, refs *worktree.Mark
}

// start marks task i as started, unless the run is already certain to stop
// at an earlier index, in which case the task stays pending for a later run.
func (b *block) start(i int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopCertain() {
		return false
	}
	b.tasks[i].started = true
	return true
}

func (b *block) finish(i int, planText string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tasks[i].done, b.tasks[i].planText, b.tasks[i].err = true, planText, err
}

// stopCertain reports whether recording the outcomes in index order will stop
// the run whatever the tasks still running do. Failures are final, while a
// running task or a Phase-2 success (its review may still fail) could reset
// the count, so the failure run below is a lower bound. Callers hold mu.
func (b *block) stopCertain() bool {
	failures := b.carried
	for _, bt := range b.tasks {
		if !bt.done || bt.err == nil {
			failures = 0
			continue
		}
		// record returns at once on an interruption, as on any failure
		// without continue_with_remaining_tasks.
		if !b.keepGoing || isInterrupted(bt.err) || endsRun(bt.err) {
			return true
		}
		failures++
		if b.maxFails > 0 && failures >= b.maxFails {
			return true
		}
	}
	return false
}

// runBlock runs a parallel block: Phases 1–2 of its tasks on a
// work-conserving pool of max_parallel, one commit for the block, then Phase 3
// of the successes one at a time in index order, each outcome recorded in
// index order as a sequential task's would be.
func (r *run) runBlock(ctx context.Context, tl *tally, tasks []plan.Task) error {
	// Tickets start before the pool, in index order, so that a skipped ticket
	// never takes a slot.
	var runnable []plan.Task
	for _, t := range tasks {
		err := r.tickets.beginTask(t)
		switch {
		case errors.Is(err, errSkipped):
			r.record(ctx, tl, t, taskResult{skipped: true})
		case err != nil:
			for _, begun := range runnable {
				r.tickets.release(begun)
			}
			return err
		default:
			runnable = append(runnable, t)
		}
	}
	if tasks = runnable; len(tasks) == 0 {
		return nil
	}
	b := &block{r: r, tasks: make([]blockTask, len(tasks)), keepGoing: r.cfg.ContinueWithRemainingTasks, carried: tl.consecutive}
	if limit := r.cfg.MaxConsecutiveTaskFailures; limit != nil {
		b.maxFails = int(*limit)
	}
	for i, t := range tasks {
		b.tasks[i].task = t
	}
	r.log.Info("parallel block started", "tasks", plan.IndexList(tasks), "max_parallel", r.cfg.MaxParallel)
	// The block's tasks start on the work tree as it is now (in it, or in
	// worktrees made from its HEAD): the checks that fail on it are none of
	// theirs.
	red, err := r.chk.before(ctx, tasks[0])
	if err != nil {
		for _, t := range tasks {
			r.tickets.release(t)
		}
		return err
	}
	if r.cfg.ParallelIsolation == config.IsolationWorktree {
		base, why := r.trees.Base(ctx)
		if why == "" {
			return b.runIsolated(ctx, tl, base, red)
		}
		if ctx.Err() == nil {
			r.log.Warn("the block's tasks run in the shared work tree, not in worktrees of their own: "+why, "tasks", plan.IndexList(tasks))
		}
	}
	at, err := r.atHome(ctx)
	if err != nil {
		for _, t := range tasks {
			r.tickets.release(t)
		}
		return err
	}
	r.chk.startsOnTree(tasks[0].Index, red)
	if b.mark, err = r.markHome(ctx, indices(tasks)); err != nil {
		for _, t := range tasks {
			r.tickets.release(t)
		}
		return err
	}
	// The block's tasks share one work tree and one commit, so they share
	// one review session, opened before their first agent call.
	sess, err := at.reviewer.Begin(ctx, indices(tasks))
	if err != nil {
		// No task of the block can run: each fails with the session's error.
		for i := range b.tasks {
			b.tasks[i].started, b.tasks[i].done, b.tasks[i].err = true, true, err
		}
		return b.finishShared(ctx, tl, nil, red)
	}

	// Go hands each task to the next free worker in index order, so a slot is
	// refilled as soon as any task ends rather than when a chunk ends.
	p := pool.New().WithMaxGoroutines(min(int(r.cfg.MaxParallel), len(tasks)))
	for i, t := range tasks {
		p.Go(func() {
			if !b.start(i) {
				r.log.Info("task not started: the run stops after this block", "task", t.Index)
				return
			}
			planText, err := b.phases(ctx, at, t)
			b.finish(i, planText, err)
		})
	}
	p.Wait()

	// Every worker has returned: b is no longer shared.
	b.commit(ctx, at)
	return b.finishShared(ctx, tl, sess, red)
}

// phases runs Phases 1–2 of one task of a block; a panic becomes the
// task's failure, so that one broken task cannot take down the others' agents.
func (b *block) phases(ctx context.Context, at *site, t plan.Task) (planText string, err error) {
	r := b.r
	if perr := r.recoverTask(t, func() { planText, err = r.planAndExecute(ctx, at, t) }); perr != nil {
		return "", perr
	}
	return planText, err
}

// recoverTask runs fn and turns a panic in it into an error of task t.
func (r *run) recoverTask(t plan.Task, fn func()) error {
	if rec := panics.Try(fn); rec != nil {
		r.log.Error("task panicked", "task", t.Index, "panic", fmt.Sprint(rec.Value), "stack", string(rec.Stack))
		return fmt.Errorf("panic: %v", rec.Value)
	}
	return nil
}

// commit makes the one commit of a block (when commits are on) when an
// execute succeeded; if it fails, every task whose work it held fails with it.
func (b *block) commit(ctx context.Context, at *site) {
	if !at.commits {
		return
	}
	var indices []int
	planText := ""
	for _, bt := range b.tasks {
		if bt.done && bt.err == nil {
			if indices == nil {
				planText = bt.planText
			}
			indices = append(indices, bt.task.Index)
		}
	}
	if len(indices) == 0 {
		return
	}
	if _, err := at.git.Commit(ctx, indices, planText); err != nil {
		for i := range b.tasks {
			if b.tasks[i].done && b.tasks[i].err == nil {
				b.tasks[i].err = err
			}
		}
	}
}

// finishShared runs the block's Phase 3 once for all its successes (red:
// the checks that failed before the block) and
// records every started task's outcome in index order, each completion saved
// as soon as it is recorded. The review covers the block's one commit, so its
// outcome (resolved, findings left, failed) is every success's outcome; its
// agent calls carry the lowest index of the successes. When a record stops
// the run (a failure without continue_with_remaining_tasks,
// max_consecutive_task_failures, an interruption), the successes at later
// indices are still saved as completed: their executes already changed the
// repository, and a later run that redid them would work on top of their own
// changes. Their failures are not recorded, as a sequential run would not
// have reached them.
func (b *block) finishShared(ctx context.Context, tl *tally, sess *review.Session, red check.Set) error {
	r := b.r
	completed := true
	defer func() { sess.End(ctx, completed) }()
	var shared *taskResult
	for _, bt := range b.tasks {
		if bt.started && bt.err == nil && shared == nil {
			var res taskResult
			if err := r.recoverTask(bt.task, func() { res = phase3Result(sess.Review(ctx, bt.task.Index, red)) }); err != nil {
				res = taskResult{err: err} // a panic in the review is the block's failure, not peal's
			}
			shared = &res
		}
	}
	if shared != nil {
		r.chk.seenOf(*shared)
	} else {
		r.chk.seenOf(taskResult{}) // the failed executes may have changed the tree
	}
	// The block is one unit of work: it lands when its review completed.
	all := taskResult{err: errors.New("no task of the block ran its Phase 3")}
	if shared != nil {
		all = *shared
	}
	if all = r.settleHome(ctx, b.mark, r.homeBack(ctx, b.mark.Tasks, all)); shared != nil {
		*shared = all
	}
	var stop error
	for _, bt := range b.tasks {
		if !bt.started {
			r.tickets.release(bt.task)
			continue
		}
		res := taskResult{err: bt.err}
		if res.err == nil {
			res = *shared
		}
		completed = completed && res.completed()
		r.tickets.finishTask(bt.task, res)
		if stop == nil {
			stop = r.record(ctx, tl, bt.task, res)
			continue
		}
		// The run stops at an earlier task of the block: this one's
		// outcome is saved, not counted.
		r.rec.taskEnd(bt.task, res)
		if err := r.save(ctx, bt.task, res); err != nil {
			r.log.Error("could not save a task's outcome", "task", bt.task.Index, "err", err)
		} else if res.completed() || res.deferred {
			r.log.Info("task outcome saved although the run stops at an earlier task", "task", bt.task.Index, "deferred", res.deferred, "findings_left", res.findingsLeft)
		}
	}
	return stop
}

// indices are the tasks' indices, in order.
func indices(tasks []plan.Task) []int {
	out := make([]int, len(tasks))
	for i, t := range tasks {
		out[i] = t.Index
	}
	return out
}
