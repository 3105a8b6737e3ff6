package phase

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"
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

// InterruptedError: the run was cancelled (a signal) while the call ran
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
	Line  string // the line of its output that best explains it; "" when silent
}

func (e *TimeoutError) Error() string {
	msg := fmt.Sprintf("%s call timed out after %s", e.Phase, Seconds(e.Limit))
	if e.Idle {
		msg = fmt.Sprintf("%s call timed out: no output for %s", e.Phase, Seconds(e.Limit))
	}
	if e.Line != "" {
		msg += "; its last words: " + e.Line
	}
	return msg
}

// ExitError: one attempt exited with a non-zero status.
type ExitError struct {
	Phase string
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
	Phase    string
	Attempts int
	Last     error
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("%s failed after %s: %v", e.Phase, AttemptCount(e.Attempts), e.Last)
}
func (e *FailedError) Unwrap() error { return e.Last }

// AttemptCount is n attempts in words: "1 attempt", "3 attempts".
func AttemptCount(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

// Seconds writes a limit or a wait in seconds ("600 s"), or as a Go
// duration when it is not whole seconds.
func Seconds(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%d s", int64(d/time.Second))
	}
	return d.String()
}

// FatalError: a failure that no retry can heal (the agent is not logged in,
// its key is invalid, it refused); the call was not retried.
type FatalError struct {
	Phase string
	Last  error
}

func (e *FatalError) Error() string {
	return fmt.Sprintf("%s failed and was not retried (no retry can fix this): %v", e.Phase, e.Last)
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
	return fmt.Sprintf("the agent looks unreachable: all %s of the %s call failed with network errors; last: %v", AttemptCount(e.Attempts), e.Phase, e.Last)
}
func (e *UnreachableError) Unwrap() error { return e.Last }

// RateLimitError: the agent stayed rate limited longer than the call may
// wait; the next task would meet the same limit.
type RateLimitError struct {
	Phase    string
	Attempts int
	Waited   time.Duration
	Limit    time.Duration // 0: no cap on the total wait, the retries ran out
	Last     error
}

func (e *RateLimitError) Error() string {
	why := "its retries for rate limits ran out"
	if e.Limit > 0 {
		why = fmt.Sprintf("the limit does not reset within rate_limit_max_wait_sec (%s)", Seconds(e.Limit))
	}
	return fmt.Sprintf("the agent is rate limited: %s call failed after %s and %s of waiting, and %s; last: %v",
		e.Phase, AttemptCount(e.Attempts), Seconds(e.Waited.Round(time.Second)), why, e.Last)
}
func (e *RateLimitError) Unwrap() error { return e.Last }

// maxLineLen caps a quoted line of a child's output in messages.
const maxLineLen = 300

// ansi matches terminal escape sequences: CSI (colours, cursor moves), OSC
// (titles, links) and two-character escapes.
var ansi = regexp.MustCompile(`\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])`)

// StripTerminalCodes removes colour and other terminal control sequences
// from s, and nothing else.
func StripTerminalCodes(s string) string { return ansi.ReplaceAllString(s, "") }

// Clean removes colour and other terminal control codes from s, and any
// remaining control character except newline and tab.
func Clean(s string) string {
	s = StripTerminalCodes(s)
	if !strings.ContainsFunc(s, isStrayControl) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isStrayControl(r) {
			return -1
		}
		return r
	}, s)
}

func isStrayControl(r rune) bool {
	return (unicode.IsControl(r) && r != '\n' && r != '\t') || r == utf8.RuneError
}

// Quote makes one line of output fit a one-line message: cleaned, trimmed,
// inner whitespace collapsed, and cut to a bounded length.
func Quote(line string) string {
	line = strings.Join(strings.Fields(Clean(line)), " ")
	if r := []rune(line); len(r) > maxLineLen {
		line = string(r[:maxLineLen]) + "…"
	}
	return line
}

// Snippet is the start of a child's output for a one-line message: cleaned,
// its whitespace collapsed, cut to n characters.
func Snippet(s string, n int) string {
	s = strings.Join(strings.Fields(Clean(s)), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// Meaningful reports whether a line of output can explain a failure: it has
// a letter or digit, and it is not a bare dump of an object whose text the
// program failed to print (JavaScript's "[object Object]").
func Meaningful(line string) bool {
	line = strings.TrimSpace(Clean(line))
	if line == "" || strings.HasSuffix(line, "[object Object]") {
		return false
	}
	return strings.ContainsFunc(line, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) })
}

// LastMeaningful is the last meaningful line of s, quoted; "" when none.
func LastMeaningful(s string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if Meaningful(lines[i]) {
			return Quote(lines[i])
		}
	}
	return ""
}

// Explain is the line that best explains how a call ended when nothing more
// specific is known: the last meaningful line of stderr, else of stdout.
func Explain(r Result) string {
	if line := LastMeaningful(r.Stderr); line != "" {
		return line
	}
	return LastMeaningful(r.Stdout)
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
