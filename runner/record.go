package runner

import (
	"fmt"
	"os"
	"peal/plan"
	"time"

	"peal/agent"
	"peal/agentcall"
	"peal/check"
	"peal/internal/text"
	"peal/phase"
	"peal/review"
	"peal/state"
)

// recorder keeps the run record (state.RecordName): every call's start and
// end, how the retry loop judged it, the tokens agent calls reported, what
// the confinement refused them, the checks, the merges, and the tasks'
// starts and ends, so that `peal report` can tell the run's story without
// reading text meant for people. It is the phase.Recorder of every call,
// beside the run's observer, and agentcall's Recorder.
type recorder struct{ run *run }

// start begins the run record in the state folder, which the run has
// locked, with the run's first facts; every call is recorded from then on. The
// run's process id is on the first line, so that a reader tells a run that
// is still going (normalizing its plan, say) from one that was killed. A
// record that cannot be started is a warning: the run goes on without one.
func (o *recorder) start() {
	r := o.run
	rec, err := state.StartRecord(r.cfg.StateDir, func(err error) {
		r.log.Warn("could not write the run record; the rest of the run is not recorded", "err", err)
	})
	if err != nil {
		r.log.Warn("could not start the run record; this run is not recorded", "err", err)
		return
	}
	r.journal = rec
	if rec.Torn != "" {
		r.log.Warn("the previous run record's last line was torn (a kill or a full disk cut its write): the record ends with its last whole line now, the torn bytes are kept", "kept", rec.Torn)
	}
	now := r.now().UTC()
	rec.Add(state.Event{Ev: state.EvRunStart, Time: now, Version: state.RecordVersion,
		Run: fmt.Sprintf("%s-%d", now.Format("20060102T150405Z"), os.Getpid()), PID: os.Getpid(),
		PlanPath: r.cfg.PlanPath, RepoPath: r.cfg.RepoPath, AgentKind: r.cfg.AgentKind, Parallel: r.cfg.Parallel,
		TicketID: r.cfg.TicketID, Confinement: r.confined.Note()})
}

// tasks writes the tasks the run selected, once the plan is known
// (after its normalization, if it needed one).
func (o *recorder) tasks(tasks []plan.Task) {
	r := o.run
	r.journal.Add(state.Event{Ev: state.EvTasks, Time: r.now().UTC(), Tasks: indices(tasks)})
}

// end writes the run's exit code and reason and closes the record.
func (o *recorder) end(out Outcome, err error) {
	r := o.run
	if r.journal == nil {
		return
	}
	code, msg := out.ExitCode, ""
	if r.ending != nil {
		code, msg = r.ending(out, err)
	} else if err != nil {
		code, msg = ExitFailure, err.Error()
	}
	r.journal.Add(state.Event{Ev: state.EvRunEnd, Time: r.now().UTC(), ExitCode: &code, Message: msg})
	r.journal.Close()
}

// taskStart notes that task t started.
func (o *recorder) taskStart(t plan.Task) {
	r := o.run
	r.journal.Add(state.Event{Ev: state.EvTaskStart, Time: r.now().UTC(), Task: state.TaskOf(t.Index)})
}

// taskEnd notes how task t ended, with the findings left by its last
// review.
func (o *recorder) taskEnd(t plan.Task, res taskResult) {
	r := o.run
	ev := state.Event{Ev: state.EvTaskEnd, Time: r.now().UTC(), Task: state.TaskOf(t.Index), Result: taskOutcome(res), NoRound: string(res.noRound)}
	if res.err != nil {
		ev.Error = text.Snippet(res.err.Error(), 500)
	}
	if res.leftover != nil {
		counts := review.GateCounts(*res.leftover)
		ev.Findings = &counts
	}
	r.journal.Add(ev)
}

// taskOutcome names a task's result in the run record.
func taskOutcome(res taskResult) string {
	switch {
	case res.skipped:
		return "skipped"
	case res.deferred:
		return "deferred"
	case res.err != nil && isInterrupted(res.err):
		return "interrupted"
	case res.err != nil:
		return "failed"
	case res.findingsLeft:
		return "findings_left"
	}
	return "completed"
}

// maxRecordedTail bounds the output a check's line of the run record keeps:
// the end of its tail, enough to see why it failed.
const maxRecordedTail = 8 << 10

// check notes how one of the project's checks ended.
func (o *recorder) check(res check.Result) {
	r := o.run
	if r.confined != nil && res.CallID != "" {
		call := r.confined.ForCall(r.siteOf(res.Dir).policy(), nil, nil)
		end := agentcall.Succeeded
		if !res.Passed() {
			end = agentcall.Failed
		}
		r.rec.Confined(call, res.Dir, res.Task, phase.Result{Phase: check.Phase, CallID: res.CallID, Stdout: res.Tail}, end)
	}
	code := res.ExitCode
	r.journal.Add(state.Event{Ev: state.EvCheck, Time: r.now().UTC(), Task: state.TaskOf(res.Task), Call: res.CallID,
		Stage: string(res.Stage), Round: res.Round, Command: res.Command, ExitCode: &code, TimedOut: res.TimedOut,
		Interrupted: res.Interrupted, DurationMS: res.Duration.Milliseconds(), Tail: check.Within(res.Tail, maxRecordedTail), StartErr: res.StartErr})
}

// merge notes how the merge of a task of a parallel block went, once
// its branch is settled (kept, when the work was not merged).
func (o *recorder) merge(bt blockTask) {
	r := o.run
	m := bt.merge
	if m == nil {
		return
	}
	ev := state.Event{Ev: state.EvMerge, Time: m.start.UTC(), Task: state.TaskOf(bt.task.Index), DurationMS: m.end.Sub(m.start).Milliseconds(),
		Result: state.MergeMerged, Branch: r.trees.Of(bt.task.Index).Branch}
	c := bt.conflict
	switch {
	case bt.merged:
	case m.interrupted:
		ev.Result, ev.Kept = state.MergeInterrupted, bt.branch
	case c != nil:
		rec := c.record()
		ev.Result, ev.Kept, ev.Files, ev.Detail, ev.Checks = state.MergeConflict, c.branch(), rec.Files, rec.Detail, rec.Checks
		if len(rec.Checks) > 0 {
			ev.Result = state.MergeChecksFailed
		}
	default:
		ev.Result, ev.Kept = state.MergeFailed, bt.branch
		if bt.res.err != nil {
			ev.Detail = text.Snippet(bt.res.err.Error(), 500)
		}
	}
	r.journal.Add(ev)
}

// Usage notes the tokens and cost one attempt of an agent call (its call
// id) reported, and how it stood to its session (began or continued, the
// id; "" without agent_session = "task"). An attempt that reported nothing
// and belongs to no session is not noted.
func (o *recorder) Usage(task int, name phase.Name, call string, u agent.Usage, session, id string) {
	if u == (agent.Usage{}) && session == "" {
		return
	}
	r := o.run
	su := agentcall.ToState(u)
	r.journal.Add(state.Event{Ev: state.EvUsage, Time: r.now().UTC(), Task: state.TaskOf(task), Phase: name, Call: call, Usage: &su,
		Session: session, SessionID: id})
}

// CallBegan, CallEnded and AttemptJudged write a call's lines (see
// state.CallStart).
func (o *recorder) CallBegan(info phase.CallInfo) { o.run.journal.Add(state.CallStart(info)) }
func (o *recorder) CallEnded(id string, res phase.Result, err error) {
	o.run.journal.Add(state.CallEnd(id, res, err, o.run.now()))
}
func (o *recorder) AttemptJudged(id string, v phase.Verdict, retry bool, wait time.Duration) {
	o.run.journal.Add(state.AttemptEnd(id, v, retry, wait, o.run.now()))
}
