package phase

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"peal/internal/text"
)

// StartError: the process could not be started at all. It is never retried.
type StartError struct {
	Program string
	Err     error
}

func (e *StartError) Error() string {
	var nul *NULError
	if errors.As(e.Err, &nul) {
		return fmt.Sprintf("cannot start %s: %v", e.Program, nul)
	}
	if errors.Is(e.Err, syscall.E2BIG) {
		return fmt.Sprintf("cannot start %s: its arguments (the prompt is the last one) are longer than the system allows for one command", e.Program)
	}
	return fmt.Sprintf("cannot start %s: %v", e.Program, e.Err)
}
func (e *StartError) Unwrap() error { return e.Err }

// NULError: an argument or a variable of a command holds a NUL byte, which
// the system cannot pass to a program (it ends a C string): the command
// never starts. It says which, rather than the system's "invalid argument".
type NULError struct {
	What string // "argument 3", "variable GIT_X"
}

func (e *NULError) Error() string {
	return e.What + " holds a NUL byte, which no program can be given"
}

func (e *NULError) Unwrap() error { return syscall.EINVAL }

// nulIn is the argument or variable of argv and env that holds a NUL byte
// (nil: none).
func nulIn(argv, env []string) *NULError {
	for i, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return &NULError{What: fmt.Sprintf("argument %d", i)}
		}
	}
	for _, kv := range env {
		if strings.IndexByte(kv, 0) >= 0 {
			name, _, _ := strings.Cut(kv, "=")
			return &NULError{What: "variable " + strings.ReplaceAll(name, "\x00", `\x00`)}
		}
	}
	return nil
}

// InterruptedError: the run was cancelled (a signal) while the call ran
// or waited; the child's group has been stopped.
type InterruptedError struct {
	Phase Name
	Cause error
}

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("%s call interrupted: %v", e.Phase, e.Cause)
}
func (e *InterruptedError) Unwrap() error { return e.Cause }

// TimeoutError: one attempt hit the call timeout or the idle timeout.
type TimeoutError struct {
	Phase Name
	Limit time.Duration
	Idle  bool
	Line  string // the line of its output that best explains it; "" when silent
}

func (e *TimeoutError) Error() string {
	msg := fmt.Sprintf("%s call timed out after %s", e.Phase, text.Seconds(e.Limit))
	if e.Idle {
		msg = fmt.Sprintf("%s call timed out: no output for %s", e.Phase, text.Seconds(e.Limit))
	}
	if e.Line != "" {
		msg += "; its last words: " + e.Line
	}
	return msg
}

// ExitError: one attempt exited with a non-zero status.
type ExitError struct {
	Phase Name
	Code  int
	Line  string // the line of its output that explains the failure
}

func (e *ExitError) Error() string {
	msg := fmt.Sprintf("%s call exited with status %d", e.Phase, e.Code)
	if e.Code < 0 {
		msg = fmt.Sprintf("%s call was killed by a signal", e.Phase)
	}
	if e.Line == "" {
		return msg + " and printed nothing"
	}
	return msg + ": " + e.Line
}

// FailedError: every attempt of a call failed; Last is the last attempt's failure.
type FailedError struct {
	Phase    Name
	Attempts int
	Last     error
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("%s failed after %s: %v", e.Phase, text.AttemptCount(e.Attempts), e.Last)
}
func (e *FailedError) Unwrap() error { return e.Last }

// FatalError: a failure that no retry can heal (the agent is not logged in,
// its key is invalid, it refused); the call was not retried.
type FatalError struct {
	Phase Name
	Last  error
}

func (e *FatalError) Error() string {
	return fmt.Sprintf("%s failed and was not retried (no retry can fix this): %v", e.Phase, e.Last)
}
func (e *FatalError) Unwrap() error { return e.Last }

// UnreachableError: every attempt of a call failed with a network error; the
// agent looks unreachable, and the next task would meet the same outage.
type UnreachableError struct {
	Phase    Name
	Attempts int
	Last     error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("the agent looks unreachable: all %s of the %s call failed with network errors; last: %v", text.AttemptCount(e.Attempts), e.Phase, e.Last)
}
func (e *UnreachableError) Unwrap() error { return e.Last }

// RateLimitError: the agent stayed rate limited longer than the call may
// wait; the next task would meet the same limit.
type RateLimitError struct {
	Phase    Name
	Attempts int
	Waited   time.Duration
	Limit    time.Duration // 0: no cap on the total wait, the retries ran out
	Last     error
}

func (e *RateLimitError) Error() string {
	why := "its retries for rate limits ran out"
	if e.Limit > 0 {
		why = fmt.Sprintf("the limit does not reset within rate_limit_max_wait_sec (%s)", text.Seconds(e.Limit))
	}
	return fmt.Sprintf("the agent is rate limited: %s call failed after %s and %s of waiting, and %s; last: %v",
		e.Phase, text.AttemptCount(e.Attempts), text.Seconds(e.Waited.Round(time.Second)), why, e.Last)
}
func (e *RateLimitError) Unwrap() error { return e.Last }

// Explain is the line that best explains how a call ended when nothing more
// specific is known: the last meaningful line of stderr, else of stdout.
func Explain(r Result) string {
	if line := text.LastMeaningful(r.Stderr); line != "" {
		return line
	}
	return text.LastMeaningful(r.Stdout)
}

// RunEnder is implemented by errors after which no task of the run can
// succeed, so the run stops whatever continue_with_remaining_tasks says: the
// agent or the review model is unreachable, the agent stays rate limited, it
// cannot authenticate, the run spent its cost budget.
type RunEnder interface {
	error
	EndsRun() bool
}

// EndsRun reports whether err, or an error it wraps, ends the run.
func EndsRun(err error) bool {
	var re RunEnder
	return errors.As(err, &re) && re.EndsRun()
}

// EndsRun: the next call would meet the same outage.
func (e *UnreachableError) EndsRun() bool { return true }

// EndsRun: the next call would meet the same limit.
func (e *RateLimitError) EndsRun() bool { return true }
