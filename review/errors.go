package review

import (
	"errors"
	"fmt"
	"strings"

	"peal/check"
	"peal/internal/text"
	"peal/phase"
)

// FindingsRemainingError: findings were left, or checks the task is
// answerable for still failed, after the last address round under
// on_findings_remaining = "fail".
type FindingsRemainingError struct {
	Task      int
	Rounds    int
	Remaining int
	Head      string // HEAD commit of the repo when the loop ended ("": none, or unknown)
	Output    string // the last review's stdout and stderr
	// Checks are the checks that still failed.
	Checks []check.Result
}

func (e *FindingsRemainingError) Error() string {
	at := ""
	if e.Head != "" {
		at = " at commit " + e.Head
	}
	var parts []string
	if len(e.Checks) > 0 {
		parts = append(parts, fmt.Sprintf("checks still fail after %d address round(s)%s: %s", e.Rounds, at, check.Summaries(e.Checks, 3)))
	}
	if e.Remaining > 0 || len(e.Checks) == 0 {
		parts = append(parts, fmt.Sprintf("%d finding(s) remain after %d address round(s)%s; last review: %s",
			e.Remaining, e.Rounds, at, text.Snippet(e.Output, 80)))
	}
	return strings.Join(parts, "; and ")
}

// IsFindingsRemaining reports whether err is a *FindingsRemainingError.
func IsFindingsRemaining(err error) bool {
	var fe *FindingsRemainingError
	return errors.As(err, &fe)
}

// StetError: a stet command failed (exit 1, or any status but 0 and 2);
// Cause is the line of stet's stderr that says what failed. Its message
// leaves the command out: the error that carries it names the command.
type StetError struct {
	Command string // e.g. "stet start"
	Code    int
	Cause   string
}

func (e *StetError) Error() string {
	if e.Code < 0 {
		return "killed by a signal"
	}
	msg := fmt.Sprintf("exited with status %d", e.Code)
	if e.Cause != "" {
		msg += ": " + e.Cause
	}
	return msg
}

// OutputError: the stet command that lists the findings exited 0 but
// printed something other than their JSON document.
type OutputError struct {
	Command string
	Output  string
}

func (e *OutputError) Error() string {
	return fmt.Sprintf("printed no JSON findings document (an argument that changes stet's output format?): %s", text.Snippet(e.Output, 80))
}

// UnreachableError: every attempt of a stet command exited 2, stet's code
// for a review model it cannot reach. It
// unwraps to *phase.UnreachableError, so the run stops with exit 4 as it
// does for an unreachable agent.
type UnreachableError struct {
	Command string
	Cause   string
	err     *phase.UnreachableError
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("the review model looks unreachable: %s exited 2 on %s; stet says: %s",
		e.Command, text.AttemptCount(e.err.Attempts), e.Cause)
}
func (e *UnreachableError) Unwrap() error { return e.err }

// BadRequestError: a stet command exited 2, stet's code for a review model
// it cannot reach, but said "LLM bad request": the model's server answered
// and refused the request (a model it does not serve, a wrong provider or
// path: any 4xx). No retry can help, so the call is not retried, and the
// run stops (exit 1): every later review would be refused too.
type BadRequestError struct {
	Command string
	Said    string // stet's line, quoted
}

// EndsRun: stet's model settings need fixing first.
func (e *BadRequestError) EndsRun() bool { return true }

func (e *BadRequestError) Error() string {
	return fmt.Sprintf("the review model refused stet's request, which no retry can fix: %s exited 2; stet says: %s; "+
		"check stet's model and provider settings: STET_MODEL, STET_PROVIDER, STET_OPENAI_BASE_URL or STET_OLLAMA_BASE_URL "+
		"(or model, provider, openai_base_url, ollama_base_url in .review/config.toml or stet's own config.toml)", e.Command, e.Said)
}

// badRequest is the line of stet's stderr that says the model's server
// refused the request ("LLM bad request at URL. …"), quoted; "" when none
// does.
func badRequest(stderr string) string {
	for _, line := range strings.Split(text.Clean(stderr), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "LLM bad request") {
			return text.Quote(line)
		}
	}
	return ""
}

// Cause is the line of a stet failure's stderr that says what failed, with
// the "Details:" line that follows it in parentheses: stet prints progress
// first (a worktree created, hunks reviewed), then its message, then
// details, then a hint ("Hint: ..."), and warnings anywhere. The message is
// the line just before the first "Details:", else the last other line.
// Colour codes and control characters are removed and the result is cut to
// a bounded length; "" when stderr says nothing.
func Cause(stderr string) string {
	var primary, details string
	for _, line := range strings.Split(text.Clean(stderr), "\n") {
		line = strings.TrimSpace(line)
		lower := strings.ToLower(line)
		switch {
		case details != "", line == "", strings.HasPrefix(lower, "hint:"), strings.HasPrefix(lower, "warning:"):
		case strings.HasPrefix(lower, "details:"):
			details = strings.TrimSpace(line[len("details:"):])
		default:
			primary = line
		}
	}
	if primary == "" {
		primary, details = details, ""
	}
	if details != "" {
		primary += " (" + details + ")"
	}
	return text.Quote(primary)
}
