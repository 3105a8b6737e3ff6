package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"peal/phase"
)

// Usage is what calls cost, where the CLI's events say it.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
	CostUSD      float64
}

// Add sums two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{InputTokens: u.InputTokens + o.InputTokens, OutputTokens: u.OutputTokens + o.OutputTokens, CostUSD: u.CostUSD + o.CostUSD}
}

// Event is what one line of a CLI's structured output says.
type Event struct {
	// Final marks the result event: the answer is complete.
	Final bool
	// Text is the result's text (Final) or an assistant message.
	Text string
	// Delta: Text is a piece to append to the current message.
	Delta bool
	// Error is an error event's message, or a failed result's text.
	Error string
	// Usage, when the event carries what should be counted once.
	Usage Usage
}

// Events is a structured-output format: how to read one line of it, and
// what docs/agents.md says of it.
type Events struct {
	// Parse reads one line; false when the line is no event.
	Parse func(line []byte) (Event, bool)
	// Where the answer, its end, errors and usage are, in Markdown.
	Answer, End, Error, Usage string
}

// decodeLine decodes one line of an event stream into v; false when the
// line is no JSON object.
func decodeLine(line []byte, v any) bool {
	return len(line) > 0 && line[0] == '{' && json.Unmarshal(line, v) == nil
}

// errorText is the message of an error field that may be a string or an
// object with a message.
func errorText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		for _, k := range []string{"message", "data"} {
			if s := errorText(x[k]); s != "" {
				return s
			}
		}
		if s, ok := x["name"].(string); ok {
			return s
		}
	}
	if v == nil {
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// nonEmpty is s, or fallback when s is empty.
func nonEmpty(s, fallback string) string {
	if s != "" {
		return s
	}
	return fallback
}

// Ending is the cause a Watcher ends a call with.
type Ending struct {
	Class phase.Class
	Err   error // nil for Succeeded
}

func (e *Ending) Error() string {
	if e.Err == nil {
		return "the final result arrived"
	}
	return e.Err.Error()
}

// Watcher reads one attempt's output as it arrives (a phase.Watcher): it
// collects the structured events, ends the call once the final result has
// come and the process lingers, ends it at once on a prompt that waits for a
// person, and ends it as a network failure when it has printed nothing but
// network errors for the stall limit.
type Watcher struct {
	rules      *Rules
	phase      string
	structured bool
	stall      time.Duration // 0: off
	linger     time.Duration // how long a process may live on after its final result

	mu       sync.Mutex
	end      func(error)
	seen     int // bytes of output so far, for the prompts that wait for a person
	final    bool
	result   string
	message  strings.Builder
	errText  string // a failed result's text
	errors   []string
	usage    Usage
	stallAt  *time.Timer
	lingerAt *time.Timer
}

// WatchOptions configure a Watcher.
type WatchOptions struct {
	Phase      string
	Structured bool
	// NetworkStall ends an attempt that printed nothing but network errors
	// for this long (0: off).
	NetworkStall time.Duration
	// Linger is how long the process may go on after its final result
	// before its group is stopped.
	Linger time.Duration
}

// Watcher returns a fresh watcher for one attempt of the kind's calls under
// these rules.
func (r *Rules) Watcher(o WatchOptions) *Watcher {
	return &Watcher{rules: r, phase: o.Phase, structured: o.Structured && r.kind.Events != nil,
		stall: o.NetworkStall, linger: o.Linger}
}

// Begin implements phase.Watcher.
func (w *Watcher) Begin(end func(error)) {
	w.mu.Lock()
	w.end = end
	w.mu.Unlock()
}

// Line implements phase.Watcher.
func (w *Watcher) Line(s phase.Stream, raw []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.structured && s == phase.Stdout {
		if ev, ok := w.rules.kind.Events.Parse(raw); ok {
			w.event(ev)
			if ev.Error != "" && !ev.Final {
				// An error event speaks like a line of stderr.
				w.check(phase.Clean(ev.Error))
			}
			return
		}
	}
	w.check(phase.Clean(string(raw)))
}

// check looks at one line for a prompt that waits for a person and for a
// stall of network errors; callers hold mu.
func (w *Watcher) check(line string) {
	if !phase.Meaningful(line) {
		return
	}
	// A prompt that waits for a person comes before any work: later in the
	// output, the same words are the agent's own (it may open a browser).
	w.seen += len(line) + 1
	if w.seen <= refusalBytes && w.rules.isBlocking(line) {
		w.end(&Ending{Class: phase.Fatal, Err: fmt.Errorf("%s call stopped: the agent waits for a person: %s", w.phase, phase.Quote(line))})
		return
	}
	if w.stall <= 0 {
		return
	}
	if class, ok := w.rules.matchLine(line); ok && class == phase.Network {
		if w.stallAt == nil {
			err := fmt.Errorf("%s call stopped after %d s of nothing but network errors: %s", w.phase, int64(w.stall.Round(time.Second)/time.Second), phase.Quote(line))
			end := w.end
			w.stallAt = time.AfterFunc(w.stall, func() { end(&Ending{Class: phase.Network, Err: err}) })
		}
		return
	}
	// Anything else is progress: the stall starts over.
	w.stopStall()
}

func (w *Watcher) stopStall() {
	if w.stallAt != nil {
		w.stallAt.Stop()
		w.stallAt = nil
	}
}

// event records one structured event; callers hold mu.
func (w *Watcher) event(ev Event) {
	w.usage = w.usage.Add(ev.Usage)
	if ev.Error == "" || ev.Final {
		w.stopStall()
	}
	switch {
	case ev.Final:
		w.final = true
		w.result = ev.Text
		w.errText = ev.Error
		if w.lingerAt == nil {
			end := w.end
			w.lingerAt = time.AfterFunc(w.linger, func() { end(&Ending{Class: phase.Succeeded}) })
		}
	case ev.Error != "":
		w.errors = append(w.errors, ev.Error)
	case ev.Delta:
		w.message.WriteString(ev.Text)
	case ev.Text != "":
		w.message.Reset()
		w.message.WriteString(ev.Text)
	}
}

// Done implements phase.Watcher.
func (w *Watcher) Done() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopStall()
	if w.lingerAt != nil {
		w.lingerAt.Stop()
	}
}

// Final reports whether the final result event came.
func (w *Watcher) Final() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.final
}

// Answer is the call's answer from its events: the result's text, else the
// last assistant message; false without structured output or events.
func (w *Watcher) Answer() (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.structured {
		return "", false
	}
	if w.final && w.result != "" {
		return w.result, true
	}
	return w.message.String(), w.final || w.message.Len() > 0
}

// Failed returns the error the events reported: a failed result, or, when
// no successful result came, the last error event.
func (w *Watcher) Failed() (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case !w.structured:
		return "", false
	case w.final && w.errText != "":
		return w.errText, true
	case !w.final && len(w.errors) > 0:
		return w.errors[len(w.errors)-1], true
	}
	return "", false
}

// Usage is the sum of what the events counted.
func (w *Watcher) Usage() Usage {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.usage
}
