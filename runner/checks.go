package runner

import (
	"context"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"peal/check"
	"peal/phase"
	"peal/plan"
	"peal/state"
)

// The project's own checks (check_commands) decide, with the review, when a
// task is done: Phase 3 runs them after every execute and every address
// round (package review). The run keeps what they say of the work tree: the
// checks that fail on it (red), which no task that starts on it is charged
// with until they pass, and whether the tree changed since they last ran
// (stale). A check that failed before a task is not that task's fault; the
// work a task left unfinished is that task's, on a re-run too
// (state.ChecksNote).

// checking is the run's use of the project's checks: what they last said
// of the work tree (check.Seen, marked before a task: markHome), and when
// they run and whom they are charged to.
type checking struct {
	r *run
	check.Seen
}

// putBack notes that the work tree was put back as it was marked, the work
// of task kept apart: the checks say what they said then, and no work of
// task is left unfinished in it.
func (k *checking) putBack(task int) {
	k.Back()
	k.completedOnTree(task)
}

// make makes the run's checks (none without check_commands): each
// runs in the folder of the run's caller, under check_timeout_sec, with
// the ticket of its task in its environment, its whole output in
// agent_log_dir, and its outcome in the run record.
func (k *checking) make() *check.Checks {
	r := k.r
	timeout := r.caller.Limits.Timeout
	if t := r.cfg.CheckTimeoutSec; t != nil {
		timeout = time.Duration(*t) * time.Second
	}
	return check.New(r.cfg.CheckCommands, timeout, r.caller, r.log, check.Hooks{
		Env: func(task int) []string {
			if tr := r.tickets.of(task); tr != nil {
				return []string{"PEAL_TICKET_ID=" + tr.id}
			}
			return nil
		},
		Output: func(task int) (io.Writer, func()) {
			files := r.agentLogs.Call(check.Phase, task)
			return files.Combined(), files.Close
		},
		Ran:     r.rec.check,
		Confine: r.confineCommand,
	})
}

// all are the run's checks (nil: none), at the run's home as it is now.
func (k *checking) all() *check.Checks { return k.r.home.checks() }

// atHome are the run's checks (nil: none) where the run's tasks work,
// ready for them to run (see atHome).
func (k *checking) atHome(ctx context.Context) (*check.Checks, error) {
	r := k.r
	if k.all() == nil {
		return nil, nil
	}
	at, err := r.atHome(ctx)
	if err != nil {
		return nil, err
	}
	return at.checks(), nil
}

// start runs the checks once on the starting tree, before the first
// agent call of the run's tasks. What fails there is said in one line and
// charged to no task until it passes, unless the state folder names a task
// of this run whose unfinished work is in the tree: then what fails beyond
// the checks that failed before that task started is charged to the run's
// tasks, which run that task again.
func (k *checking) start(ctx context.Context, pending []plan.Task) error {
	r := k.r
	c, err := k.atHome(ctx)
	if c == nil || err != nil {
		return err
	}
	before, _ := r.home.git.Changes(ctx)
	results, err := c.Run(ctx, phase.NoTask, check.Start, 0)
	if err != nil {
		return err
	}
	k.noteLeftovers(ctx, before)
	red := results.Failing()
	rec, ok := state.ReadChecksNote(r.cfg.StateDir, r.now(), r.log.Warn)
	if ok && r.store.Completed(rec.Task) {
		k.completedOnTree(rec.Task) // a run ended between the task's save and the note's removal
		ok = false
	}
	unfinished := ok && slices.ContainsFunc(pending, func(t plan.Task) bool { return t.Index == rec.Task })
	var charged check.Set
	if unfinished {
		charged = red.Minus(check.Set(rec.FailingBefore))
		red = red.Intersect(check.Set(rec.FailingBefore))
	}
	k.Ran(red)
	failedNow := results.Charged(nil) // every failure
	switch {
	case len(failedNow) == 0:
		r.log.Info("checks pass on the starting tree", "checks", len(results))
	case len(charged) > 0:
		r.log.Warn("checks fail on the starting tree, which holds the unfinished work of task "+strconv.Itoa(rec.Task)+
			": the tasks of this run are answerable for them, task "+strconv.Itoa(rec.Task)+" first: "+check.Summaries(failedNow, 3),
			"unfinished_task", rec.Task, "charged", []string(charged), "failed_before_it", []string(red))
	default:
		r.log.Warn("checks fail on the starting tree, before any task: no task is charged with them until they pass, and the run cannot end with exit 0 while they fail: "+
			check.Summaries(failedNow, 3), "failing", []string(red))
	}
	return nil
}

// noteLeftovers warns when the checks left changes in the work tree
// that were not there before they ran: a task's commit would take them
// for its work, and stet refuses to review over them.
func (k *checking) noteLeftovers(ctx context.Context, before []string) {
	r := k.r
	after, err := r.home.git.Changes(ctx)
	if err != nil {
		return
	}
	added := slices.DeleteFunc(after, func(p string) bool { return slices.Contains(before, p) })
	if len(added) > 0 {
		r.log.Warn("the checks left files in the work tree that git does not ignore; add them to .gitignore, or a task's commit takes them for its work",
			"paths", strings.Join(added, ", "))
	}
}

// before is the set of checks failing on the work tree before task t
// starts on it, running the checks first when the tree may have changed
// since they last ran (the work of a task that did not complete).
func (k *checking) before(ctx context.Context, t plan.Task) (check.Set, error) {
	return k.fresh(ctx, t.Index, check.Before)
}

// fresh is the set of checks failing on the work tree now: what they
// last said, or, when the tree may have changed since, what they say when
// run again (for task, at stage).
func (k *checking) fresh(ctx context.Context, task int, stage check.Stage) (check.Set, error) {
	r := k.r
	red, stale := k.Now()
	if k.all() == nil || !stale {
		return red, nil
	}
	c, err := k.atHome(ctx)
	if err != nil {
		return nil, err
	}
	r.log.Info("checks run again: the work of a task that did not complete may have changed what they say", "task", task, "stage", stage)
	results, err := c.Run(ctx, task, stage, 0)
	if err != nil {
		return nil, err
	}
	k.Ran(results.Failing())
	return results.Failing(), nil
}

// sparse is the set of checks that fail before task t starts in its
// worktree: red, the work tree's, when the worktree holds the whole tree;
// in a sparse worktree (worktree_sparse_paths), what also fails there
// before the task's first agent call, for want of the files outside the
// set, which the task cannot be charged with. The run is the task's own,
// in its worktree; the merged tree's checks, on the whole tree, still
// decide its merge.
func (k *checking) sparse(ctx context.Context, at *site, t plan.Task, red check.Set) (check.Set, error) {
	r := k.r
	c := at.checks()
	if c == nil || !r.trees.Sparse() {
		return red, nil
	}
	results, err := c.Run(ctx, t.Index, check.Before, 0)
	if err != nil {
		return nil, err
	}
	if extra := results.Failing().Minus(red); len(extra) > 0 {
		r.log.Info("checks fail in the task's sparse worktree before it starts: they are not its to fix there; the merged tree's checks decide",
			"task", t.Index, "checks", []string(extra))
	}
	return red.Union(results.Failing()), nil
}

// seenOf takes what the Phase 3 of work done in the work tree says of
// the tree it leaves: the last run of the checks, or, without one, that the
// tree may have changed since they last ran.
func (k *checking) seenOf(res taskResult) {
	if k.all() == nil || res.skipped {
		return
	}
	if res.checks != nil {
		k.Ran(res.checks.Failing())
	} else {
		k.Changed()
	}
}

// startsOnTree notes, before the first agent call of tasks that work in
// the work tree, that their work may be found there unfinished; the first
// such task keeps the note until it completes.
func (k *checking) startsOnTree(task int, red check.Set) {
	r := k.r
	if k.all() == nil {
		return
	}
	if _, ok := state.ReadChecksNote(r.cfg.StateDir, r.now(), r.log.Warn); ok {
		return // an earlier task's work is still unfinished there
	}
	if err := state.WriteChecksNote(r.cfg.StateDir, state.ChecksNote{Task: task, FailingBefore: red}); err != nil {
		r.log.Warn("could not note the task's start in the state folder; a re-run will not know its unfinished work from what failed before it",
			"task", task, "err", err)
	}
}

// completedOnTree drops the note of task's start once it completed.
func (k *checking) completedOnTree(task int) {
	r := k.r
	if rec, ok := state.ReadChecksNote(r.cfg.StateDir, r.now(), r.log.Warn); ok && rec.Task == task {
		if err := state.RemoveChecksNote(r.cfg.StateDir); err != nil {
			r.log.Warn("could not remove the note of a completed task", "task", task, "err", err)
		}
	}
}

// final fills what the outcome says of the checks on the final tree,
// running them once more when the tree may have changed since they last
// ran, so that a run never ends with exit 0 on a tree whose checks fail.
func (k *checking) final(ctx context.Context, out *Outcome) error {
	if k.all() == nil {
		return nil
	}
	red, err := k.fresh(ctx, phase.NoTask, check.End)
	if err != nil {
		return err
	}
	out.ChecksFailing, out.ChecksFailed = nonNilStrings(red), nonNil(out.ChecksFailed)
	return nil
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}
