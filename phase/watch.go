package phase

import (
	"sync"
	"time"
)

// Stream names an output stream of a call.
type Stream int

const (
	Stdout Stream = iota
	Stderr
)

func (s Stream) String() string {
	if s == Stderr {
		return "stderr"
	}
	return "stdout"
}

// Watcher reads a call's output while it runs and may end the call before
// the child exits: an agent that printed its final result and lingers, a
// login prompt that would wait forever, an outage that only repeats itself.
// What the ending means is for the caller's Retry to judge: Result.Ended
// carries the cause.
type Watcher interface {
	// Begin is called once the child runs. end stops the call: its group is
	// terminated as on a timeout and cause becomes Result.Ended; only the
	// first end counts. end may be called from any goroutine.
	Begin(end func(cause error))
	// Line is called with each line of stdout or stderr, without its line
	// end, in order within a stream and never concurrently. The slice is
	// only valid during the call.
	Line(s Stream, line []byte)
	// Done is called once, when the child has exited and its output has
	// been read; no Line follows it.
	Done()
}

// watchIdle fires once the streams have been silent for limit, and returns
// what stops the watch. Timers, not polling: each firing re-arms the timer
// for the rest of the limit after the latest output.
func watchIdle(s *streams, limit time.Duration, fire func()) (stop func()) {
	var mu sync.Mutex
	var timer *time.Timer
	check := func() {
		silent := s.silentFor()
		if silent >= limit {
			fire()
			return
		}
		mu.Lock()
		timer.Reset(limit - silent)
		mu.Unlock()
	}
	mu.Lock()
	timer = time.AfterFunc(limit, check)
	mu.Unlock()
	return func() {
		mu.Lock()
		timer.Stop()
		mu.Unlock()
	}
}
