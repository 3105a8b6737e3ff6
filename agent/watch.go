package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"

	"peal/internal/text"
	"peal/phase"
)

// Usage is what calls cost, where the CLI's events say it or peal's model
// endpoint counted it. InputTokens are all the tokens of the prompts the
// model was sent, CachedTokens the part of them read from the provider's
// cache. Requests, BytesSent and BytesReceived are what the model endpoint
// forwarded (the bodies of the requests and of their answers).
type Usage struct {
	InputTokens  int64
	OutputTokens int64
	CachedTokens int64
	CostUSD      float64

	Requests                 int64
	BytesSent, BytesReceived int64
}

// Add sums two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{InputTokens: u.InputTokens + o.InputTokens, OutputTokens: u.OutputTokens + o.OutputTokens,
		CachedTokens: u.CachedTokens + o.CachedTokens, CostUSD: u.CostUSD + o.CostUSD,
		Requests: u.Requests + o.Requests, BytesSent: u.BytesSent + o.BytesSent, BytesReceived: u.BytesReceived + o.BytesReceived}
}

// Since is what u adds to an earlier usage of the same session, for a CLI
// whose events count the whole session (Events.Cumulative); a figure that
// went down (the CLI lost count) is taken as new.
func (u Usage) Since(before Usage) Usage {
	diff := func(now, then int64) int64 {
		if now < then {
			return now
		}
		return now - then
	}
	cost := u.CostUSD - before.CostUSD
	if cost < 0 {
		cost = u.CostUSD
	}
	return Usage{InputTokens: diff(u.InputTokens, before.InputTokens), OutputTokens: diff(u.OutputTokens, before.OutputTokens),
		CachedTokens: diff(u.CachedTokens, before.CachedTokens), CostUSD: cost}
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
	// Retry, when set, is a request the CLI saw refused and will retry, or a
	// limit it reports (Claude Code's system/api_retry and
	// rate_limit_event): neither progress nor an answer.
	Retry *Retry
	// Session is the id of the agent session the line names, when it names
	// one.
	Session string
}

// Retry is what a CLI's event says of a refused request it retries by
// itself, or of a limit it ran into.
type Retry struct {
	Class phase.Class // RateLimited or Network
	// Delay is how long the CLI waits before it retries (0: it does not
	// say); Server marks a Delay that is the server's own retry time.
	Delay  time.Duration
	Server bool
	// Reset is when the limit resets, when the event says.
	Reset time.Time
	// Text says what happened, to quote.
	Text string
}

// serverWait is how long from now the server asked the CLI to wait; 0
// when it did not say.
func (r *Retry) serverWait(now time.Time) time.Duration {
	switch {
	case !r.Reset.IsZero():
		return max(r.Reset.Sub(now), 0)
	case r.Server:
		return r.Delay
	}
	return 0
}

// Events is a structured-output format: how to read one line of it, and
// what docs/agents.md says of it.
type Events struct {
	// Parse reads one line; false when the line is no event.
	Parse func(line []byte) (Event, bool)
	// Where the answer, its end, errors and usage are, in Markdown.
	Answer, End, Error, Usage string
	// Cumulative: the usage the events report is the session's so far,
	// not the call's (codex counts the whole thread): within a call the
	// latest counts, and a resumed call's own is the difference from the
	// session's count before it (Usage.Since).
	Cumulative bool
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
// person, ends it as a network failure when it has printed nothing but
// network errors for the stall limit, and as a rate limit when the CLI's own
// retries of a refused request (its retry lines, or its retry events)
// outlast what is left of the call's wait on rate limits.
type Watcher struct {
	rules      *Rules
	phase      phase.Name
	structured bool
	stall      time.Duration // 0: off
	linger     time.Duration // how long a process may live on after its final result
	showsWork  bool          // the output shows the CLI's work as it goes
	rateWatch  bool          // whether the CLI's own retries of rate limits are bounded
	rateLeft   time.Duration // what is left of the call's wait on rate limits
	now        func() time.Time

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
	// The CLI's own retries of a rate limit: since when it has shown
	// nothing else (zero: it has not), until when (zero: it still does),
	// and the timer that ends them at what is left of the wait.
	rateSince, rateUntil time.Time
	rateAt               *time.Timer
	rateLimit            time.Duration // when rateAt fires, from rateSince
	workAt               time.Time     // when the output last showed work
	grace                time.Duration // rateGrace; tests shorten it
	// server is the latest time to retry the server gave, through the
	// CLI's retry events.
	server *Retry
	// session is the first session id the events named; onSession hears of
	// it once.
	session   string
	onSession func(id string)
	// reached: peal's proxy has made a connection for the call to one of
	// its hosts; cutOff, the failure that ended the call before Begin.
	reached bool
	cutOff  *Ending
}

// WatchOptions configure a Watcher.
type WatchOptions struct {
	Phase      phase.Name
	Structured bool
	// NetworkStall ends an attempt that printed nothing but network errors
	// for this long (0: off).
	NetworkStall time.Duration
	// Linger is how long the process may go on after its final result
	// before its group is stopped.
	Linger time.Duration
	// RateLimitCap is the most the call may wait on rate limits in all
	// (rate_limit_max_wait_sec; 0: no cap, the CLI's own retries are not
	// bounded), and RateLimitWaited what it has waited so far (see
	// phase.Attempt): an attempt that shows nothing but the CLI's own
	// retries of rate limits for the rest is ended.
	RateLimitCap, RateLimitWaited time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// OnSession, when set, hears of the first session id the events name,
	// as soon as they do, once, outside the watcher's lock.
	OnSession func(id string)
}

// Watcher returns a fresh watcher for one attempt of the kind's calls under
// these rules.
func (r *Rules) Watcher(o WatchOptions) *Watcher {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	structured := o.Structured && r.kind.Events != nil
	return &Watcher{rules: r, phase: o.Phase, structured: structured, showsWork: structured || r.kind.ShowsWork,
		stall: o.NetworkStall, linger: o.Linger, now: now,
		rateWatch: o.RateLimitCap > 0, rateLeft: max(o.RateLimitCap-o.RateLimitWaited, 0), grace: rateGrace, onSession: o.OnSession}
}

// Begin implements phase.Watcher.
func (w *Watcher) Begin(end func(error)) {
	w.mu.Lock()
	w.end = end
	w.workAt = w.now()
	cut := w.cutOff
	w.mu.Unlock()
	if cut != nil {
		end(cut)
	}
}

// UnreachableHostError: the call could not reach a host it needs at all
// through peal's proxy, before it had reached any: this machine has no
// network there, or cannot resolve the host's name. The call is stopped at
// once rather than left to the CLI's own silent retries (a minute and more
// for some), and it is a network failure.
type UnreachableHostError struct {
	Phase phase.Name
	Host  string
	Err   error
}

func (e *UnreachableHostError) Error() string {
	return fmt.Sprintf("%s call stopped: peal's proxy cannot reach %s for it (%v): this machine has no network there, or cannot resolve the name",
		e.Phase, e.Host, e.Err)
}

func (e *UnreachableHostError) Unwrap() error { return e.Err }

// Reached hears how peal's proxy fared with a connection the call asked
// for to one of its hosts: made (err nil), which is progress; not made for
// want of any route or name (noRoute) before any was made, which ends the
// call at once as a network failure naming the host; or not made
// otherwise, a network error as far as the stall goes.
func (w *Watcher) Reached(hostport string, err error, noRoute bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err == nil:
		w.reached = true
		w.stopStall()
	case noRoute && !w.reached:
		cut := &Ending{Class: phase.Network, Err: &UnreachableHostError{Phase: w.phase, Host: hostport, Err: err}}
		if w.end == nil {
			w.cutOff = cut // it connected before its watch began
			return
		}
		w.end(cut)
	case w.end != nil:
		w.networkError(fmt.Sprintf("peal's proxy could not reach %s: %v", hostport, err))
	}
}

// Line implements phase.Watcher.
func (w *Watcher) Line(s phase.Stream, raw []byte) {
	if id := w.line(s, raw); id != "" && w.onSession != nil {
		w.onSession(id)
	}
}

// line reads one line; it returns the session id the events named first,
// when this line is the one that did.
func (w *Watcher) line(s phase.Stream, raw []byte) (named string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.structured && s == phase.Stdout {
		if ev, ok := w.rules.kind.Events.Parse(raw); ok {
			if ev.Session != "" && w.session == "" {
				w.session, named = ev.Session, ev.Session
			}
			w.event(ev)
			if ev.Error != "" && !ev.Final {
				// An error event speaks like a line of stderr.
				w.check(text.Clean(ev.Error))
			}
			return named
		}
	}
	w.check(text.Clean(string(raw)))
	return ""
}

// check looks at one line for a prompt that waits for a person, for a
// stall of network errors and for the CLI's own retries of rate limits;
// callers hold mu.
func (w *Watcher) check(line string) {
	if !text.Meaningful(line) {
		return
	}
	// A prompt that waits for a person comes before any work: later in the
	// output, the same words are the agent's own (it may open a browser).
	w.seen += len(line) + 1
	if w.seen <= refusalBytes && w.rules.isBlocking(line) {
		w.end(&Ending{Class: phase.Fatal, Err: fmt.Errorf("%s call stopped: the agent waits for a person: %s", w.phase, text.Quote(line))})
		return
	}
	class, matched := w.rules.matchLine(line)
	switch {
	case matched && class == phase.Network:
		w.networkError(line)
		return
	case matched && class == phase.RateLimited:
		w.rateRefusal(text.Quote(line), ResetWait(line, w.now()))
	case matched || partOfAReport(line) || saysWhen(line):
		// The rest of a failure's report: neither progress nor a refusal,
		// though it may say when the server wants to be asked again
		// (Google's "Please retry in 30s.").
		if !w.rateSince.IsZero() {
			if asked := ResetWait(line, w.now()); asked > 0 {
				w.rateRefusal(text.Quote(line), asked)
			}
		}
	default:
		w.stopRate()
	}
	// Anything but a network error is progress as far as a stall goes: it
	// starts over.
	w.stopStall()
}

// networkError starts the stall of network errors, when it is watched;
// callers hold mu.
func (w *Watcher) networkError(line string) {
	if w.stall <= 0 || w.stallAt != nil {
		return
	}
	err := fmt.Errorf("%s call stopped after %d s of nothing but network errors: %s", w.phase, int64(w.stall.Round(time.Second)/time.Second), text.Quote(line))
	end := w.end
	w.stallAt = time.AfterFunc(w.stall, func() { end(&Ending{Class: phase.Network, Err: err}) })
}

// saysWhen reports whether a line may say when to try again ("Please try
// again in 1s.", "resets 2:16am"): the words ResetWait reads, beside
// "retry", which partOfAReport knows.
func saysWhen(line string) bool {
	l := strings.ToLower(line)
	return strings.Contains(l, "try again") || strings.Contains(l, "reset")
}

// partOfAReport reports whether a line reads as part of a failure's report
// rather than as work: an indented line (a stack frame, a field of an error
// object), a brace, a line without a letter, or a line about retrying.
// Such lines do not break a run of rate-limit refusals.
func partOfAReport(line string) bool {
	if line != strings.TrimLeft(line, " \t") || !strings.ContainsFunc(line, unicode.IsLetter) {
		return true
	}
	l := strings.ToLower(strings.TrimSpace(line))
	for _, p := range []string{"at ", "}", "]", ")", "{"} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return strings.Contains(l, "retry") || strings.Contains(l, "reconnecting")
}

// rateGrace is the least time a run of rate-limit refusals is given before
// the watcher ends it: a CLI that prints its refusal as it exits gets to
// exit and be quoted in its own words, rather than be cut off.
const rateGrace = 2 * time.Second

// rateRefusal notes a rate-limit refusal the CLI shows while it retries by
// itself: the first of a run starts the clock, which ends the attempt at
// what is left of the call's wait on rate limits; a server that asks for a
// wait beyond that ends it at once. Either way the run gets rateGrace.
// Callers hold mu.
func (w *Watcher) rateRefusal(quote string, asked time.Duration) {
	if w.rateSince.IsZero() {
		w.rateSince = w.now()
	}
	if !w.rateWatch {
		return
	}
	spent := w.now().Sub(w.rateSince)
	limit := max(w.rateLeft, w.grace)
	err := fmt.Errorf("%s call stopped after %s of nothing but the CLI's own retries of a rate limit, all that was left of rate_limit_max_wait_sec: %s",
		w.phase, seconds(limit), quote)
	if asked > 0 && spent+asked > w.rateLeft {
		limit = max(spent, w.grace)
		err = fmt.Errorf("%s call stopped: the server asks for a wait of %s, more than is left of rate_limit_max_wait_sec (%s): %s",
			w.phase, seconds(asked), seconds(max(w.rateLeft-spent, 0)), quote)
	}
	if w.rateAt != nil && limit >= w.rateLimit {
		return // an end as early is set
	}
	w.stopRateTimer()
	w.rateLimit = limit
	end := w.end
	w.rateAt = time.AfterFunc(limit-spent, func() { end(&Ending{Class: phase.RateLimited, Err: err}) })
}

// stopRate ends a run of rate-limit refusals: the CLI got on with its work.
// Callers hold mu.
func (w *Watcher) stopRate() {
	w.stopRateTimer()
	w.rateSince, w.rateUntil = time.Time{}, time.Time{}
	w.workAt = w.now()
}

func (w *Watcher) stopRateTimer() {
	if w.rateAt != nil {
		w.rateAt.Stop()
		w.rateAt = nil
	}
}

func (w *Watcher) stopStall() {
	if w.stallAt != nil {
		w.stallAt.Stop()
		w.stallAt = nil
	}
}

// event records one structured event; callers hold mu.
func (w *Watcher) event(ev Event) {
	switch {
	case !w.rules.kind.Events.Cumulative:
		w.usage = w.usage.Add(ev.Usage)
	case ev.Usage != (Usage{}):
		w.usage = ev.Usage
	}
	if r := ev.Retry; r != nil {
		// The CLI retries a refused request by itself.
		if r.Class == phase.Network {
			w.networkError(r.Text)
			return
		}
		w.stopStall()
		if r.serverWait(w.now()) > 0 {
			w.server = r
		}
		w.rateRefusal(text.Quote(r.Text), r.serverWait(w.now()))
		return
	}
	if ev.Error == "" || ev.Final {
		w.stopStall()
	}
	if ev.Error == "" && (ev.Text != "" || ev.Final) {
		w.stopRate()
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
	w.stopRateTimer()
	if w.rateUntil.IsZero() {
		w.rateUntil = w.now()
	}
	if w.lingerAt != nil {
		w.lingerAt.Stop()
	}
}

// RateLimited is how long the attempt showed nothing but the CLI's own
// retries of a rate limit, up to its end: time spent waiting on the limit,
// as a wait between attempts is. For a CLI whose output shows its work,
// the silence before the refusals counts too: it retried without a word.
func (w *Watcher) RateLimited() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	until := w.rateUntil
	if until.IsZero() {
		until = w.now()
	}
	switch {
	case w.showsWork && !w.workAt.IsZero():
		return until.Sub(w.workAt)
	case w.rateSince.IsZero():
		return 0
	}
	return until.Sub(w.rateSince)
}

// ServerWait is how long from now the server last asked to wait, as the
// CLI's retry events said (a retry-after, a reset time); 0 when they did
// not.
func (w *Watcher) ServerWait(now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.server == nil {
		return 0
	}
	return w.server.serverWait(now)
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

// Usage is the sum of what the events counted (for events that count the
// whole session, the latest count).
func (w *Watcher) Usage() Usage {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.usage
}

// Session is the first session id the events named; "" when none did.
func (w *Watcher) Session() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.session
}

// seconds writes a wait for a message: in whole seconds from one second
// up, else to a hundredth.
func seconds(d time.Duration) string {
	if d = d.Round(10 * time.Millisecond); d >= time.Second {
		d = d.Round(time.Second)
	}
	return text.Seconds(d)
}
