package state

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"peal/internal/safefs"
	"peal/internal/text"
	"peal/phase"
	"peal/tickets"
)

// RecordName is the run record in the state folder: one JSON object per
// line, appended while a run goes on, so that what a run did can be told
// during the run and after it was killed. RecordPrevName keeps the record
// of the run before.
const (
	RecordName     = "run_record.jsonl"
	RecordPrevName = "run_record.prev.jsonl"
)

// RecordVersion is the version of the record's format; a reader skips lines
// of kinds it does not know and members it does not know.
const RecordVersion = 1

// Kinds of record lines.
const (
	EvRunStart  = "run_start"
	EvTasks     = "tasks" // the tasks the run selected, once its plan is known
	EvTaskStart = "task_start"
	EvCallStart = "call_start"
	EvCallEnd   = "call_end"
	EvAttempt   = "attempt"
	EvUsage     = "usage" // the tokens and cost of one agent call (an attempt: Call), and the session it began or continued
	EvTaskEnd   = "task_end"
	EvRunEnd    = "run_end"
	EvCheck     = "check" // one of the project's checks ended (its call has call_start and call_end too)
	EvMerge     = "merge" // the work of a task of a parallel block was merged into the work tree, or not
	// EvConfined: what the confinement refused a call: the connections
	// the proxy refused (Refused), and, for a call that failed, the line
	// that explains it (Message).
	EvConfined = "confined"
	// EvKilled: the run's peal died while calls ran (SIGKILL, which peal
	// cannot see): written by its guard, with the time it saw peal die,
	// the end of the calls it cut off (phase.NoteKill).
	EvKilled = "killed"
)

// The results of a merge event: how a parallel block's task came back to
// the work tree.
const (
	MergeMerged       = "merged"
	MergeConflict     = "conflict"      // git could not merge it: undone, the work kept
	MergeChecksFailed = "checks_failed" // the merged tree failed the checks: undone, the work kept
	MergeFailed       = "failed"
	MergeInterrupted  = "interrupted"
)

// Event is one line of the run record. Which members are set depends on
// Ev; Task is -1 for what belongs to no task.
type Event struct {
	Ev   string    `json:"ev"`
	Time time.Time `json:"t"`
	Task *int      `json:"task,omitempty"`

	// run_start
	Version   int    `json:"version,omitempty"`
	Run       string `json:"run,omitempty"` // the run's id: its start time and pid
	PID       int    `json:"pid,omitempty"`
	PlanPath  string `json:"plan_path,omitempty"`
	RepoPath  string `json:"repo_path,omitempty"`
	AgentKind string `json:"agent_kind,omitempty"`
	Parallel  bool   `json:"parallel,omitempty"`
	TicketID  string `json:"ticket_id,omitempty"` // ticket mode: the run's one ticket

	// tasks (and run_start in records of earlier versions of peal)
	Tasks []int `json:"tasks,omitempty"` // the tasks the run selected

	// call_start, call_end, attempt
	Call    string     `json:"call,omitempty"`
	Phase   phase.Name `json:"phase,omitempty"`
	Attempt int        `json:"attempt,omitempty"`
	Of      int        `json:"of,omitempty"`
	Allowed int        `json:"allowed,omitempty"`
	Network int        `json:"network,omitempty"`
	// Counted is the attempt's number among those the retry counts
	// allow (an attempt after a wait on a rate limit takes the number of
	// the one before it); absent where every attempt counts.
	Counted int        `json:"counted,omitempty"`
	Role    phase.Role `json:"role,omitempty"`
	Argv    []string   `json:"argv,omitempty"`
	// StdoutLog and StderrLog are the call's agent log files (agent_log_dir).
	StdoutLog string `json:"stdout_log,omitempty"`
	StderrLog string `json:"stderr_log,omitempty"`
	// Logs are the agent log files in records of earlier versions of peal:
	// stdout's, then stderr's.
	Logs []string `json:"logs,omitempty"`

	// call_end
	ExitCode    *int  `json:"exit_code,omitempty"`
	TimedOut    bool  `json:"timed_out,omitempty"`
	Idle        bool  `json:"idle,omitempty"`
	Interrupted bool  `json:"interrupted,omitempty"`
	DurationMS  int64 `json:"duration_ms,omitempty"`

	// attempt: how the retry loop judged the call
	Class  string `json:"class,omitempty"`
	Reason string `json:"reason,omitempty"`
	Retry  bool   `json:"retry,omitempty"`
	WaitMS int64  `json:"wait_ms,omitempty"`

	// usage (Task, Phase and, from records of this version, Call too):
	// what the call reported, and with agent_session = "task" whether it
	// began a session (SessionBegan) or continued one (SessionContinued),
	// and the session's id.
	Usage     *Usage `json:"usage,omitempty"`
	Session   string `json:"session,omitempty"`
	SessionID string `json:"session_id,omitempty"`

	// task_end
	Result   string          `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
	Findings *tickets.Counts `json:"findings,omitempty"`
	// NoRound (task_end): why the task's Phase 3 asked for no address
	// round (unreviewed, review_skipped, no_findings, all_dismissed).
	NoRound string `json:"no_round,omitempty"`

	// run_end (ExitCode too); confined: the line explaining a failure
	Message string `json:"message,omitempty"`
	// confined (Call, Message too): the hosts the proxy refused the call,
	// as it asked for them, and the requests its model endpoint refused
	// ("METHOD /path (host:port)"), at most the first 16
	Refused      []string `json:"refused,omitempty"`
	RefusedCount int      `json:"refused_count,omitempty"`
	// run_start: what the run's confinement enforces (absent: none)
	Confinement string `json:"confinement,omitempty"`

	// check (Task, Call, ExitCode, TimedOut, Interrupted and DurationMS
	// too): when it ran (start, before, execute, address, merge, end), the
	// round it followed, its command and the end of its output. StartErr
	// says why it could not start.
	Stage    string `json:"stage,omitempty"`
	Round    int    `json:"round,omitempty"`
	Command  string `json:"command,omitempty"`
	Tail     string `json:"tail,omitempty"`
	StartErr string `json:"start_error,omitempty"`

	// merge (Task, Time: when it began, DurationMS and Result too: merged,
	// conflict, checks_failed, failed or interrupted): the task's branch,
	// the branch its work is kept on when it was not merged, the
	// conflicting files, what git said, and the checks the merged tree
	// failed.
	Branch string   `json:"branch,omitempty"`
	Kept   string   `json:"kept,omitempty"`
	Files  []string `json:"files,omitempty"`
	Detail string   `json:"detail,omitempty"`
	Checks []string `json:"checks,omitempty"`
}

// How an agent call stood to its session (Event.Session).
const (
	SessionBegan     = "began"
	SessionContinued = "continued"
)

// TaskOf returns a pointer to task for an Event's Task.
func TaskOf(task int) *int { return &task }

// CallStart is the line of a call that started.
func CallStart(info phase.CallInfo) Event {
	a := info.Attempt
	return Event{Ev: EvCallStart, Time: info.Started.UTC(), Task: TaskOf(info.Task), Call: info.ID,
		Phase: info.Phase, Attempt: a.N, Of: a.Of, Allowed: a.Allowed, Network: a.Network, Counted: a.Counted, Role: a.Role, Argv: info.Argv,
		StdoutLog: info.StdoutLog, StderrLog: info.StderrLog}
}

// CallEnd is the line of the call id that ended at now with res; err is
// the run's error of it (an interruption).
func CallEnd(id string, res phase.Result, err error, now time.Time) Event {
	code := res.ExitCode
	return Event{Ev: EvCallEnd, Time: now.UTC(), Call: id, ExitCode: &code, TimedOut: res.TimedOut,
		Idle: res.Idle, Interrupted: err != nil, DurationMS: res.Duration.Milliseconds()}
}

// AttemptEnd is the line of how the retry loop judged the attempt of the
// call id at now: its class, whether another attempt follows, after wait.
func AttemptEnd(id string, v phase.Verdict, retry bool, wait time.Duration, now time.Time) Event {
	ev := Event{Ev: EvAttempt, Time: now.UTC(), Call: id, Class: v.Class.String(), Retry: retry, WaitMS: wait.Milliseconds()}
	if v.Err != nil {
		ev.Reason = text.Snippet(v.Err.Error(), 500)
	}
	return ev
}

// Recorder appends events to the run record. Its methods are safe for
// concurrent use; a write that fails is reported once and ends the record,
// never the run.
//
// Most events are written by a goroutine of the recorder, in batches, while
// the run waits for its calls: the run does not stop for them. A call's
// start is written before Add returns (with whatever is pending), so that
// the record names every call whose process can be seen, and Close writes
// what is left.
type Recorder struct {
	// Torn is where StartRecord kept the torn last line of the previous
	// run's record ("" when it was whole): see repairTail.
	Torn string

	mu      sync.Mutex
	f       *os.File
	size    int64       // what the record holds of whole lines
	failed  func(error) // told of the first failure
	done    bool
	pending []Event
	buf     []byte
	kick    chan struct{} // a batch is waiting for the writer
}

// StartRecord begins the run record of a run in the state folder dir,
// keeping the previous run's record as RecordPrevName. The caller holds the
// folder's lock.
func StartRecord(dir string, failed func(error)) (*Recorder, error) {
	path := filepath.Join(dir, RecordName)
	torn, err := repairTail(path, time.Now())
	if err != nil {
		return nil, err
	}
	if err := os.Rename(path, filepath.Join(dir, RecordPrevName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	noteKill(path)
	r := &Recorder{Torn: torn, f: f, failed: failed, kick: make(chan struct{}, 1)}
	go r.writer()
	return r, nil
}

// writer writes each batch it is told of, until Close.
func (r *Recorder) writer() {
	for range r.kick {
		r.mu.Lock()
		r.flushLocked()
		r.mu.Unlock()
	}
}

// Add appends one event. A nil Recorder does nothing.
func (r *Recorder) Add(ev Event) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	r.pending = append(r.pending, ev)
	if ev.Ev == EvCallStart {
		r.flushLocked()
		return
	}
	select {
	case r.kick <- struct{}{}:
	default: // the writer has a batch to take already
	}
}

// flushLocked writes the pending events (the caller holds mu) in one write:
// lines are whole, but for a last one cut by a full disk or a kill in the
// middle of the write, which ReadRecord skips.
func (r *Recorder) flushLocked() {
	if r.done || len(r.pending) == 0 {
		return
	}
	r.buf = r.buf[:0]
	for i, ev := range r.pending {
		if data, err := json.Marshal(ev); err == nil {
			r.buf = append(append(r.buf, data...), '\n')
		}
		r.pending[i] = Event{} // what the event points to is not kept alive
	}
	r.pending = r.pending[:0]
	n, err := r.f.Write(r.buf)
	if err == nil {
		r.size += int64(n)
		return
	}
	r.done = true
	// A write cut short (a full disk) leaves no torn line behind: the
	// record ends with the last whole one.
	if n > 0 {
		r.f.Truncate(r.size)
	}
	if r.failed != nil {
		r.failed(safefs.Full(err, filepath.Dir(r.f.Name())))
	}
}

// repairTail cuts a torn last line from the record at path (a write cut by
// a kill, or by a full disk before a run could cut it), so that the record
// ends with a whole line, and keeps the cut bytes aside as
// path.torn-<UTC stamp>, whose path it returns ("" when the record was
// whole or is missing). A record that is not a regular file is left alone.
func repairTail(path string, now time.Time) (string, error) {
	info, err := os.Lstat(path)
	if err != nil || !info.Mode().IsRegular() || info.Size() == 0 {
		return "", nil
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	size := info.Size()
	// From the end back to the last newline, in growing reads: a line is
	// short, and the rest of the record is not read.
	for window := int64(64 << 10); ; window *= 4 {
		start := max(size-window, 0)
		buf := make([]byte, size-start)
		if _, err := f.ReadAt(buf, start); err != nil && !errors.Is(err, io.EOF) {
			return "", err
		}
		if buf[len(buf)-1] == '\n' {
			return "", nil
		}
		i := bytes.LastIndexByte(buf, '\n')
		if i < 0 && start > 0 {
			continue
		}
		cut := start + int64(i) + 1 // i = -1: the whole record is one torn line
		kept := fmt.Sprintf("%s.torn-%s", path, now.UTC().Format("20060102T150405Z"))
		if err := safefs.WriteFile(kept, buf[cut-start:]); err != nil {
			return "", fmt.Errorf("keeping the torn last line of run record %s: %w", path, err)
		}
		if err := f.Truncate(cut); err != nil {
			return "", err
		}
		return kept, nil
	}
}

// Close writes what is pending and closes the record.
func (r *Recorder) Close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return
	}
	r.flushLocked()
	r.done = true
	close(r.kick)
	forgetKill(r.f.Name())
	r.f.Close()
	r.f = nil
}

// killNote is the record the guard of this process notes a kill in: the
// last one started that is not closed.
var killNote struct {
	sync.Mutex
	path string
}

// noteKill has the guard append an EvKilled line to the record at path
// should peal die while its calls run.
func noteKill(path string) {
	killNote.Lock()
	defer killNote.Unlock()
	killNote.path = path
	phase.NoteKill(path, `{"ev":"`+EvKilled+`","t":"`, "\"}\n")
}

// forgetKill drops the note of the record at path, once closed (and not
// when another record's note replaced it).
func forgetKill(path string) {
	killNote.Lock()
	defer killNote.Unlock()
	if killNote.path == path {
		killNote.path = ""
		phase.NoteKill("", "", "")
	}
}

// maxRecordFile caps what is read of a run record.
const maxRecordFile = 256 << 20

// ReadRecord reads the run record at path. A line that is not a JSON object
// (the last one of a record cut by a full disk) is skipped and counted in
// skipped.
func ReadRecord(path string) (events []Event, skipped int, err error) {
	data, err := safefs.ReadFile(path, maxRecordFile)
	if err != nil {
		return nil, 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), len(data)+1)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var ev Event
		if json.Unmarshal(line, &ev) != nil || ev.Ev == "" {
			skipped++
			continue
		}
		events = append(events, ev)
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("run record %s: %w", path, err)
	}
	return events, skipped, nil
}
