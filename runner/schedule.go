package runner

import (
	"context"
	"errors"
	"peal/plan"

	"log/slog"

	"peal/check"
	"peal/internal/gitrepo"
	"peal/phase"
	"peal/review"
	"peal/state"
)

// taskResult is how one task ended.
type taskResult struct {
	err           error          // nil: the task completed
	findingsLeft  bool           // completed with review findings or failing checks left (on_findings_remaining = warn)
	leftover      *review.Review // the last review, when findings were left (completed or not)
	skipped       bool           // its ticket used up its retries: nothing ran
	deferred      bool           // findings left under on_findings_remaining = defer: neither completed nor failed
	reviewSkipped bool           // Phase 3 was skipped under on_stet_fail = skip
	// checks is the last run of the checks when it tells how the task left
	// its tree; failedChecks the checks charged to it that still failed
	// after its last round.
	checks       check.Results
	failedChecks []check.Result
	// plateau: its address loop ended early on a plateau.
	plateau bool
}

// phase3Result is a task's result after its Phase 3.
func phase3Result(res review.Result) taskResult {
	return taskResult{err: res.Err, findingsLeft: res.FindingsLeft, leftover: res.Leftover, deferred: res.Deferred, reviewSkipped: res.Skipped,
		checks: res.Checks, failedChecks: res.FailedChecks, plateau: res.Plateau}
}

// completed reports whether the result records the task as completed.
func (res taskResult) completed() bool { return res.err == nil && !res.skipped && !res.deferred }

// tally accumulates task outcomes, in index order, across the run.
type tally struct {
	out         Outcome
	consecutive int
}

// schedule runs the segments in order and decides what each task outcome
// does to the run.
func (r *run) schedule(ctx context.Context, segs []plan.Segment) (Outcome, error) {
	var tl tally
	for _, seg := range segs {
		pending := pendingOf(r.store, r.log, seg.Tasks)
		if r.runsAsBlock(seg, pending) {
			if err := r.runBlock(ctx, &tl, pending); err != nil {
				return tl.out, err
			}
			continue
		}
		for _, t := range pending {
			res, err := r.runTicketedTask(ctx, t)
			if err != nil {
				return tl.out, err
			}
			if err := r.record(ctx, &tl, t, res); err != nil {
				return tl.out, err
			}
		}
	}
	return tl.out, nil
}

// pendingOf drops the tasks a previous run completed.
func pendingOf(store *state.Store, log *slog.Logger, tasks []plan.Task) []plan.Task {
	var out []plan.Task
	for _, t := range tasks {
		if store.Completed(t.Index) {
			log.Info("task already completed, skipping", "task", t.Index)
			continue
		}
		out = append(out, t)
	}
	return out
}

// runTicketedTask runs a sequential task inside its ticket's attempt. An
// error ends the run (another process holds the ticket).
func (r *run) runTicketedTask(ctx context.Context, t plan.Task) (taskResult, error) {
	if err := r.tickets.beginTask(t); err != nil {
		if errors.Is(err, errSkipped) {
			return taskResult{skipped: true}, nil
		}
		return taskResult{}, err
	}
	var res taskResult
	if err := r.recoverTask(t, func() { res = r.runOnTree(ctx, t) }); err != nil {
		res = taskResult{err: err}
	}
	res = r.broughtBack(ctx, t, res)
	r.tickets.finishTask(t, res)
	return res, nil
}

// runOnTree runs a task in the work tree itself: the checks that fail on
// the tree before it are not its to fix, and what its Phase 3 says of the
// checks is what the tree holds after it.
func (r *run) runOnTree(ctx context.Context, t plan.Task) taskResult {
	at, err := r.atHome(ctx)
	if err != nil {
		return taskResult{err: err}
	}
	red, err := r.chk.before(ctx, t)
	if err != nil {
		return taskResult{err: err}
	}
	r.chk.startsOnTree(t.Index, red)
	res := r.runTask(ctx, at, t, red)
	r.chk.seenOf(res)
	return res
}

// record applies one task's result to the run: a completion is saved at once;
// a failure stops the run unless continue_with_remaining_tasks, and counts
// toward max_consecutive_task_failures. A non-nil error ends the run.
func (r *run) record(ctx context.Context, tl *tally, t plan.Task, res taskResult) error {
	r.rec.taskEnd(t, res)
	r.sessions.TaskEnded(t.Index, res.completed(), res.plateau)
	if len(res.failedChecks) > 0 {
		tl.out.ChecksFailed = append(tl.out.ChecksFailed, t.Index)
	}
	if r.cfg.TicketID != "" {
		if res.leftover != nil {
			r.tickets.addLeftover(*res.leftover)
		}
		r.tickets.addFailedChecks(res.failedChecks)
	}
	if res.skipped {
		tl.out.Skipped = append(tl.out.Skipped, t.Index)
		return nil
	}
	if res.deferred {
		// Neither a completion nor a failure: the consecutive count stays.
		tl.out.Deferred = append(tl.out.Deferred, t.Index)
		return r.save(ctx, t, res)
	}
	if res.err == nil {
		tl.consecutive = 0
		if err := r.save(ctx, t, res); err != nil {
			return err
		}
		r.chk.completedOnTree(t.Index)
		if res.findingsLeft {
			tl.out.WithFindings = append(tl.out.WithFindings, t.Index)
			r.log.Warn("task completed with review findings left", "task", t.Index)
		} else {
			tl.out.Completed = append(tl.out.Completed, t.Index)
			r.log.Info("task completed", "task", t.Index)
		}
		if res.reviewSkipped {
			tl.out.ReviewSkipped = append(tl.out.ReviewSkipped, t.Index)
		}
		return nil
	}
	if ctx.Err() != nil {
		return res.err
	}
	taskErr := &TaskError{Index: t.Index, Err: res.err}
	if endsRun(res.err) {
		// An unreachable agent stops the run even under
		// continue_with_remaining_tasks: the next task would meet the same outage.
		return taskErr
	}
	// The cap is checked first, with or without continue_with_remaining_tasks
	// (as Peal does): a cap of 1 stops at the first failure with exit 3.
	tl.consecutive++
	if max := r.cfg.MaxConsecutiveTaskFailures; max != nil && tl.consecutive >= int(*max) {
		return &StoppedError{Failures: tl.consecutive, Last: taskErr}
	}
	if !r.cfg.ContinueWithRemainingTasks {
		return taskErr
	}
	tl.out.Failed = append(tl.out.Failed, t.Index)
	r.log.Error("task failed, continuing with the remaining tasks", "task", t.Index, "err", res.err)
	return nil
}

// save writes what a task's result means for state.json: a completion or a
// deferral; a failure or a skip leaves it as it is.
func (r *run) save(ctx context.Context, t plan.Task, res taskResult) error {
	switch {
	case res.deferred:
		return r.store.Defer(t.Index)
	case res.completed():
		return r.store.Complete(t.Index)
	}
	return nil
}

// broughtBack is res, the result of task t that worked at the run's home,
// once its work is in the work tree (see bringBack): a task whose work the
// work tree cannot take did not complete.
func (r *run) broughtBack(ctx context.Context, t plan.Task, res taskResult) taskResult {
	err := r.bringBack(ctx)
	var embedded *gitrepo.EmbeddedError
	switch {
	case err == nil:
	case res.err == nil && !res.skipped:
		return taskResult{err: err}
	case errors.As(res.err, &embedded) && errors.As(err, &embedded):
		// The task failed for what its work is kept for: the line that
		// names the branch says it all.
		return taskResult{err: err}
	default:
		r.log.Error("the work tree could not take the work of a task that did not complete", "task", t.Index, "err", err)
	}
	return res
}

// runTask runs every phase of one task at its site, one after the other,
// inside its review session: the session opens before the first agent
// call, the work is committed after execute (when commits are on), Phase 3
// reviews it and runs the checks (red: those that failed before the task),
// and the session closes whatever happened.
func (r *run) runTask(ctx context.Context, at *site, t plan.Task, red check.Set) taskResult {
	sess, err := at.reviewer.Begin(ctx, []int{t.Index})
	if err != nil {
		return taskResult{err: err}
	}
	completed := false // stays false when a phase panics
	defer func() { sess.End(ctx, completed) }()
	res := r.taskPhases(ctx, at, sess, t, red)
	completed = res.completed()
	return res
}

// taskPhases runs plan, execute, the commit and Phase 3 of a task at its
// site.
func (r *run) taskPhases(ctx context.Context, at *site, sess *review.Session, t plan.Task, red check.Set) taskResult {
	planText, err := r.planAndExecute(ctx, at, t)
	if err == nil && at.commits {
		_, err = at.git.Commit(ctx, []int{t.Index}, planText)
	}
	if err != nil {
		return taskResult{err: err}
	}
	return phase3Result(sess.Review(ctx, t.Index, red))
}

// endsRun reports an error after which no task can succeed (see
// phase.RunEnder).
func endsRun(err error) bool { return phase.EndsRun(err) }

// planAndExecute runs Phases 1 and 2 at a site and returns the plan text.
func (r *run) planAndExecute(ctx context.Context, at *site, t plan.Task) (string, error) {
	r.log.Info("task started", "task", t.Index)
	r.rec.taskStart(t)
	if r.taskStart != nil {
		r.taskStart(t)
	}
	planText, err := r.planTask(ctx, at, t)
	if err != nil {
		return "", err
	}
	return planText, r.execute(ctx, at, t, planText)
}
