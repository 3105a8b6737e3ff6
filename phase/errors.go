package phase

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"
)

// StartError: the process could not be started at all. It is never retried.
type StartError struct {
	Program string
	Err     error
}

func (e *StartError) Error() string {
	if errors.Is(e.Err, syscall.E2BIG) {
		return fmt.Sprintf("cannot start %s: its arguments (the prompt is the last one) are longer than the system allows for one command", e.Program)
	}
	return fmt.Sprintf("cannot start %s: %v", e.Program, e.Err)
}
func (e *StartError) Unwrap() error { return e.Err }

// InterruptedError: the run was cancelled (SIGINT/SIGTERM) while the call ran
// or waited; the child's group has been stopped.
type InterruptedError struct {
	Phase string
	Cause error
}

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("%s call interrupted: %v", e.Phase, e.Cause)
}
func (e *InterruptedError) Unwrap() error { return e.Cause }

// TimeoutError: one attempt hit the call timeout or the idle timeout.
type TimeoutError struct {
	Phase string
	Limit time.Duration
	Idle  bool
}

func (e *TimeoutError) Error() string {
	if e.Idle {
		return fmt.Sprintf("%s call timed out: no output for %s", e.Phase, seconds(e.Limit))
	}
	return fmt.Sprintf("%s call timed out after %s", e.Phase, seconds(e.Limit))
}

// ExitError: one attempt exited with a non-zero status.
type ExitError struct {
	Phase  string
	Code   int
	Stderr string // the tail of stderr, for the message
}

func (e *ExitError) Error() string {
	msg := fmt.Sprintf("%s call exited with status %d", e.Phase, e.Code)
	if e.Code < 0 {
		msg = fmt.Sprintf("%s call was killed by a signal", e.Phase)
	}
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

// FailedError: every attempt of a call failed; Last is the last attempt's failure.
type FailedError struct {
	Phase    string
	Attempts int
	Last     error
}

func (e *FailedError) Error() string {
	word := "attempts"
	if e.Attempts == 1 {
		word = "attempt"
	}
	return fmt.Sprintf("%s failed after %d %s: %v", e.Phase, e.Attempts, word, e.Last)
}
func (e *FailedError) Unwrap() error { return e.Last }

func seconds(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%d s", int64(d/time.Second))
	}
	return d.String()
}

// Tail is the last non-empty line of s cut to 200 characters, for one-line messages.
func Tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if len(last) > 200 {
		last = last[:200] + "…"
	}
	return last
}

// FatalError: a failure that no retry can heal (its output matched a fatal
// pattern); the call was not retried.
type FatalError struct {
	Phase   string
	Pattern string
	Last    error
}

func (e *FatalError) Error() string {
	return fmt.Sprintf("%s failed and will not be retried (its output says %q): %v", e.Phase, e.Pattern, e.Last)
}
func (e *FatalError) Unwrap() error { return e.Last }

// UnreachableError: every attempt of a call failed with a network error; the
// agent looks unreachable, and the next task would meet the same outage.
type UnreachableError struct {
	Phase    string
	Attempts int
	Last     error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("the agent looks unreachable: all %d attempts of the %s call failed with network errors; last: %v", e.Attempts, e.Phase, e.Last)
}
func (e *UnreachableError) Unwrap() error { return e.Last }
