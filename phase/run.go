// Package phase owns one call of a child process (agent, stet, git, a post-run
// command): its argv and prompt, its supervision under a timeout as a whole
// process group, and the single retry loop that every kind of call goes
// through with its own Policy. It knows nothing of plans or state.
package phase

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// MaxCapture is how much of each output stream a Result keeps; the rest is
// read and discarded so that the child never blocks on a full pipe.
const MaxCapture = 10 << 20

// Spec describes one child process.
type Spec struct {
	Phase       string   // plan, execute, address, triage, normalize, stet, git, post-run
	Argv        []string // program first
	Prompt      bool     // the last argument is a prompt: logged as <prompt len=N>
	Dir         string
	Env         []string // added to the parent environment
	Timeout     time.Duration
	IdleTimeout time.Duration // 0: off
	KillGrace   time.Duration
	Log         *slog.Logger
	Attempt     Attempt // for logs; zero for calls that are not retried
	Task        int     // for the Observer; 0: the call belongs to no task
	// StdoutSink and StderrSink, when set, receive the whole streams, untruncated.
	StdoutSink, StderrSink io.Writer
	// Observer, when set, is told when the child starts and when the call ends.
	Observer Observer
	// Detail, when set, tells an observer what the call is doing right now
	// (e.g. the review's progress); it is handed on in CallInfo.
	Detail func() string
}

// Result is what a finished child left behind.
type Result struct {
	Phase           string
	Stdout, Stderr  string
	ExitCode        int  // -1 when killed by a signal
	TimedOut        bool // the call timeout or the idle timeout fired
	Idle            bool // it was the idle timeout
	Limit           time.Duration
	StdoutDropped   int64 // bytes read past MaxCapture and discarded
	StderrDropped   int64
	Duration        time.Duration
	StartedAt       time.Time
	ProcessGroupPID int
}

var (
	errCallTimeout = errors.New("call timeout")
	errIdleTimeout = errors.New("idle timeout")
)

// Run starts the child in its own process group with stdin on /dev/null,
// drains both streams to the end, and waits for it without polling. On
// timeout, idle timeout or cancellation of ctx the group gets SIGTERM and,
// after KillGrace, SIGKILL. When the child exits on its own, whatever it left
// in its group is terminated the same way. The error is non-nil only when the
// process could not be started (*StartError) or ctx was cancelled.
func Run(ctx context.Context, spec Spec) (Result, error) {
	log := spec.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	res := Result{Phase: spec.Phase, StartedAt: time.Now()}
	if err := ctx.Err(); err != nil {
		return res, interrupted(spec.Phase, ctx)
	}
	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	outR, outW, err := os.Pipe()
	if err != nil {
		return res, &StartError{Program: spec.Argv[0], Err: err}
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return res, &StartError{Program: spec.Argv[0], Err: err}
	}

	var pgid atomic.Int64
	var killMu sync.Mutex
	var killTimer *time.Timer
	cmd := exec.CommandContext(callCtx, spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Stdout, cmd.Stderr = outW, errW // *os.File: no copying goroutines inside exec
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		signalGroup(int(pgid.Load()), syscall.SIGTERM)
		killMu.Lock()
		killTimer = time.AfterFunc(spec.KillGrace, func() { signalGroup(int(pgid.Load()), syscall.SIGKILL) })
		killMu.Unlock()
		return nil
	}
	cmd.WaitDelay = spec.KillGrace

	log.Info("starting call", "phase", spec.Phase, "attempt", fmt.Sprintf("%d/%d", max(spec.Attempt.N, 1), max(spec.Attempt.Of, 1)),
		"argv", LogArgv(spec.Argv, spec.Prompt))
	if err := cmd.Start(); err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return res, &StartError{Program: spec.Argv[0], Err: err}
	}
	pgid.Store(int64(cmd.Process.Pid))
	res.ProcessGroupPID = cmd.Process.Pid
	outW.Close()
	errW.Close()

	// Output activity feeds the idle timeout; timers, not polling, fire the limits.
	start := time.Now()
	// The observer hears of the end when Run returns: after the group has been
	// stopped and the output read, so nothing of the call is left running.
	defer observe(spec, start)()
	var lastOutput atomic.Int64
	activity := func() { lastOutput.Store(int64(time.Since(start))) }
	callTimer := time.AfterFunc(spec.Timeout, func() { cancel(errCallTimeout) })
	defer callTimer.Stop()
	if spec.IdleTimeout > 0 {
		var idleTimer *time.Timer
		var idleMu sync.Mutex
		check := func() {
			silent := time.Since(start) - time.Duration(lastOutput.Load())
			if silent >= spec.IdleTimeout {
				cancel(errIdleTimeout)
				return
			}
			idleMu.Lock()
			idleTimer.Reset(spec.IdleTimeout - silent)
			idleMu.Unlock()
		}
		idleMu.Lock()
		idleTimer = time.AfterFunc(spec.IdleTimeout, check)
		idleMu.Unlock()
		defer func() {
			idleMu.Lock()
			idleTimer.Stop()
			idleMu.Unlock()
		}()
	}

	stdout := &capture{sink: spec.StdoutSink}
	stderr := &capture{sink: spec.StderrSink}
	var readers sync.WaitGroup
	readers.Add(2)
	go drain(&readers, outR, stdout, activity)
	go drain(&readers, errR, stderr, activity)
	readersDone := make(chan struct{})
	go func() { readers.Wait(); close(readersDone) }()

	waitErr := cmd.Wait()
	cause := context.Cause(callCtx)

	// The child is gone; anything it left in its group is terminated now:
	// SIGTERM, then SIGKILL once the pipes close or the grace runs out.
	if signalGroup(res.ProcessGroupPID, syscall.SIGTERM) {
		select {
		case <-readersDone:
		case <-time.After(spec.KillGrace):
		}
		signalGroup(res.ProcessGroupPID, syscall.SIGKILL)
		waitGroupGone(res.ProcessGroupPID, spec.KillGrace)
	}
	select {
	case <-readersDone:
	case <-time.After(spec.KillGrace):
		// A process outside the group still holds a pipe: stop reading.
		outR.Close()
		errR.Close()
		<-readersDone
	}
	outR.Close()
	errR.Close()
	killMu.Lock()
	if killTimer != nil {
		killTimer.Stop()
	}
	killMu.Unlock()

	res.Duration = time.Since(start)
	res.Stdout, res.StdoutDropped = stdout.result()
	res.Stderr, res.StderrDropped = stderr.result()
	res.ExitCode = cmd.ProcessState.ExitCode()
	if res.StdoutDropped > 0 || res.StderrDropped > 0 {
		log.Warn("output over the capture limit was read and discarded", "phase", spec.Phase,
			"limit_bytes", MaxCapture, "stdout_dropped_bytes", res.StdoutDropped, "stderr_dropped_bytes", res.StderrDropped)
	}
	switch {
	case ctx.Err() != nil:
		return res, interrupted(spec.Phase, ctx)
	case errors.Is(cause, errCallTimeout):
		res.TimedOut, res.Limit = true, spec.Timeout
	case errors.Is(cause, errIdleTimeout):
		res.TimedOut, res.Idle, res.Limit = true, true, spec.IdleTimeout
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) && !errors.Is(waitErr, exec.ErrWaitDelay) {
		log.Warn("waiting for the child failed", "phase", spec.Phase, "err", waitErr)
	}
	log.Debug("call finished", "phase", spec.Phase, "exit_code", res.ExitCode, "timed_out", res.TimedOut,
		"duration_ms", res.Duration.Milliseconds())
	return res, nil
}

// signalGroup signals every process of the group and reports whether any
// process was there to receive it.
func signalGroup(pgid int, sig syscall.Signal) bool {
	if pgid <= 0 {
		return false
	}
	return syscall.Kill(-pgid, sig) == nil
}

func interrupted(phase string, ctx context.Context) error {
	return &InterruptedError{Phase: phase, Cause: context.Cause(ctx)}
}

func drain(wg *sync.WaitGroup, r *os.File, c *capture, activity func()) {
	defer wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			c.write(buf[:n])
			activity()
		}
		if err != nil {
			return
		}
	}
}

// capture keeps the first MaxCapture bytes of a stream and counts the rest.
type capture struct {
	mu      sync.Mutex
	kept    []byte
	dropped int64
	sink    io.Writer
	sinkErr error
}

func (c *capture) write(p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sink != nil && c.sinkErr == nil {
		_, c.sinkErr = c.sink.Write(p)
	}
	room := MaxCapture - len(c.kept)
	if room >= len(p) {
		c.kept = append(c.kept, p...)
		return
	}
	if room > 0 {
		c.kept = append(c.kept, p[:room]...)
	}
	c.dropped += int64(len(p) - max(room, 0))
}

func (c *capture) result() (string, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.kept), c.dropped
}

// LogArgv is argv as logs show it: a prompt argument becomes <prompt len=N>.
func LogArgv(argv []string, prompt bool) []string {
	out := append([]string(nil), argv...)
	if prompt && len(out) > 0 {
		out[len(out)-1] = fmt.Sprintf("<prompt len=%d>", len(out[len(out)-1]))
	}
	return out
}
