// Package report tells the story of a peal run from what the run wrote: the
// run record (state.RecordName), the state file, the run summary, the
// retry-state store and the agent logs. It renders it as a GitHub Markdown
// summary and a one-file HTML timeline; the Report itself, encoded, is the
// JSON document. It builds too `peal status`'s view of a plan's tasks
// (Status), which the report reads. It reads only; it starts nothing.
package report

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"peal/check"
	"peal/internal/text"
	"peal/phase"
	"peal/state"
	"peal/tickets"
)

// Version is the version of the JSON document; fields are only ever added
// within a version.
const Version = 1

// RunState is how far the report's run got: Run.State.
type RunState string

// Run states.
const (
	RunFinished RunState = "finished" // the record has its last line
	RunRunning  RunState = "running"  // no last line yet, and the run's process is alive
	RunCutOff   RunState = "cut_off"  // no last line, and the run's process is gone: killed
	RunNone     RunState = "none"     // no run record
)

// CallOutcome is how a call ended: Call.Outcome.
type CallOutcome string

// Call outcomes.
const (
	CallOK       CallOutcome = "ok"
	CallOrdinary CallOutcome = "ordinary" // an ordinary failure: a non-zero exit or a bad answer
	// CallExited: a call that is not retried (git, a post-run command)
	// exited non-zero, which may be its answer (git diff --quiet).
	CallExited      CallOutcome = "nonzero_exit"
	CallTimeout     CallOutcome = "timeout"
	CallNetwork     CallOutcome = "network"
	CallRateLimit   CallOutcome = "rate_limit"
	CallFatal       CallOutcome = "fatal"
	CallTransient   CallOutcome = "transient"
	CallInterrupted CallOutcome = "interrupted" // stopped by a signal to peal
	CallRunning     CallOutcome = "running"
	CallCutOff      CallOutcome = "cut_off" // started, and the run was killed before it ended
)

// NoRound is why a task's Phase 3 asked the agent for no address round:
// Task.NoRound.
type NoRound string

// Why no address round.
const (
	NoRoundUnreviewed    NoRound = "unreviewed"     // nothing reviewed the work (no stet); the checks, if any, passed
	NoRoundReviewSkipped NoRound = "review_skipped" // the review failed and was set aside (on_stet_fail = skip)
	NoRoundNoFindings    NoRound = "no_findings"    // the review found nothing
	NoRoundAllDismissed  NoRound = "all_dismissed"  // every finding was dismissed (triage, stet_dismiss_patterns)
)

// Report is the document `peal report` prints.
type Report struct {
	Version int    `json:"version"`
	Run     Run    `json:"run"`
	Tasks   []Task `json:"tasks"`
	// Calls are every supervised call of the run, in the order they started;
	// a call of no task (git, stet's session, normalize) has task -1.
	Calls []Call `json:"calls"`
	// Totals say where the time and the retries went.
	Totals Totals `json:"totals"`
	// Checks are every run of one of the project's checks, in the order
	// they ended (check_commands; absent without checks).
	Checks []CheckRun `json:"checks,omitempty"`
	// Merges are the merges of the tasks of parallel blocks into the work
	// tree, in the order they began.
	Merges []Merge `json:"merges,omitempty"`
	// Usage is the run's tokens and cost, when agent calls reported them.
	Usage *state.Usage `json:"usage,omitempty"`
	// Kept is what peal keeps for the user in the repository (the work of
	// tasks that did not complete, files a task removed or replaced), each
	// with the commands that take it back, the newest first.
	Kept []state.Kept `json:"kept,omitempty"`
	// Notes say what the report could not read (a missing record).
	Notes []string `json:"notes,omitempty"`
}

// Totals add up the calls: the time spent in each phase's calls (parallel
// calls each count), the time waited before retries, and the attempts that
// failed by outcome.
type Totals struct {
	CallMSByPhase  map[phase.Name]int64 `json:"call_ms_by_phase"`
	WaitMS         int64                `json:"wait_ms"`
	FailedAttempts map[string]int       `json:"failed_attempts"`
	// CheckRuns and FailedChecks count the runs of the checks and those
	// that did not pass; Merges counts the merges by result.
	CheckRuns    int                 `json:"check_runs,omitempty"`
	FailedChecks int                 `json:"failed_checks,omitempty"`
	Merges       map[MergeResult]int `json:"merges,omitempty"`
	// RefusedConnections counts the connections the confinement's proxy
	// refused; DeniedCalls the calls that failed on what it refused.
	RefusedConnections int `json:"refused_connections,omitempty"`
	DeniedCalls        int `json:"denied_calls,omitempty"`
}

// CheckOutcome is how one run of a check ended.
type CheckOutcome string

// Check outcomes.
const (
	CheckPassed      CheckOutcome = "passed"
	CheckFailed      CheckOutcome = "failed"
	CheckTimeout     CheckOutcome = "timeout"
	CheckInterrupted CheckOutcome = "interrupted"
	CheckNotStarted  CheckOutcome = "not_started" // the command could not be started
)

// CheckRun is one run of one of the project's checks.
type CheckRun struct {
	// Task is -1 for the starting tree (stage start) or the final one (end).
	Task int `json:"task"`
	// Stage says when it ran: start, before (a task, after work that did
	// not complete), execute, address (after round Round), merge (the work
	// tree, once the task was merged), end.
	Stage      check.Stage  `json:"stage"`
	Round      int          `json:"round,omitempty"`
	Command    string       `json:"command"`
	Call       string       `json:"call,omitempty"`
	Ended      time.Time    `json:"ended"`
	DurationMS int64        `json:"duration_ms"`
	ExitCode   *int         `json:"exit_code,omitempty"`
	Outcome    CheckOutcome `json:"outcome"`
	// Tail is the end of its output as the run record keeps it.
	Tail string `json:"tail,omitempty"`
}

// MergeResult is how a parallel block's task came back to the work tree.
type MergeResult string

// Merge results.
const (
	MergeMerged       MergeResult = state.MergeMerged
	MergeConflict     MergeResult = state.MergeConflict
	MergeChecksFailed MergeResult = state.MergeChecksFailed
	MergeFailed       MergeResult = state.MergeFailed
	MergeInterrupted  MergeResult = state.MergeInterrupted
)

// Merge is the merge of a task of a parallel block into the work tree.
type Merge struct {
	Task       int         `json:"task"`
	Result     MergeResult `json:"result"`
	Branch     string      `json:"branch,omitempty"`
	Kept       string      `json:"kept,omitempty"`   // where the work is kept when it was not merged
	Files      []string    `json:"files,omitempty"`  // the conflicting files
	Checks     []string    `json:"checks,omitempty"` // the checks the merged tree failed
	Detail     string      `json:"detail,omitempty"`
	Started    time.Time   `json:"started"`
	DurationMS int64       `json:"duration_ms"`
	// RanAgain: the task ran again, alone, after its merge was undone.
	RanAgain bool `json:"ran_again,omitempty"`
}

// Run is the run as a whole.
type Run struct {
	ID        string     `json:"id,omitempty"`
	State     RunState   `json:"state"`
	PlanPath  string     `json:"plan_path"`
	RepoPath  string     `json:"repo_path"`
	AgentKind string     `json:"agent_kind,omitempty"`
	Parallel  bool       `json:"parallel"`
	TicketID  string     `json:"ticket_id,omitempty"`
	Started   *time.Time `json:"started,omitempty"`
	Ended     *time.Time `json:"ended,omitempty"`
	// DurationMS runs to the end, or to the last thing recorded.
	DurationMS int64 `json:"duration_ms"`
	// ExitCode and Reason are peal's exit code and last line; absent
	// until the run has ended, and for a run that was killed.
	ExitCode *int   `json:"exit_code,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// CutOff are the ids of the calls a killed run left unfinished.
	CutOff []string `json:"cut_off,omitempty"`
	// Confinement is what the run's confinement enforced ("off": none;
	// absent in records of earlier versions of peal).
	Confinement string `json:"confinement,omitempty"`
}

// Task is one task of the plan.
type Task struct {
	Index int `json:"index"`
	// Result: completed, findings_left, failed, deferred, skipped,
	// interrupted, running, cut_off (the run was killed while it ran),
	// done_before (completed by an earlier run) or pending.
	Result     string     `json:"result"`
	Error      string     `json:"error,omitempty"`
	Started    *time.Time `json:"started,omitempty"`
	Ended      *time.Time `json:"ended,omitempty"`
	DurationMS int64      `json:"duration_ms"`
	// Phases are the task's calls by phase, in the order the phases
	// first ran.
	Phases       []Phase `json:"phases"`
	ReviewRounds int     `json:"review_rounds"`
	// NoRound says why there was no review round, for a task that went
	// through Phase 3 and was asked to fix nothing (absent otherwise, and
	// in records of earlier versions of peal).
	NoRound NoRound `json:"no_round,omitempty"`
	// Checks are the task's runs of the project's checks, grouped by when
	// they ran (the stage and round), in order.
	Checks []CheckPass `json:"checks,omitempty"`
	// Merges are the merges of the task's work, when it ran in a parallel
	// block.
	Merges   []Merge         `json:"merges,omitempty"`
	Findings *tickets.Counts `json:"findings_left,omitempty"`
	Usage    *state.Usage    `json:"usage,omitempty"`
	Ticket   string          `json:"ticket"`
	// TicketAttempts and RetryCount are the ticket's in the retry-state
	// store.
	TicketAttempts int `json:"ticket_attempts"`
	RetryCount     int `json:"retry_count"`
}

// Phase is what one phase of a task took.
type Phase struct {
	Name phase.Name `json:"name"`
	// Calls counts the phase's calls (an address round is a call), Attempts
	// their attempts.
	Calls    int `json:"calls"`
	Attempts int `json:"attempts"`
	// Failures are the outcomes of the attempts that failed, in order
	// (ordinary, timeout, network, rate_limit, fatal, cut_off, …); a call
	// still running has not failed.
	Failures []CallOutcome `json:"failures"`
}

// CheckPass is one run of every check at one point of a task: after its
// execute, after an address round, on the merged tree.
type CheckPass struct {
	Stage check.Stage `json:"stage"`
	Round int         `json:"round,omitempty"`
	// Failed are the commands that did not pass (none: every check passed).
	Failed []string `json:"failed"`
	ran    []string
}

// Call is one attempt of a supervised call: one child process.
type Call struct {
	ID      string     `json:"id"`
	Task    int        `json:"task"`
	Phase   phase.Name `json:"phase"`
	Attempt int        `json:"attempt"`
	// Of is how many attempts the call could take when this one started;
	// Allowed is the call's own attempts, Network the retries on network
	// failures on top (0 for calls that are not retried).
	Of      int `json:"of"`
	Allowed int `json:"allowed"`
	Network int `json:"network"`
	// Counted is the attempt's number among those the retry counts allow
	// (absent: every attempt counts).
	Counted int        `json:"counted,omitempty"`
	Role    phase.Role `json:"role,omitempty"`
	Argv    []string   `json:"argv"`
	Started time.Time  `json:"started"`
	Ended   *time.Time `json:"ended,omitempty"`
	// DurationMS is to the end, or to the report for a running call, or to
	// the last thing recorded for a call cut off.
	DurationMS int64       `json:"duration_ms"`
	ExitCode   *int        `json:"exit_code,omitempty"`
	Outcome    CallOutcome `json:"outcome"`
	Reason     string      `json:"reason,omitempty"`
	// Retried: another attempt followed, after WaitMS.
	Retried bool  `json:"retried"`
	WaitMS  int64 `json:"wait_ms"`
	// Logs are the call's agent log files; LogHead the first lines of each
	// that could still be read.
	Logs    []string `json:"logs,omitempty"`
	LogHead []string `json:"log_head,omitempty"`
	// Refused are the hosts the confinement's proxy refused the call
	// (RefusedCount: how many connections); Denial is the line that
	// explains its failure by the confinement.
	Refused      []string `json:"refused,omitempty"`
	RefusedCount int      `json:"refused_count,omitempty"`
	Denial       string   `json:"denial,omitempty"`
	// Usage is what an agent call reported (structured output): tokens
	// in, cached among them, out, and the cost. Session says whether it
	// began (began) or continued (continued) the task's agent session
	// (agent_session = "task"), SessionID which.
	Usage     *state.Usage `json:"usage,omitempty"`
	Session   string       `json:"session,omitempty"`
	SessionID string       `json:"session_id,omitempty"`

	judged  bool      // the retry loop judged it
	streams []logFile // Logs with the stream each holds
}

// logFile is an agent log file and the stream it holds (stdout, stderr).
type logFile struct{ stream, path string }

// callLogs are the agent log files a call_start names. A record of an
// earlier version of peal lists them in logs: stdout's, then stderr's.
func callLogs(ev state.Event) []logFile {
	var out []logFile
	if ev.StdoutLog != "" || ev.StderrLog != "" {
		for _, f := range []logFile{{"stdout", ev.StdoutLog}, {"stderr", ev.StderrLog}} {
			if f.path != "" {
				out = append(out, f)
			}
		}
		return out
	}
	for i, path := range ev.Logs {
		stream := "stdout"
		if i > 0 {
			stream = "stderr"
		}
		out = append(out, logFile{stream, path})
	}
	return out
}

// Input is what a report is made of.
type Input struct {
	// Events is the run record; nil when there is none.
	Events []state.Event
	// Status is `peal status` of the same configuration.
	Status state.StatusReport
	// Now is the time of the report; Alive tells whether a process id still
	// runs (nil: unknown, taken as gone).
	Now   time.Time
	Alive func(pid int) bool
	// LogLines is how many first lines of each agent log are kept (0: none).
	LogLines int
}

// Build puts the report together.
func Build(in Input) Report {
	b := builder{in: in, calls: map[string]int{}, tasks: map[int]*taskAcc{}, undone: map[int]int{}}
	for _, ev := range in.Events {
		b.add(ev)
	}
	return b.finish()
}

type taskAcc struct {
	start, end *time.Time
	result     string
	noRound    NoRound
	err        string
	findings   *tickets.Counts
	usage      *state.Usage
}

type builder struct {
	in       Input
	rep      Report
	calls    map[string]int // call id → index in rep.Calls
	tasks    map[int]*taskAcc
	pid      int
	last     time.Time // the latest time recorded
	ended    bool
	killed   bool // the guard noted the run's peal was killed
	selected []int
	// undone are the merges (indices in rep.Merges) of tasks whose work
	// was not merged, by task, until the task starts again.
	undone map[int]int
}

func (b *builder) task(i int) *taskAcc {
	t := b.tasks[i]
	if t == nil {
		t = &taskAcc{}
		b.tasks[i] = t
	}
	return t
}

func (b *builder) add(ev state.Event) {
	if ev.Time.After(b.last) {
		b.last = ev.Time
	}
	task := -1
	if ev.Task != nil {
		task = *ev.Task
	}
	t := ev.Time
	switch ev.Ev {
	case state.EvRunStart, state.EvTasks, state.EvRunEnd:
		b.addRun(ev, t)
	case state.EvTaskStart, state.EvTaskEnd:
		b.addTask(ev, task, t)
	case state.EvCheck:
		run := CheckRun{Task: task, Stage: check.Stage(ev.Stage), Round: ev.Round, Command: ev.Command, Call: ev.Call, Ended: t,
			DurationMS: ev.DurationMS, ExitCode: ev.ExitCode, Outcome: checkOutcome(ev), Tail: ev.Tail}
		b.rep.Checks = append(b.rep.Checks, run)
	case state.EvMerge:
		m := Merge{Task: task, Result: MergeResult(ev.Result), Branch: ev.Branch, Kept: ev.Kept, Files: ev.Files, Checks: ev.Checks,
			Detail: ev.Detail, Started: t, DurationMS: ev.DurationMS}
		if m.Result != MergeMerged {
			b.undone[task] = len(b.rep.Merges)
		}
		b.rep.Merges = append(b.rep.Merges, m)
	case state.EvUsage:
		b.addUsage(ev, task)
	case state.EvCallStart:
		b.calls[ev.Call] = len(b.rep.Calls)
		c := Call{ID: ev.Call, Task: task, Phase: ev.Phase, Attempt: ev.Attempt, Of: ev.Of, Allowed: ev.Allowed,
			Network: ev.Network, Counted: ev.Counted, Role: ev.Role, Argv: nonNilStrings(ev.Argv), Started: t, streams: callLogs(ev)}
		for _, f := range c.streams {
			c.Logs = append(c.Logs, f.path)
		}
		b.rep.Calls = append(b.rep.Calls, c)
	case state.EvKilled:
		// The guard saw the run's peal die at ev.Time: the calls it cut
		// off ran until then (b.last), and the run is no longer running,
		// whatever process now has its pid.
		b.killed = true
	case state.EvCallEnd, state.EvConfined, state.EvAttempt:
		if i, ok := b.calls[ev.Call]; ok {
			b.addToCall(&b.rep.Calls[i], ev, t)
		}
	}
}

// addRun takes a line of the run's own: its start, the tasks it selected,
// its end.
func (b *builder) addRun(ev state.Event, t time.Time) {
	switch ev.Ev {
	case state.EvRunStart:
		r := &b.rep.Run
		r.ID, r.PlanPath, r.RepoPath, r.AgentKind, r.Parallel, r.TicketID = ev.Run, ev.PlanPath, ev.RepoPath, ev.AgentKind, ev.Parallel, ev.TicketID
		r.Confinement = ev.Confinement
		r.Started = &t
		b.pid = ev.PID
		if ev.Tasks != nil {
			b.selected = ev.Tasks
		}
	case state.EvTasks:
		b.selected = ev.Tasks
	case state.EvRunEnd:
		b.ended = true
		b.rep.Run.Ended = &t
		b.rep.Run.ExitCode, b.rep.Run.Reason = ev.ExitCode, ev.Message
	}
}

// addTask takes a task's start or end.
func (b *builder) addTask(ev state.Event, task int, t time.Time) {
	acc := b.task(task)
	if ev.Ev == state.EvTaskEnd {
		acc.end, acc.result, acc.err, acc.findings, acc.noRound = &t, ev.Result, ev.Error, ev.Findings, NoRound(ev.NoRound)
		return
	}
	// A task that runs again (after a conflict in its worktree) keeps its
	// first start; what its earlier run ended with no longer holds.
	if acc.start == nil {
		acc.start = &t
	}
	acc.end, acc.result, acc.err, acc.findings, acc.noRound = nil, "", "", nil, ""
	if i, ok := b.undone[task]; ok {
		b.rep.Merges[i].RanAgain = true
		delete(b.undone, task)
	}
}

// addUsage takes the tokens and cost a call reported: its task's, the
// run's, and, from records that keep it per attempt, the call's own.
func (b *builder) addUsage(ev state.Event, task int) {
	if ev.Usage != nil {
		acc := b.task(task)
		acc.usage = addUsage(acc.usage, *ev.Usage)
		b.rep.Usage = addUsage(b.rep.Usage, *ev.Usage)
	}
	if i, ok := b.calls[ev.Call]; ok && ev.Call != "" {
		c := &b.rep.Calls[i]
		if ev.Usage != nil && *ev.Usage != (state.Usage{}) {
			c.Usage = addUsage(c.Usage, *ev.Usage)
		}
		c.Session, c.SessionID = ev.Session, ev.SessionID
	}
}

// addToCall takes what a line says of call c: how it ended, what the
// confinement refused it, how the retry loop judged it.
func (b *builder) addToCall(c *Call, ev state.Event, t time.Time) {
	switch ev.Ev {
	case state.EvCallEnd:
		c.Ended, c.ExitCode, c.DurationMS = &t, ev.ExitCode, ev.DurationMS
		switch {
		case ev.Interrupted:
			c.Outcome = CallInterrupted
		case ev.TimedOut:
			c.Outcome = CallTimeout
		case ev.ExitCode != nil && *ev.ExitCode == 0:
			c.Outcome = CallOK
		default:
			c.Outcome = CallOrdinary
		}
	case state.EvConfined:
		c.Refused, c.RefusedCount, c.Denial = ev.Refused, ev.RefusedCount, ev.Message
	case state.EvAttempt:
		c.judged, c.Retried, c.WaitMS, c.Reason = true, ev.Retry, ev.WaitMS, ev.Reason
		if c.Outcome != CallTimeout && c.Outcome != CallInterrupted {
			c.Outcome = outcomeOf(ev.Class)
		}
	}
}

// checkOutcome is how a check's line of the record says it ended.
func checkOutcome(ev state.Event) CheckOutcome {
	switch {
	case ev.Interrupted:
		return CheckInterrupted
	case ev.StartErr != "":
		return CheckNotStarted
	case ev.TimedOut:
		return CheckTimeout
	case ev.ExitCode != nil && *ev.ExitCode == 0:
		return CheckPassed
	}
	return CheckFailed
}

// outcomes are the call outcomes of the classes the retry loop names in the
// record (phase.Class.String).
var outcomes = map[string]CallOutcome{
	phase.Succeeded.String():   CallOK,
	phase.Ordinary.String():    CallOrdinary,
	phase.Network.String():     CallNetwork,
	phase.RateLimited.String(): CallRateLimit,
	phase.Fatal.String():       CallFatal,
	phase.Transient.String():   CallTransient,
}

// outcomeOf is the outcome of an attempt the retry loop judged as class; a
// class it does not know is an ordinary failure.
func outcomeOf(class string) CallOutcome {
	if o, ok := outcomes[class]; ok {
		return o
	}
	return CallOrdinary
}

func (b *builder) finish() Report {
	rep := &b.rep
	rep.Version = Version
	st := b.in.Status
	rep.Kept = st.Kept
	if rep.Run.PlanPath == "" && st.LastRun != nil {
		rep.Run.PlanPath, rep.Run.RepoPath = st.LastRun.PlanPath, st.LastRun.RepoPath
	}
	switch {
	case len(b.in.Events) == 0:
		rep.Run.State = RunNone
		rep.Notes = append(rep.Notes, "no run record: no run yet in this state folder, or the last one ran a peal that kept none")
		if lr := st.LastRun; lr != nil {
			code := lr.ExitCode
			rep.Run.ExitCode = &code
		}
	case b.ended:
		rep.Run.State = RunFinished
	case b.pid != 0 && !b.killed && b.in.Alive != nil && b.in.Alive(b.pid):
		rep.Run.State = RunRunning
	default:
		rep.Run.State = RunCutOff
	}
	end := b.last
	if rep.Run.State == RunRunning {
		end = b.in.Now
	}
	for i := range rep.Calls {
		c := &rep.Calls[i]
		if c.Ended == nil {
			if rep.Run.State == RunRunning {
				c.Outcome = CallRunning
			} else {
				c.Outcome = CallCutOff
				rep.Run.CutOff = append(rep.Run.CutOff, c.ID)
			}
			c.DurationMS = max(end.Sub(c.Started).Milliseconds(), 0)
		}
		if c.Outcome == CallOrdinary && !c.judged {
			c.Outcome = CallExited
		}
		c.LogHead = logHead(c.streams, b.in.LogLines)
	}
	if rep.Run.Started != nil {
		stop := end
		if rep.Run.Ended != nil {
			stop = *rep.Run.Ended
		}
		rep.Run.DurationMS = max(stop.Sub(*rep.Run.Started).Milliseconds(), 0)
	}
	rep.Totals = Totals{CallMSByPhase: map[phase.Name]int64{}, FailedAttempts: map[string]int{}}
	for _, c := range rep.Calls {
		rep.Totals.CallMSByPhase[c.Phase] += c.DurationMS
		rep.Totals.WaitMS += c.WaitMS
		rep.Totals.RefusedConnections += c.RefusedCount
		if c.Denial != "" {
			rep.Totals.DeniedCalls++
		}
		if failed(c.Outcome) && c.Phase != check.Phase {
			rep.Totals.FailedAttempts[string(c.Outcome)]++
		}
	}
	for _, c := range rep.Checks {
		rep.Totals.CheckRuns++
		if c.Outcome != CheckPassed {
			rep.Totals.FailedChecks++
		}
	}
	for _, m := range rep.Merges {
		if rep.Totals.Merges == nil {
			rep.Totals.Merges = map[MergeResult]int{}
		}
		rep.Totals.Merges[m.Result]++
	}
	rep.Tasks = b.taskList(end)
	if rep.Calls == nil {
		rep.Calls = []Call{}
	}
	return *rep
}

// failed tells whether an attempt with this outcome failed: it did not
// succeed, is not running still, and is not the exit code of a call that is
// never retried, which may be its answer.
func failed(outcome CallOutcome) bool {
	return outcome != CallOK && outcome != CallRunning && outcome != CallExited
}

// taskList is every task of the plan (or of the record, when the plan's
// tasks are unknown), in index order.
func (b *builder) taskList(end time.Time) []Task {
	tl := taskLedger{byIndex: map[int]*Task{}}
	for _, ts := range b.in.Status.Tasks {
		t := tl.get(ts.Index)
		t.Ticket, t.TicketAttempts, t.RetryCount = ts.Ticket, ts.Attempts, ts.RetryCount
		if ts.Status == "completed" {
			t.Result = "done_before"
		}
		if ts.Usage != nil && b.rep.Run.State == RunNone {
			u := *ts.Usage
			t.Usage = &u
		}
	}
	for _, i := range b.selected {
		tl.get(i)
	}
	for i, acc := range b.tasks {
		if i >= 0 {
			b.fillTask(tl.get(i), acc, end)
		}
	}
	for _, c := range b.rep.Checks {
		if c.Task >= 0 {
			addCheckPass(tl.get(c.Task), c)
		}
	}
	for _, m := range b.rep.Merges {
		if m.Task >= 0 {
			t := tl.get(m.Task)
			t.Merges = append(t.Merges, m)
		}
	}
	for _, c := range b.rep.Calls {
		// A check's calls are its checks, not a phase of the task's.
		if c.Task >= 0 && c.Phase != check.Phase {
			addPhaseCall(tl.get(c.Task), c)
		}
	}
	sort.Ints(tl.order)
	out := make([]Task, 0, len(tl.order))
	for _, i := range tl.order {
		out = append(out, *tl.byIndex[i])
	}
	return out
}

// taskLedger gathers the tasks of a report by index, in the order they
// are first met.
type taskLedger struct {
	byIndex map[int]*Task
	order   []int
}

// get is task i, made pending at its first use.
func (tl *taskLedger) get(i int) *Task {
	if t, ok := tl.byIndex[i]; ok {
		return t
	}
	t := &Task{Index: i, Result: "pending", Phases: []Phase{}}
	tl.byIndex[i] = t
	tl.order = append(tl.order, i)
	return t
}

// fillTask gives task t what the record says of its run (acc); end is
// when a task still going is measured to.
func (b *builder) fillTask(t *Task, acc *taskAcc, end time.Time) {
	t.Started, t.Ended, t.Error, t.Findings, t.Usage = acc.start, acc.end, acc.err, acc.findings, acc.usage
	if t.ReviewRounds == 0 {
		t.NoRound = acc.noRound
	}
	switch {
	case acc.result != "":
		t.Result = acc.result
	case acc.start != nil && b.rep.Run.State == RunRunning:
		t.Result = "running"
	case acc.start != nil && b.rep.Run.State == RunCutOff:
		t.Result = "cut_off"
	case acc.start != nil:
		t.Result = "interrupted"
	}
	if acc.start != nil {
		stop := end
		if acc.end != nil {
			stop = *acc.end
		}
		t.DurationMS = max(stop.Sub(*acc.start).Milliseconds(), 0)
	}
}

// addCheckPass adds check run c to its task's passes: a pass is the checks
// of one stage and round, each once; a command seen again starts the next
// pass.
func addCheckPass(t *Task, c CheckRun) {
	if n := len(t.Checks); n == 0 || t.Checks[n-1].Stage != c.Stage || t.Checks[n-1].Round != c.Round || slices.Contains(t.Checks[n-1].ran, c.Command) {
		t.Checks = append(t.Checks, CheckPass{Stage: c.Stage, Round: c.Round, Failed: []string{}})
	}
	p := &t.Checks[len(t.Checks)-1]
	p.ran = append(p.ran, c.Command)
	if c.Outcome != CheckPassed {
		p.Failed = append(p.Failed, c.Command)
	}
}

// addPhaseCall counts call c in its task's phase of the same name.
func addPhaseCall(t *Task, c Call) {
	var p *Phase
	for j := range t.Phases {
		if t.Phases[j].Name == c.Phase {
			p = &t.Phases[j]
		}
	}
	if p == nil {
		t.Phases = append(t.Phases, Phase{Name: c.Phase, Failures: []CallOutcome{}})
		p = &t.Phases[len(t.Phases)-1]
	}
	p.Attempts++
	if c.Attempt <= 1 {
		p.Calls++
		if c.Phase == phase.Address {
			t.ReviewRounds++
		}
	}
	if failed(c.Outcome) {
		p.Failures = append(p.Failures, c.Outcome)
	}
}

// taskTable is the table of tasks both renderers show: a row per task, in
// words; the usage columns show when any agent call reported usage, the
// checks column when the run ran checks, the merge column when a task of a
// parallel block was merged (or not).
type taskTable struct {
	WithUsage, WithChecks, WithMerges bool
	Rows                              []taskRow
}

// taskRow is one task in the table; a cell with nothing to show is "–".
type taskRow struct {
	Index                              int
	Result, Phases, Findings, Duration string
	Rounds                             string // the count, and why it is 0 when the record says
	Tokens, Cost                       string
	Checks, Merge                      string
	Ticket                             string
	Attempts                           string // the ticket's attempts, and how many were blocked
	Error                              string
}

func (r Report) table() taskTable {
	tab := taskTable{WithUsage: r.Usage != nil, WithChecks: len(r.Checks) > 0, WithMerges: len(r.Merges) > 0, Rows: make([]taskRow, 0, len(r.Tasks))}
	for _, t := range r.Tasks {
		tab.WithUsage = tab.WithUsage || t.Usage != nil
		row := taskRow{Index: t.Index, Result: resultText(t), Phases: phasesText(t.Phases), Findings: findingsText(t.Findings),
			Duration: durationText(t), Rounds: roundsText(t), Tokens: "–", Cost: "–", Checks: checksText(t.Checks), Merge: mergesText(t.Merges),
			Ticket: t.Ticket, Attempts: attemptsText(t), Error: t.Error}
		if t.Usage != nil {
			row.Tokens = fmt.Sprintf("%d/%d", t.Usage.InputTokens, t.Usage.OutputTokens)
			row.Cost = fmt.Sprintf("$%.4f", t.Usage.CostUSD)
		}
		if row.Ticket == "" {
			row.Ticket = "–"
		}
		tab.Rows = append(tab.Rows, row)
	}
	return tab
}

// attemptsText is a ticket's attempts, with those tf counts as retries
// (blocked): "2", "3 (1 blocked)".
func attemptsText(t Task) string {
	if t.RetryCount > 0 {
		return fmt.Sprintf("%d (%d blocked)", t.TicketAttempts, t.RetryCount)
	}
	return fmt.Sprint(t.TicketAttempts)
}

// stageText names when checks ran: "execute", "round 2", "merged tree",
// "before", "starting tree", "final tree".
func stageText(stage check.Stage, round int) string {
	switch stage {
	case check.Address:
		return fmt.Sprintf("round %d", round)
	case check.Merge:
		return "merged tree"
	case check.Start:
		return "starting tree"
	case check.End:
		return "final tree"
	}
	return string(stage)
}

// checksText is how a task's checks went, pass by pass: "execute failed,
// round 1 passed"; "–" without checks.
func checksText(passes []CheckPass) string {
	if len(passes) == 0 {
		return "–"
	}
	parts := make([]string, len(passes))
	for i, p := range passes {
		how := " passed"
		if len(p.Failed) > 0 {
			how = " failed"
		}
		parts[i] = stageText(p.Stage, p.Round) + how
	}
	return strings.Join(parts, ", ")
}

// mergesText is how a task's merges went: "merged", or "conflict in
// shared.txt, kept on peal-kept/task-2-…, ran again alone"; "–" for a task
// that was not merged.
func mergesText(merges []Merge) string {
	if len(merges) == 0 {
		return "–"
	}
	parts := make([]string, len(merges))
	for i, m := range merges {
		parts[i] = mergeText(m)
	}
	return strings.Join(parts, "; ")
}

func mergeText(m Merge) string {
	var s string
	switch m.Result {
	case MergeMerged:
		return "merged"
	case MergeConflict:
		s = "conflict"
		if len(m.Files) > 0 {
			s += " in " + strings.Join(m.Files, ", ")
		}
	case MergeChecksFailed:
		s = "the merged tree failed " + check.Quoted(m.Checks)
	case MergeInterrupted:
		s = "interrupted"
	default:
		s = "failed"
		if m.Detail != "" {
			s += ": " + text.Snippet(m.Detail, 120)
		}
	}
	if m.Kept != "" {
		s += ", undone, work kept on " + m.Kept
	}
	if m.RanAgain {
		s += ", ran again alone"
	}
	return s
}

func addUsage(to *state.Usage, u state.Usage) *state.Usage {
	if to == nil {
		to = &state.Usage{}
	}
	to.InputTokens += u.InputTokens
	to.OutputTokens += u.OutputTokens
	to.CachedTokens += u.CachedTokens
	to.CostUSD += u.CostUSD
	to.Requests += u.Requests
	to.BytesSent += u.BytesSent
	to.BytesReceived += u.BytesReceived
	return to
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// maxHeadBytes bounds what is read of each agent log.
const maxHeadBytes = 4096

// logHead is the first n lines of each log that can still be read, each
// prefixed by its stream, cleaned of control characters and cut at 300
// characters.
func logHead(logs []logFile, n int) []string {
	if n <= 0 {
		return nil
	}
	var out []string
	for _, lf := range logs {
		f, err := os.Open(lf.path)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(io.LimitReader(f, maxHeadBytes))
		for k := 0; k < n && sc.Scan(); k++ {
			out = append(out, lf.stream+": "+text.Snippet(sc.Text(), 300))
		}
		f.Close()
	}
	return out
}

// task is the report's task i; false when there is none.
func (r Report) task(i int) (Task, bool) {
	j := slices.IndexFunc(r.Tasks, func(t Task) bool { return t.Index == i })
	if j < 0 {
		return Task{}, false
	}
	return r.Tasks[j], true
}

// formatMS writes a duration given in milliseconds for people: 850 ms,
// 12.3 s, 4 min 05 s, 2 h 03 min.
func formatMS(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", ms)
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%d min %02d s", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%d h %02d min", int(d.Hours()), int(d.Minutes())%60)
}

// noRoundWords say why a task had no review round.
var noRoundWords = map[NoRound]string{
	NoRoundUnreviewed:    "no review",
	NoRoundReviewSkipped: "review skipped",
	NoRoundNoFindings:    "no findings",
	NoRoundAllDismissed:  "all dismissed",
}

// roundsText is a task's review rounds, with why there were none when the
// record says: "2", "0 (no review)", "0 (all dismissed)".
func roundsText(t Task) string {
	if w, ok := noRoundWords[t.NoRound]; ok && t.ReviewRounds == 0 {
		return "0 (" + w + ")"
	}
	return strconv.Itoa(t.ReviewRounds)
}
