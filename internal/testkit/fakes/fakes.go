// Package fakes holds the scenario and record formats shared by the fake
// agent and stet programs under testdata and by the tests that drive them.
//
// A test writes a scenario into a directory, points the fake at it through
// an environment variable, runs the code under test, and then reads back
// the JSON-lines records the fakes appended to assert exact call sequences.
package fakes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"peal/internal/procs"
)

// Environment variables understood by the fake programs.
const (
	// AgentDirEnv names the fake agent's scenario and record directory.
	AgentDirEnv = "FAKE_AGENT_DIR"
	// StetDirEnv names the fake stet's scenario, record and session directory.
	StetDirEnv = "FAKE_STET_DIR"
	// GrandchildEnv set to "1" makes the fake agent act as a grandchild.
	GrandchildEnv = "FAKE_GRANDCHILD"
	// GrandchildIgnoreTermEnv set to "1" makes the grandchild ignore SIGTERM.
	GrandchildIgnoreTermEnv = "FAKE_GRANDCHILD_IGNORE_TERM"
)

// File names inside the fake directories.
const (
	ScenarioFile       = "scenario.json"
	CallsFile          = "calls.jsonl"
	GrandchildPIDsFile = "grandchild.pids"
	StetScenarioFile   = "stet-scenario.json"
	StetCallsFile      = "stet-calls.jsonl"
	SessionFile        = "session.json" // in the fake stet's state folder
)

// Exit codes the fakes use for their own failures, chosen high so they are
// not confused with scenario-driven exit codes.
const (
	ExitBadScenario = 97 // scenario file unreadable or not valid JSON
	ExitNoStetDir   = 98 // fakestet started without FAKE_STET_DIR
	ExitFakeError   = 99 // the fake could not carry out its outcome or record
)

// Event values of Call and StetCall records.
const (
	EventStart = "start"
	EventEnd   = "end"
)

// Outcome is what one invocation of a fake does. The fake agent applies the
// fields in this order: ignore_term, grandchild, write_files (with those of
// when_prompt, when the prompt holds its text), remove_files,
// wait_file, plant, stet_fix, stdout_mib, chatter, stdout/stderr text,
// sleep_ms, hang, exit. An empty Stdout without NoStdout prints
// DefaultStdout, so plan text is non-empty. The fake stet uses only
// IgnoreTerm (with TermFile), WriteFiles (written when the command starts),
// SleepMS, Hang, Exit, Stderr and Stdout.
//
// WaitFile is read to EOF before the fake goes on. A named pipe there is a
// gate: the fake blocks until the test opens the pipe for writing and closes
// it. Together with write_files to another named pipe ("I am running"), a
// test orders agents by events instead of by sleeps.
type Outcome struct {
	Stdout     string `json:"stdout"`
	NoStdout   bool   `json:"no_stdout"`
	Stderr     string `json:"stderr"`
	Exit       int    `json:"exit"`
	SleepMS    int    `json:"sleep_ms"`
	Hang       bool   `json:"hang"`
	IgnoreTerm bool   `json:"ignore_term"`
	// TermFile, with IgnoreTerm, is written (a named pipe there is an
	// event for the test) each time the fake receives SIGTERM.
	TermFile             string `json:"term_file"`
	Grandchild           bool   `json:"grandchild"`
	GrandchildIgnoreTerm bool   `json:"grandchild_ignore_term"`
	// Daemon starts the grandchild in a session of its own (setsid), out of
	// the call's process group, as a daemonising tool would.
	Daemon       bool              `json:"daemon"`
	StdoutMiB    int               `json:"stdout_mib"`
	ChatterMS    int               `json:"chatter_ms"`
	ChatterCount int               `json:"chatter_count"`
	WriteFiles   map[string]string `json:"write_files"`
	// RemoveFiles are removed after WriteFiles are written (a fix by
	// deletion).
	RemoveFiles []string `json:"remove_files"`
	// WhenPrompt writes its files, after WriteFiles, only when the call's
	// prompt (its last argument, or what it read on stdin) holds
	// Contains: an agent that fixes only what it was shown.
	WhenPrompt *PromptWrites `json:"when_prompt,omitempty"`
	WaitFile   string        `json:"wait_file"`
	// Plant writes the marker lines of these findings into their files (in
	// the working folder), for the fake stet to report once committed.
	Plant []Finding `json:"plant"`
	// StetFix removes the marker lines of this many planted findings, lowest
	// ids first (< 0: all): the fix of an address round.
	StetFix int `json:"stet_fix"`

	// The fields below concern a fake started under a CLI's name (see
	// agents.go).

	// Failure names a canned failure of that CLI (FailNoCredentials, ...):
	// its exact message, stream and exit code, instead of the rest.
	Failure string `json:"failure"`
	// Edits are files the agent edits as a tool: written only when the
	// call has write permission, else refused with a message.
	Edits map[string]string `json:"edits"`
	// Commands are commands the agent runs as a tool (argv, no shell): run
	// only when allowed (the Cursor CLI: --force), else denied.
	Commands [][]string `json:"commands"`
	// With structured output: the usage the result event reports, an
	// error it reports instead of the answer, and a process that lingers
	// after its final event.
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CachedTokens int64   `json:"cached_tokens"` // of InputTokens
	CostUSD      float64 `json:"cost_usd"`
	EventError   string  `json:"event_error"`
	Linger       bool    `json:"linger"`
	// SessionLost makes a call that resumes a session fail as the CLI
	// fails for a session it does not have (its files gone).
	SessionLost bool `json:"session_lost"`
}

// PromptWrites are files an agent writes when its prompt holds a text.
type PromptWrites struct {
	Contains   string            `json:"contains"`
	WriteFiles map[string]string `json:"write_files"`
}

// ForPrompt is the outcome of a call whose prompt is prompt: its
// WhenPrompt files join WriteFiles when the prompt holds their text.
func (o Outcome) ForPrompt(prompt string) Outcome {
	w := o.WhenPrompt
	if w == nil || !strings.Contains(prompt, w.Contains) {
		return o
	}
	files := make(map[string]string, len(o.WriteFiles)+len(w.WriteFiles))
	for k, v := range o.WriteFiles {
		files[k] = v
	}
	for k, v := range w.WriteFiles {
		files[k] = v
	}
	o.WriteFiles = files
	return o
}

// Scenario maps agent calls to outcomes.
type Scenario struct {
	Default Outcome              `json:"default"`
	Rules   map[string][]Outcome `json:"rules"`
}

// Pick returns the outcome for the n-th (1-based) call of phase and task:
// Rules[phase+":"+task], then Rules[phase], then Default. Within a list the
// n-th element is used and the last one repeats once the list runs out.
func (s Scenario) Pick(phase, task string, n int) Outcome {
	if list := s.Rules[phase+":"+task]; len(list) > 0 {
		return pickN(list, n)
	}
	if list := s.Rules[phase]; len(list) > 0 {
		return pickN(list, n)
	}
	return s.Default
}

func pickN(list []Outcome, n int) Outcome {
	i := min(max(n-1, 0), len(list)-1)
	return list[i]
}

// CallKey is the record key of an agent call: "phase:task", or just the
// phase when no task index was given.
func CallKey(phase, task string) string {
	if task == "" {
		return phase
	}
	return phase + ":" + task
}

// DefaultStdout is the line the fake agent prints when the outcome gives no
// stdout, so plan text is never empty by accident.
func DefaultStdout(phase, task string) string {
	return fmt.Sprintf("fake %s output for task %s\n", phase, task)
}

// Call is one line of calls.jsonl written by the fake agent.
type Call struct {
	Event     string            `json:"event"`
	Key       string            `json:"key"`
	Phase     string            `json:"phase"`
	Task      string            `json:"task"`
	N         int               `json:"n"`
	Argv      []string          `json:"argv"`
	Env       map[string]string `json:"env"`
	Cwd       string            `json:"cwd"`
	PID       int               `json:"pid"`
	PIDNS     string            `json:"pidns,omitempty"`     // the PID namespace PID is an id in
	PIDStart  uint64            `json:"pid_start,omitempty"` // when the process started (procs.ID)
	StdinNull bool              `json:"stdin_null"`
	Stdin     string            `json:"stdin,omitempty"` // what the call read on stdin when it was not /dev/null
	Kind      string            `json:"kind,omitempty"`  // the CLI the fake imitated; "" for the plain fake
	TmpDir    string            `json:"tmpdir,omitempty"`
	Denied    []string          `json:"denied,omitempty"` // edits and commands refused for want of permission
	// Session is the session the call began or resumed (Resumed), and
	// History the phases of the calls it held before this one.
	Session     string    `json:"session,omitempty"`
	Resumed     bool      `json:"resumed,omitempty"`
	History     []string  `json:"history,omitempty"`
	Time        time.Time `json:"time"`
	Exit        int       `json:"exit"`
	StdoutBytes int64     `json:"stdout_bytes"`
}

// WriteScenario writes s to <dir>/scenario.json.
func WriteScenario(dir string, s Scenario) error {
	return writeJSON(filepath.Join(dir, ScenarioFile), s)
}

// ReadScenario reads <dir>/scenario.json; a missing file is the zero
// Scenario, which means success with the default stdout for every call.
func ReadScenario(dir string) (Scenario, error) {
	var s Scenario
	err := readJSON(filepath.Join(dir, ScenarioFile), &s)
	return s, err
}

// RecordStart appends c as a start record to <dir>/calls.jsonl and returns
// it with Event and N filled in; N counts start records with c.Key,
// including this one, under an exclusive lock so concurrent fakes agree.
func RecordStart(dir string, c Call) (Call, error) {
	c.Event = EventStart
	err := appendLocked(filepath.Join(dir, CallsFile), func(existing []byte) ([]byte, error) {
		n, err := countStarts(existing, func(line []byte) (string, error) {
			var prev Call
			err := json.Unmarshal(line, &prev)
			return prev.Event + "\x00" + prev.Key, err
		}, EventStart+"\x00"+c.Key)
		if err != nil {
			return nil, err
		}
		c.N = n + 1
		return json.Marshal(c)
	})
	return c, err
}

// RecordEnd appends c as an end record to <dir>/calls.jsonl.
func RecordEnd(dir string, c Call) error {
	c.Event = EventEnd
	return appendLocked(filepath.Join(dir, CallsFile), func([]byte) ([]byte, error) {
		return json.Marshal(c)
	})
}

// ReadCalls returns every record in <dir>/calls.jsonl; a missing file
// yields no records and no error.
func ReadCalls(dir string) ([]Call, error) {
	return readJSONL[Call](filepath.Join(dir, CallsFile))
}

// Starts keeps only the start records, in order.
func Starts(calls []Call) []Call {
	return filterEvent(calls, EventStart)
}

// Ends keeps only the end records, in order.
func Ends(calls []Call) []Call {
	return filterEvent(calls, EventEnd)
}

func filterEvent(calls []Call, event string) []Call {
	var out []Call
	for _, c := range calls {
		if c.Event == event {
			out = append(out, c)
		}
	}
	return out
}

// Keys returns the Key of each start record, in order.
func Keys(calls []Call) []string {
	var keys []string
	for _, c := range Starts(calls) {
		keys = append(keys, c.Key)
	}
	return keys
}

// ID names the process that made the call, wherever it ran.
func (c Call) ID() procs.ID { return procs.ID{PID: c.PID, NS: c.PIDNS, Start: c.PIDStart} }

// AppendGrandchildPID adds id as a line to <dir>/grandchild.pids.
func AppendGrandchildPID(dir string, id procs.ID) error {
	return appendLocked(filepath.Join(dir, GrandchildPIDsFile), func([]byte) ([]byte, error) {
		return []byte(id.String()), nil
	})
}

// GrandchildPIDs returns the processes recorded by grandchildren, in
// order; a missing file yields none and no error.
func GrandchildPIDs(dir string) ([]procs.ID, error) {
	data, err := readLocked(filepath.Join(dir, GrandchildPIDsFile))
	if err != nil {
		return nil, err
	}
	var ids []procs.ID
	for _, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		id, err := procs.ParseID(line)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", GrandchildPIDsFile, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// countStarts counts lines of existing whose identity (as extracted by id)
// equals want.
func countStarts(existing []byte, id func([]byte) (string, error), want string) (int, error) {
	n := 0
	for _, line := range bytes.Split(existing, []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		got, err := id(line)
		if err != nil {
			return 0, fmt.Errorf("corrupt record %q: %w", line, err)
		}
		if got == want {
			n++
		}
	}
	return n, nil
}

// appendLocked opens path for appending, holds an exclusive flock while mk
// inspects the current contents and builds one line, and appends that line
// in a single write so concurrent writers never interleave.
func appendLocked(path string, mk func(existing []byte) ([]byte, error)) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := lock(f, true); err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	existing, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	line, err := mk(existing)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		return err
	}
	// Closing drops the lock; the explicit close surfaces write-back errors.
	return f.Close()
}

// readLocked reads path under a shared flock so it never sees a half
// written record; a missing file reads as empty.
func readLocked(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := lock(f, false); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return io.ReadAll(f)
}

func readJSONL[T any](path string) ([]T, error) {
	data, err := readLocked(path)
	if err != nil {
		return nil, err
	}
	var out []T
	for i, line := range bytes.Split(data, []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(line, &v); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", filepath.Base(path), i+1, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// writeJSON writes v via a temporary file and rename so a fake starting
// concurrently never reads a truncated file.
func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// readJSON decodes path into v, leaving v untouched when the file is missing.
func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return nil
}

// LastJobID is a shell word that expands to the procs.ID line of the
// shell's last background job on Linux: its id, the PID namespace the
// shell (and so the job) lives in, and its start time. A check or hook
// records what it started with it, where a confined one's ids are not
// the host's.
const LastJobID = `"$! $(readlink /proc/self/ns/pid) $(cut -d' ' -f22 /proc/$!/stat)"`
