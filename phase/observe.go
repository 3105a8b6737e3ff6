package phase

import "time"

// Observer is told when a supervised call starts and ends, so that a caller
// can show what is running (progress on a terminal) without phase knowing
// how it is shown. It runs on the call's goroutine: it must return quickly.
type Observer interface {
	// CallStarted is called once the child is running. The function it
	// returns, when not nil, is called exactly once after the call has ended
	// (its group stopped and its output read), whatever the outcome.
	CallStarted(CallInfo) (ended func())
}

// CallInfo is what an Observer learns of a call. It holds neither the argv
// nor the prompt, so nothing an observer shows can leak a prompt.
type CallInfo struct {
	Phase   string
	Task    int     // NoTask: the call belongs to no task
	Attempt Attempt // N and Of at least 1; Role is empty for calls without a prompt (not agent calls)
	Started time.Time
	// Detail, when not nil, says what the call is doing now, in a few words
	// without control characters (e.g. "hunk 3/7"); it may change while the
	// call runs and is safe to call from any goroutine.
	Detail func() string
}

// observe tells spec's observer that the call started at start and returns
// what to run when it ends (never nil).
func observe(spec Spec, start time.Time) func() {
	if spec.Observer == nil {
		return func() {}
	}
	a := spec.Attempt
	a.N, a.Of = max(a.N, 1), max(a.Of, 1)
	if !spec.Prompt {
		// Only agent calls alternate between a primary and a fallback.
		a.Role = ""
	}
	ended := spec.Observer.CallStarted(CallInfo{Phase: spec.Phase, Task: spec.Task, Attempt: a, Started: start, Detail: spec.Detail})
	if ended == nil {
		return func() {}
	}
	return ended
}
