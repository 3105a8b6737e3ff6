package phase

import (
	"io"
	"time"
)

// Observer is told when a supervised call starts and ends, so that a caller
// can show what is running (progress on a terminal) without phase knowing
// how it is shown. It runs on the call's goroutine: it must return quickly.
type Observer interface {
	// CallStarted is called once the child is running. The function it
	// returns, when not nil, is called exactly once after the call has ended
	// (its group stopped and its output read), whatever the outcome.
	CallStarted(CallInfo) (ended func())
}

// At is next, told with every call where it runs (a worktree and its
// branch, say): what the call is doing (CallInfo.Detail) comes after where.
func At(next Observer, where string) Observer { return atObserver{next: next, where: where} }

type atObserver struct {
	next  Observer
	where string
}

func (o atObserver) CallStarted(info CallInfo) func() {
	detail := info.Detail
	info.Detail = func() string {
		if detail != nil {
			if d := detail(); d != "" {
				return o.where + " | " + d
			}
		}
		return o.where
	}
	return o.next.CallStarted(info)
}

// Recorder hears of each call's start and end and of how the retry loop
// judged it, to keep a record of the run. It is given to a call beside its
// Observer, and hears of the start before the Observer and of the end before
// the Observer's end function. Its methods run on the call's goroutine and
// must return quickly.
type Recorder interface {
	// CallBegan is called once the child is running.
	CallBegan(CallInfo)
	// CallEnded is called once per started call; err is Run's error (an
	// interruption).
	CallEnded(id string, res Result, err error)
	// AttemptJudged is called when Do has classified the call with this id:
	// retry tells whether another attempt follows, after wait.
	AttemptJudged(id string, v Verdict, retry bool, wait time.Duration)
}

// CallInfo is what an Observer learns of a call. It holds the argv as it is
// logged, with an argument prompt replaced by its length, and never the
// prompt, so nothing an observer shows can leak a prompt.
type CallInfo struct {
	// ID is the call's id (PEAL_CALL_ID), unique within the process.
	ID   string
	Argv []string
	// StdoutLog and StderrLog are the files the call's stdout and stderr
	// are copied to, when its sinks are files (agent_log_dir); "" otherwise.
	StdoutLog, StderrLog string
	Phase                Name
	Task                 int     // NoTask: the call belongs to no task
	Attempt              Attempt // N and Of at least 1; Role is empty for calls without a prompt (not agent calls)
	Started              time.Time
	// Detail, when not nil, says what the call is doing now, in a few words
	// without control characters (e.g. "hunk 3/7"); it may change while the
	// call runs and is safe to call from any goroutine.
	Detail func() string
}

// observe tells spec's recorder and observer that the call id started at
// start and returns what to run when it ends (never nil).
func observe(spec Spec, id string, argv []string, start time.Time) func(Result, error) {
	if spec.Observer == nil && spec.Recorder == nil {
		return func(Result, error) {}
	}
	a := spec.Attempt
	a.N, a.Of = max(a.N, 1), max(a.Of, 1)
	if !spec.Prompt {
		// Only agent calls alternate between a primary and a fallback.
		a.Role = ""
	}
	info := CallInfo{ID: id, Argv: argv, StdoutLog: fileName(spec.StdoutSink), StderrLog: fileName(spec.StderrSink),
		Phase: spec.Phase, Task: spec.Task, Attempt: a, Started: start, Detail: spec.Detail}
	if spec.Recorder != nil {
		spec.Recorder.CallBegan(info)
	}
	var ended func()
	if spec.Observer != nil {
		ended = spec.Observer.CallStarted(info)
	}
	return func(res Result, err error) {
		if spec.Recorder != nil {
			spec.Recorder.CallEnded(id, res, err)
		}
		if ended != nil {
			ended()
		}
	}
}

// fileName is the name of the file w writes to, or "" when w is no file.
func fileName(w io.Writer) string {
	if f, ok := w.(interface{ Name() string }); ok {
		return f.Name()
	}
	return ""
}

// judged tells spec's recorder how Do judged the call that gave res.
func judged(spec Spec, res Result, v Verdict, wait time.Duration, retry bool) {
	if spec.Recorder != nil && res.CallID != "" {
		spec.Recorder.AttemptJudged(res.CallID, v, retry, wait)
	}
}
