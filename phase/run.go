// Package phase owns one call of a child process (agent, stet, git, a post-run
// command): its argv and prompt, its supervision under a timeout as a whole
// process group, and the single retry loop that every kind of call goes
// through with its own Retry. It knows nothing of plans or state.
package phase

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"peal/confine"
)

// MaxCapture is how much of each output stream a Result keeps; the rest is
// read and discarded so that the child never blocks on a full pipe.
const MaxCapture = 10 << 20

// NoTask is the task of a call that belongs to no task (normalize, stet's
// session calls, git, post-run commands). Task indices start at 0.
const NoTask = -1

// TaskAttr is the log attribute that names task: none for NoTask, so that
// a log never speaks of a "task -1".
func TaskAttr(task int) slog.Attr {
	if task == NoTask {
		return slog.Attr{}
	}
	return slog.Int("task", task)
}

// Spec describes one child process.
type Spec struct {
	Phase Name     // plan, execute, address, triage, normalize, stet, git, post-run
	Argv  []string // program first
	// Prompt marks an agent call. Its prompt is the last argument, logged
	// as <prompt len=N>, unless Stdin carries it.
	Prompt bool
	// Stdin is written to the child's standard input, which is then closed;
	// nil means standard input is /dev/null.
	Stdin []byte
	Dir   string
	Env   []string // added to the parent environment
	// InheritOnly, when set, keeps of the parent environment the basic
	// variables (confine.BasicEnv) and those it names (names or PREFIX_*
	// patterns): a child that runs no program of a call's (peal's own git)
	// but must still never see a token peal was given.
	InheritOnly []string
	Timeout     time.Duration
	IdleTimeout time.Duration // 0: off
	KillGrace   time.Duration
	// Scope starts the call id that the child and everything it starts
	// carry in their environment (PEAL_CALL_ID=<scope>/<peal pid>/<n>): how
	// peal finds what a call left behind outside its process group, and what
	// a dead peal left (SweepLeftovers). Empty is a scope too.
	Scope string
	// TempRoot, when set, is where the call gets a folder of its own, named
	// in TMPDIR (and TMP, TEMP) and removed once the call has ended.
	TempRoot string
	Log      *slog.Logger
	Attempt  Attempt // for logs; zero for calls that are not retried
	Task     int     // for the Observer; NoTask when the call belongs to no task
	// StdoutSink and StderrSink, when set, receive the whole streams, untruncated.
	StdoutSink, StderrSink io.Writer
	// Observer, when set, is told when the child starts and when the call ends.
	Observer Observer
	// Recorder, when set, hears of the call's start, end and verdict.
	Recorder Recorder
	// Watch, when set, reads the output line by line as it arrives and may
	// end the call early.
	Watch Watcher
	// Detail, when set, tells an observer what the call is doing right now
	// (e.g. the review's progress); it is handed on in CallInfo.
	Detail func() string
	// CombinedOutput sends the child's stderr into its stdout pipe, so that
	// Stdout (and StdoutSink) hold both streams in the order they were
	// written, as a terminal shows them; Stderr stays empty.
	CombinedOutput bool
	// Confine, when set, confines the child: it inherits only the allowed
	// part of peal's environment (Env is added as given), gets its proxy
	// endpoint, and runs under the kernel's rules, which allow writing its
	// temporary folder too. A child that cannot be confined as its mode
	// demands never runs: the call fails with a *StartError.
	Confine *confine.Call
}

// Result is what a finished child left behind.
type Result struct {
	Phase           Name
	Stdout, Stderr  string
	ExitCode        int  // -1 when killed by a signal
	TimedOut        bool // the call timeout or the idle timeout fired
	Idle            bool // it was the idle timeout
	Limit           time.Duration
	Ended           error // the cause a Watcher ended the call with; nil otherwise
	StdoutDropped   int64 // bytes read past MaxCapture and discarded
	StderrDropped   int64
	Duration        time.Duration
	StartedAt       time.Time
	ProcessGroupPID int
	// CallID is the call's id (PEAL_CALL_ID); "" when it never started.
	CallID string
}

// Run starts the child in its own process group, drains both streams to the
// end, and waits for it without polling. On timeout, idle timeout, an early
// end asked by the Watcher, or cancellation of ctx the group gets SIGTERM
// and, after KillGrace, SIGKILL. When the child exits on its own, whatever it
// left in its group is terminated the same way. The error is non-nil only
// when the process could not be started (*StartError) or ctx was cancelled.
func Run(ctx context.Context, spec Spec) (Result, error) {
	if spec.Log == nil {
		spec.Log = slog.New(slog.DiscardHandler)
	}
	res := Result{Phase: spec.Phase, StartedAt: time.Now()}
	if err := ctx.Err(); err != nil {
		return res, interrupted(spec.Phase, ctx)
	}
	c, err := start(ctx, spec)
	if err != nil {
		if ctx.Err() != nil {
			// The signal came while the child was being started.
			return res, interrupted(spec.Phase, ctx)
		}
		return res, err
	}
	defer c.release()
	res.ProcessGroupPID = c.group.pgid
	res.CallID = c.id
	// The observer hears of the end after the group has been stopped and
	// the output read, so nothing of the call is left.
	ended := observe(spec, c.id, c.argv, c.started)
	defer func() { ended(res, err) }()
	c.armLimits()
	c.finish()
	res = c.result(ctx, res)
	err = interruptedIf(ctx, spec.Phase)
	return res, err
}

// call is one running child and everything that watches it.
type call struct {
	spec    Spec
	id      string          // the call id (CallIDEnv)
	argv    []string        // argv as logs and records show it (LogArgv)
	ctx     context.Context // ends with the call's limits (cause: why)
	cancel  context.CancelCauseFunc
	cmd     *exec.Cmd
	group   *group
	out     *streams
	stdin   *os.File // the write end of standard input; nil when it is /dev/null
	tempDir string   // "" when the call has none
	launch  *confine.Launch
	started time.Time
	stops   []func() // timers to stop when the child has exited
	watched func()   // the Watcher's Done, once its last line is in
	hard    <-chan struct{}
	waitErr error
	// waited closes once a launched call's launcher has been waited for
	// (waitErr is then set).
	waited chan struct{}

	endMu  sync.Mutex
	exited bool // the child has been waited for: a limit that fires now is too late
}

// end stops the call with cause (a limit or the Watcher), unless the child
// has already exited by itself: a timer that fires after the exit, while
// the output is still being read, does not make a finished call a failure.
func (c *call) end(cause error) {
	c.endMu.Lock()
	defer c.endMu.Unlock()
	if !c.exited {
		c.cancel(cause)
	}
}

// CallIDEnv is the variable that carries a call's id into its child's
// environment (and, by inheritance, into whatever the child starts).
const CallIDEnv = "PEAL_CALL_ID"

var callSeq atomic.Int64

var (
	errCallTimeout = errors.New("call timeout")
	errIdleTimeout = errors.New("idle timeout")
)

// start creates the pipes and the child and starts it in a process group
// of its own.
func start(ctx context.Context, spec Spec) (*call, error) {
	callCtx, cancel := context.WithCancelCause(ctx)
	c := &call{spec: spec, ctx: callCtx, cancel: cancel}
	fail := func(err error) (*call, error) {
		c.release()
		return nil, &StartError{Program: spec.Argv[0], Err: err}
	}
	if nul := nulIn(spec.Argv, spec.Env); nul != nil {
		return fail(nul) // the system would only say "invalid argument"
	}
	var err error
	if c.out, err = newStreams(spec); err != nil {
		return fail(err)
	}
	callID := fmt.Sprintf("%s/%d/%d", spec.Scope, os.Getpid(), callSeq.Add(1))
	c.id = callID
	inherited := os.Environ()
	if spec.InheritOnly != nil {
		inherited = confine.FilterEnv(inherited, spec.InheritOnly)
	}
	if spec.Confine != nil {
		inherited = spec.Confine.Environ(inherited)
	}
	env := append(inherited, spec.Env...)
	env = append(env, CallIDEnv+"="+callID)
	if spec.TempRoot != "" {
		if c.tempDir, err = newTempDir(spec.TempRoot); err != nil {
			return fail(err)
		}
		env = append(env, "TMPDIR="+c.tempDir, "TMP="+c.tempDir, "TEMP="+c.tempDir)
	}
	c.cmd = exec.CommandContext(callCtx, spec.Argv[0], spec.Argv[1:]...)
	c.cmd.Dir = spec.Dir
	c.cmd.Env = env
	c.cmd.Stdout, c.cmd.Stderr = c.out.childOut, c.out.childErr // *os.File: no copying goroutines inside exec
	if spec.CombinedOutput {
		c.cmd.Stderr = c.out.childOut
	}
	var stdinRead *os.File
	if spec.Stdin == nil {
		c.cmd.Stdin = devNull() // or exec would open it for every call
	} else {
		if c.stdin, stdinRead, err = pipe(false); err != nil {
			return fail(err)
		}
		c.cmd.Stdin = stdinRead
	}
	if spec.Confine != nil {
		if c.launch, err = spec.Confine.Prepare(c.cmd, callID, c.tempDir); err != nil {
			return fail(err)
		}
	}
	c.hard = hardStop(ctx)
	c.argv = LogArgv(spec.Argv, spec.Prompt && spec.Stdin == nil)
	c.group = newGroup(c.cmd, callID, spec.KillGrace, c.hard, c.launch.Launched())
	if c.launch.Subreaper() {
		// What the launcher holds comes to peal should it end first.
		adoptOrphans()
	}
	// Agent calls are what a person follows; git, stet and other commands
	// are bookkeeping, logged at debug.
	level := slog.LevelDebug
	if spec.Prompt {
		level = slog.LevelInfo
	}
	spec.Log.Log(ctx, level, "starting call", "phase", spec.Phase, "attempt", spec.Attempt.String(),
		"argv", c.argv, "stdin_bytes", len(spec.Stdin))
	// The call starts now: a confined program runs before its launcher
	// says so, and its start must not be noted after what it did.
	c.started = time.Now()
	err = c.group.start()
	if stdinRead != nil {
		stdinRead.Close()
	}
	c.out.closeChildEnds()
	if err == nil && c.launch != nil {
		if err = c.launch.Wait(); err != nil {
			c.cmd.Wait() // the launcher has exited without running the program
			forgetChild(c.cmd.Process.Pid)
			c.group.reap(nil)
		}
	}
	if err != nil {
		return fail(err)
	}
	if c.stdin != nil {
		go writeStdin(c.stdin, spec.Stdin)
	}
	if w := spec.Watch; w != nil {
		// Begin comes before the first line can be read.
		w.Begin(func(cause error) { c.end(&endedError{cause}) })
		c.watched = w.Done
	}
	c.out.read(c.started, spec.Watch)
	return c, nil
}

// devNull is /dev/null, opened once and shared by every call's child as its
// standard input (nil when it cannot be opened: exec then tries itself).
var devNull = sync.OnceValue(func() io.Reader {
	f, err := os.Open(os.DevNull)
	if err != nil {
		return nil
	}
	return f
})

// writeStdin hands the prompt to the child. A child that exits (or stops
// reading) before taking all of it ends the write with an error, which
// changes nothing: its exit tells what happened.
func writeStdin(w *os.File, data []byte) {
	w.Write(data)
	w.Close()
}

// armLimits starts the call timeout and the idle watchdog.
func (c *call) armLimits() {
	timer := time.AfterFunc(c.spec.Timeout, func() { c.end(errCallTimeout) })
	c.stops = append(c.stops, func() { timer.Stop() })
	if c.spec.IdleTimeout > 0 {
		c.stops = append(c.stops, watchIdle(c.out, c.spec.IdleTimeout, func() { c.end(errIdleTimeout) }))
	}
}

// finish waits for the child, then stops what it left in its group and reads
// the rest of its output. A confined call's child is its launcher, which
// says when the program exits and stays until what the program started is
// gone: the call ends with the program, and the launcher (and, with it,
// everything of the call) once the group has been stopped.
func (c *call) finish() {
	if c.launch.Launched() {
		c.finishLaunched()
	} else {
		c.waitErr = c.cmd.Wait()
		forgetChild(c.cmd.Process.Pid)
		c.markExited()
		c.group.reap(c.out.done)
	}
	c.out.stop(c.spec.KillGrace, c.hard)
	if c.watched != nil {
		c.watched() // after the last line: Line never follows Done
	}
}

// finishLaunched is finish for a confined call, whose child is its
// launcher: the call ends with the program. When nothing the program
// started is left, the launcher ends by itself at once and is reaped
// meanwhile (its end, and its namespaces', is not the call's to wait
// for); otherwise what is left is stopped as a group's leftovers are, and
// ends with the launcher (or, where peal is its subreaper, after it).
func (c *call) finishLaunched() {
	c.waited = make(chan struct{})
	pid := c.cmd.Process.Pid
	go func() {
		c.waitErr = c.cmd.Wait()
		forgetChild(pid)
		close(c.waited)
	}()
	select {
	case <-c.waited:
	case <-c.launch.Done():
	}
	c.markExited()
	select {
	case <-c.waited:
	default:
		if !c.group.leftovers() {
			c.group.end()
			c.endOrphans()
			return
		}
	}
	c.group.reap(c.out.done)
	<-c.waited
	c.endOrphans()
}

// endOrphans ends, where peal is the subreaper of its calls' processes,
// the orphans that came to it: what a launcher that ended first left, and
// what unconfined calls left in sessions of their own.
func (c *call) endOrphans() {
	if c.launch.Subreaper() {
		endOrphans()
	}
}

// markExited records that the child has exited: a limit that fires now is
// too late, and the timers stop.
func (c *call) markExited() {
	c.endMu.Lock()
	c.exited = true
	c.endMu.Unlock()
	for _, stop := range c.stops {
		stop()
	}
}

// result fills res from the finished call.
func (c *call) result(ctx context.Context, res Result) Result {
	res.Duration = time.Since(c.started)
	res.Stdout, res.StdoutDropped = c.out.stdout.result()
	res.Stderr, res.StderrDropped = c.out.stderr.result()
	waited := true
	if c.launch.Launched() {
		code, ok := c.launch.ExitCode()
		if !ok {
			<-c.waited // the launcher ended without a word: its end says how
			code = c.cmd.ProcessState.ExitCode()
		}
		res.ExitCode = code
		select {
		case <-c.waited:
		default:
			waited = false
		}
	} else {
		res.ExitCode = c.cmd.ProcessState.ExitCode()
	}
	log := c.spec.Log
	if res.StdoutDropped > 0 || res.StderrDropped > 0 {
		log.Warn("output over the capture limit was read and discarded", "phase", c.spec.Phase,
			"limit_bytes", MaxCapture, "stdout_dropped_bytes", res.StdoutDropped, "stderr_dropped_bytes", res.StderrDropped)
	}
	cause := context.Cause(c.ctx)
	var ended *endedError
	switch {
	case ctx.Err() != nil:
	case errors.Is(cause, errCallTimeout):
		res.TimedOut, res.Limit = true, c.spec.Timeout
	case errors.Is(cause, errIdleTimeout):
		res.TimedOut, res.Idle, res.Limit = true, true, c.spec.IdleTimeout
	case errors.As(cause, &ended):
		res.Ended = ended.cause
	}
	var exitErr *exec.ExitError
	if waited && c.waitErr != nil && !errors.As(c.waitErr, &exitErr) && !errors.Is(c.waitErr, exec.ErrWaitDelay) {
		log.Warn("waiting for the child failed", "phase", c.spec.Phase, "err", c.waitErr)
	}
	log.Debug("call finished", "phase", c.spec.Phase, "exit_code", res.ExitCode, "timed_out", res.TimedOut,
		"duration_ms", res.Duration.Milliseconds())
	return res
}

// release frees what the call holds once it is over: the context, the
// pipes, the temporary folder.
func (c *call) release() {
	c.cancel(nil)
	if c.out != nil {
		c.out.closeAll()
	}
	if c.stdin != nil {
		c.stdin.Close() // a writer still blocked on a full pipe returns now
	}
	if c.tempDir != "" {
		removeTempDir(c.tempDir)
	}
	if c.launch != nil {
		c.launch.Close()
	}
}

// endedError is the cancellation cause of a call a Watcher ended.
type endedError struct{ cause error }

func (e *endedError) Error() string { return "ended by its watcher: " + fmt.Sprint(e.cause) }

// newTempDir makes a call's own temporary folder in root, making root
// first only when it is missing (or was removed since the last call).
func newTempDir(root string) (string, error) {
	dir, err := os.MkdirTemp(root, "call-")
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(root, 0o700); err != nil {
			return "", err
		}
		dir, err = os.MkdirTemp(root, "call-")
	}
	return dir, err
}

// removeTempDir removes a call's temporary folder: one system call when
// the agent left it empty, as it mostly does.
func removeTempDir(dir string) {
	if syscall.Rmdir(dir) != nil {
		os.RemoveAll(dir)
	}
}

func interrupted(phase Name, ctx context.Context) error {
	return &InterruptedError{Phase: phase, Cause: context.Cause(ctx)}
}

func interruptedIf(ctx context.Context, phase Name) error {
	if ctx.Err() != nil {
		return interrupted(phase, ctx)
	}
	return nil
}

// LogArgv is argv as logs show it: a prompt argument becomes <prompt len=N>.
func LogArgv(argv []string, prompt bool) []string {
	out := append([]string(nil), argv...)
	if prompt && len(out) > 0 {
		out[len(out)-1] = fmt.Sprintf("<prompt len=%d>", len(out[len(out)-1]))
	}
	return out
}
