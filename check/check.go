// Package check owns the project's own checks (check_commands): each runs
// through sh -c in the tree a task works in, supervised as a whole process
// group like every call, and a run of them tells which failed, how, and the
// end of each one's output, bounded and cleaned for a prompt or a one-line
// message. It knows nothing of plans, reviews or state.
package check

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"peal/internal/safefs"
	"peal/internal/text"
	"peal/phase"
	"peal/prompt"
)

// Stage is when a run of the checks happens. After an execute or an address
// round, it is the phase's own name.
type Stage string

// The stages.
const (
	Start   Stage = "start"              // the starting tree, before the first task
	Before  Stage = "before"             // before a task, when earlier work left the tree in a state not yet checked
	Execute       = Stage(phase.Execute) // after a task's execute
	Address       = Stage(phase.Address) // after an address round (Round says which)
	Merge   Stage = "merge"              // the work tree, once a task of a parallel block was merged into it
	End     Stage = "end"                // the final tree, when the work of a task that did not complete changed it since the last run
)

// Phase is the phase name of a check's call in logs, the run record and
// the environment of the command (PEAL_PHASE).
const Phase = phase.Check

// Result is how one check ended.
type Result struct {
	Command string
	Task    int   // phase.NoTask for the starting tree
	Stage   Stage // Start, Before, Execute, Address, Merge or End
	Round   int   // the address round after which it ran (Stage Address)
	// ExitCode is -1 for a command killed by a signal (a timeout too).
	ExitCode int
	TimedOut bool
	Limit    time.Duration // the timeout, when TimedOut
	// StartErr says why the command could not be started at all.
	StartErr string
	// Interrupted: a signal to peal stopped it; it neither passed nor failed.
	Interrupted bool
	Duration    time.Duration
	// Tail is the end of its combined output (no final newline), bounded
	// and with control characters escaped; Cut says the output was longer.
	Tail   string
	Cut    bool
	CallID string
	Dir    string // the folder it ran in
}

// Passed reports whether the check passed: it ran and exited 0.
func (r Result) Passed() bool {
	return r.StartErr == "" && !r.Interrupted && !r.TimedOut && r.ExitCode == 0
}

// Outcome says how the check ended, in words: "passed", "exited with
// status 1", "timed out after 600 s", "was killed by a signal", "could not
// start: …".
func (r Result) Outcome() string {
	switch {
	case r.Interrupted:
		return "was interrupted"
	case r.StartErr != "":
		return "could not start: " + r.StartErr
	case r.TimedOut:
		return "timed out after " + text.Seconds(r.Limit)
	case r.ExitCode < 0:
		return "was killed by a signal"
	case r.ExitCode == 0:
		return "passed"
	}
	return fmt.Sprintf("exited with status %d", r.ExitCode)
}

// LastLine is the last line of its output that can explain a failure,
// quoted for a one-line message ("" when it printed none).
func (r Result) LastLine() string { return text.Quote(text.LastMeaningful(r.Tail)) }

// Summary names a failed check in one short clause: "`go test ./...`
// exited with status 1: FAIL peal/x 0.01s".
func (r Result) Summary() string {
	s := "`" + text.Snippet(r.Command, 80) + "` " + r.Outcome()
	if line := r.LastLine(); line != "" {
		s += ": " + line
	}
	return s
}

// Failure is the failed check as the address prompt shows it.
func (r Result) Failure() prompt.CheckFailure {
	return prompt.CheckFailure{Command: r.Command, Result: r.Outcome(), Output: r.Tail, Cut: r.Cut}
}

// Results are one run of every check, in the order of check_commands.
type Results []Result

// Failing are the commands of the checks that failed.
func (rs Results) Failing() Set {
	var s Set
	for _, r := range rs {
		if !r.Passed() {
			s = s.With(r.Command)
		}
	}
	return s
}

// Charged are the failed checks that are not in red: the failures a task
// is answerable for, red being the checks that failed before it.
func (rs Results) Charged(red Set) []Result {
	var out []Result
	for _, r := range rs {
		if !r.Passed() && !red.Has(r.Command) {
			out = append(out, r)
		}
	}
	return out
}

// Set is a set of check commands, kept sorted; nil is the empty set.
type Set []string

// Has reports whether cmd is in s.
func (s Set) Has(cmd string) bool {
	_, ok := slices.BinarySearch(s, cmd)
	return ok
}

// Union is the commands in s or t.
func (s Set) Union(t Set) Set {
	for _, c := range t {
		s = s.With(c)
	}
	return s
}

// With is s with cmd added.
func (s Set) With(cmd string) Set {
	i, ok := slices.BinarySearch(s, cmd)
	if ok {
		return s
	}
	return slices.Insert(slices.Clone(s), i, cmd)
}

// Intersect is the commands in both s and t.
func (s Set) Intersect(t Set) Set {
	var out Set
	for _, c := range s {
		if t.Has(c) {
			out = append(out, c)
		}
	}
	return out
}

// Minus is the commands of s that are not in t.
func (s Set) Minus(t Set) Set {
	var out Set
	for _, c := range s {
		if !t.Has(c) {
			out = append(out, c)
		}
	}
	return out
}

// Seen is what the checks last said of a tree: the set failing on it, and
// whether the tree may have changed since they ran (stale). Mark keeps what
// it says at a moment, and Back returns to it, for a tree put back as it
// was then. It is safe for concurrent use; the zero Seen knows no failure.
type Seen struct {
	mu        sync.Mutex
	red       Set
	stale     bool
	markRed   Set
	markStale bool
}

// Ran notes a run of the checks on the tree as it is now, which failed red.
func (s *Seen) Ran(red Set) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.red, s.stale = red, false
}

// Changed notes that the tree may have changed since the checks ran.
func (s *Seen) Changed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stale = true
}

// Now is what the checks last said of the tree, and whether the tree may
// have changed since.
func (s *Seen) Now() (red Set, stale bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.red, s.stale
}

// Mark keeps what the checks say of the tree now; Back returns to it.
func (s *Seen) Mark() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.markRed, s.markStale = s.red, s.stale
}

// Back notes that the tree is as it was at the last Mark.
func (s *Seen) Back() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.red, s.stale = s.markRed, s.markStale
}

// Quoted names check commands on one line: `go test ./...`, `make lint`
// (each cut to 60 characters).
func Quoted(cmds []string) string {
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = "`" + text.Snippet(c, 60) + "`"
	}
	return strings.Join(out, ", ")
}

// Summaries names failed checks for a one-line message, at most n of them.
func Summaries(failed []Result, n int) string {
	parts := make([]string, 0, min(len(failed), n))
	for i, r := range failed {
		if i == n {
			parts = append(parts, fmt.Sprintf("and %d more", len(failed)-n))
			break
		}
		parts = append(parts, r.Summary())
	}
	return strings.Join(parts, "; ")
}

// Hooks are what a run of the checks tells and asks of the rest of peal.
type Hooks struct {
	// Env is added to the environment of a task's checks (its ticket id).
	Env func(task int) []string
	// Output gives the sink of the whole output of one check (its file in
	// agent_log_dir) and what closes it; nil, or a nil sink: none.
	Output func(task int) (io.Writer, func())
	// Ran hears of every check that ended, interrupted ones included.
	Ran func(Result)
	// Confine, when set, confines a check before it starts (its Spec's
	// Confine and temporary folder): a check runs code the agent wrote.
	Confine func(spec *phase.Spec)
}

// Checks run a project's checks in one tree.
type Checks struct {
	commands []string
	timeout  time.Duration
	caller   phase.Caller
	log      *slog.Logger
	hooks    Hooks
}

// New is the checks of commands, each run under timeout with the folder,
// limits, environment, observer, recorder and call-id scope of caller; nil
// when there is no command.
func New(commands []string, timeout time.Duration, caller phase.Caller, log *slog.Logger, hooks Hooks) *Checks {
	if len(commands) == 0 {
		return nil
	}
	return &Checks{commands: slices.Clone(commands), timeout: timeout, caller: caller, log: log, hooks: hooks}
}

// In is the same checks in another tree (a task's worktree): caller's.
// A nil Checks gives nil.
func (c *Checks) In(caller phase.Caller) *Checks {
	if c == nil {
		return nil
	}
	v := *c
	v.caller = caller
	return &v
}

// Commands are the check commands, in order.
func (c *Checks) Commands() []string {
	if c == nil {
		return nil
	}
	return slices.Clone(c.commands)
}

// Timeout is the timeout of each check.
func (c *Checks) Timeout() time.Duration { return c.timeout }

// Dir is the folder the checks run in.
func (c *Checks) Dir() string { return c.caller.Dir }

// Run runs every check once, in order, whatever the earlier ones did, so
// that one round shows every failure. The error is an interruption, or a
// check that failed on a full disk (*safefs.FullError), after which the
// results hold the checks that ended.
func (c *Checks) Run(ctx context.Context, task int, stage Stage, round int) (Results, error) {
	if c == nil {
		return nil, nil
	}
	var results Results
	for i, cmd := range c.commands {
		r, err := c.one(ctx, task, stage, round, i, cmd)
		if err != nil {
			return results, err
		}
		results = append(results, r)
		level := slog.LevelInfo
		if !r.Passed() {
			level = slog.LevelWarn
		}
		c.log.Log(ctx, level, "check "+r.Outcome(), phase.TaskAttr(task), "stage", stage, "round", round, "command", cmd,
			"duration", r.Duration.Round(time.Millisecond), "last_line", r.LastLine())
	}
	return results, nil
}

// one runs check i (cmd).
func (c *Checks) one(ctx context.Context, task int, stage Stage, round, i int, cmd string) (Result, error) {
	res := Result{Command: cmd, Task: task, Stage: stage, Round: round, Dir: c.caller.Dir}
	spec := c.caller.Spec(Phase, task, phase.Attempt{N: 1, Of: 1}, []string{"sh", "-c", cmd}, false)
	spec.Timeout, spec.IdleTimeout, spec.CombinedOutput = c.timeout, 0, true
	if c.hooks.Env != nil {
		spec.Env = append(spec.Env, c.hooks.Env(task)...)
	}
	tail := &tailWriter{}
	spec.StdoutSink = tail
	if c.hooks.Output != nil {
		if sink, closeFn := c.hooks.Output(task); sink != nil {
			defer closeFn()
			tail.next = sink
		}
	}
	if c.hooks.Confine != nil {
		c.hooks.Confine(&spec)
	}
	detail := fmt.Sprintf("%d/%d %s %s", i+1, len(c.commands), text.Snippet(cmd, 60), When(stage, round))
	spec.Detail = func() string { return detail }
	out, err := phase.Run(ctx, spec)
	res.ExitCode, res.TimedOut, res.Duration, res.CallID = out.ExitCode, out.TimedOut, out.Duration, out.CallID
	if res.TimedOut {
		res.Limit = out.Limit
	}
	res.Tail, res.Cut = tail.text()
	if err != nil {
		if ctx.Err() != nil {
			res.Interrupted = true
			if out.CallID != "" && c.hooks.Ran != nil {
				c.hooks.Ran(res)
			}
			return res, err
		}
		res.StartErr = text.Quote(err.Error())
	}
	if c.hooks.Ran != nil {
		c.hooks.Ran(res)
	}
	if !res.Passed() && safefs.DiskFull(c.caller.Dir) {
		// Not a failure of the check's to charge anyone: the disk it
		// wrote on is full, and the run stops saying so.
		return res, &safefs.FullError{Dir: c.caller.Dir, Err: fmt.Errorf("check %s %s there", Quoted([]string{cmd}), res.Outcome())}
	}
	return res, nil
}

// When says when a run of the checks happens, in words: "on the starting
// tree", "after execute", "after round 2", "on the merged tree".
func When(stage Stage, round int) string {
	switch stage {
	case Start:
		return "on the starting tree"
	case Before:
		return "before the task"
	case Address:
		return fmt.Sprintf("after round %d", round)
	case Merge:
		return "on the merged tree"
	case End:
		return "on the final tree"
	}
	return "after " + string(stage)
}
