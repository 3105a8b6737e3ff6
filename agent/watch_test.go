package agent

import (
	"slices"
	"sync"

	"errors"
	"peal/internal/testkit/fakes"
	"strings"
	"testing"
	"time"

	"peal/phase"
)

// ends records what a watcher ended the call with.
type ends chan error

func (e ends) end(cause error) {
	select {
	case e <- cause:
	default:
	}
}

func watch(t *testing.T, kind string, o WatchOptions) (*Watcher, ends) {
	t.Helper()
	k, err := Lookup(kind)
	if err != nil {
		t.Fatal(err)
	}
	w := k.Rules(builtin).Watcher(o)
	w.grace = 0 // runs of refusals end where the cap says, with no grace
	e := make(ends, 1)
	w.Begin(e.end)
	t.Cleanup(w.Done)
	return w, e
}

func ending(t *testing.T, e ends) *Ending {
	t.Helper()
	var ed *Ending
	if err := <-e; !errors.As(err, &ed) {
		t.Fatalf("ended with %v", err)
	}
	return ed
}

func TestWatcherEndsOnAPromptForAPerson(t *testing.T) {
	t.Parallel()
	w, e := watch(t, "cursor", WatchOptions{Phase: "plan"})
	w.Line(phase.Stdout, []byte("starting"))
	w.Line(phase.Stdout, []byte("The plan: first, make sure nobody is left waiting for browser authentication."))
	for _, line := range strings.Split("Not logged in. Opening browser for login…\nWaiting for browser authentication (press Ctrl+C to cancel)", "\n") {
		w.Line(phase.Stdout, []byte(line))
	}
	ed := ending(t, e)
	if ed.Class != phase.Fatal || !strings.Contains(ed.Error(), "waits for a person: Waiting for browser authentication (press Ctrl+C to cancel)") {
		t.Fatalf("%s: %v", ed.Class, ed)
	}
}

// Well into a call's output, the same words are the agent's own work (it
// may open a browser to check a page): the call goes on.
func TestWatcherPromptOnlyAtTheStart(t *testing.T) {
	t.Parallel()
	w, e := watch(t, "cursor", WatchOptions{Phase: "execute"})
	for range 40 {
		w.Line(phase.Stdout, []byte("Running the tests of the login page and checking each step carefully."))
	}
	w.Line(phase.Stdout, []byte("Opening browser to look at the page"))
	select {
	case err := <-e:
		t.Fatalf("a working call was ended: %v", err)
	default:
	}
}

func TestWatcherStall(t *testing.T) {
	t.Parallel()
	w, e := watch(t, "codex", WatchOptions{Phase: "execute", NetworkStall: 50 * time.Millisecond})
	w.Line(phase.Stderr, []byte("warning: Codex could not find bubblewrap on PATH."))
	w.Line(phase.Stderr, []byte("stream disconnected before completion: Connection refused (os error 111)"))
	w.Line(phase.Stderr, []byte("ERROR: Reconnecting... waiting for network"))
	ed := ending(t, e)
	if ed.Class != phase.Network || !strings.Contains(ed.Error(), "nothing but network errors: stream disconnected before completion: Connection refused") {
		t.Fatalf("%s: %v", ed.Class, ed)
	}
}

// TestWatcherStallStartsOver: a line that is not a network error is
// progress; with the stall limit far away, nothing ends the call.
func TestWatcherStallStartsOver(t *testing.T) {
	t.Parallel()
	w, e := watch(t, "codex", WatchOptions{Phase: "execute", NetworkStall: time.Hour})
	w.Line(phase.Stderr, []byte("ERROR: Reconnecting... waiting for network"))
	if w.stallAt == nil {
		t.Fatal("a network line starts the stall")
	}
	w.Line(phase.Stdout, []byte("editing main.go"))
	if w.stallAt != nil {
		t.Fatal("progress stops the stall")
	}
	select {
	case err := <-e:
		t.Fatalf("ended: %v", err)
	default:
	}
}

func TestWatcherFinalResultEndsLingeringCall(t *testing.T) {
	t.Parallel()
	w, e := watch(t, "claude", WatchOptions{Phase: "plan", Structured: true})
	w.Line(phase.Stdout, []byte(`{"type":"system","subtype":"init"}`))
	w.Line(phase.Stdout, []byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"draft"}]}}`))
	if text, _ := w.Answer(); text != "draft" || w.Final() {
		t.Fatalf("answer %q before the result", text)
	}
	w.Line(phase.Stdout, []byte(`{"type":"result","subtype":"success","is_error":false,"result":"1. do it","total_cost_usd":0.25,"usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":7}}`))
	ed := ending(t, e)
	if ed.Class != phase.Succeeded {
		t.Fatalf("%v", ed)
	}
	text, ok := w.Answer()
	if !ok || text != "1. do it" || !w.Final() {
		t.Fatalf("answer %q %v", text, ok)
	}
	if u := w.Usage(); u != (Usage{InputTokens: 15, OutputTokens: 7, CachedTokens: 5, CostUSD: 0.25}) {
		t.Fatalf("usage %+v", u)
	}
	if _, failed := w.Failed(); failed {
		t.Fatal("a successful result is no failure")
	}
}

// TestEvents reads each CLI's events: the answer, an error, the usage.
func TestEvents(t *testing.T) {
	t.Parallel()
	cases := []struct {
		kind    string
		lines   []string
		answer  string
		failed  string
		usage   Usage
		session string
	}{
		// As Claude Code 2.1 printed it for a 401 (shortened).
		{"claude", []string{`{"type":"assistant","message":{"content":[{"type":"text","text":"Invalid API key · Fix external API key"}]},"error":"authentication_failed"}`,
			`{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"result":"Invalid API key · Fix external API key","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}}`},
			"Invalid API key · Fix external API key", "Invalid API key · Fix external API key", Usage{}, ""},
		// Claude Code 2.1.197: every line names the session; the result's
		// usage splits the prompt into uncached, cache-written and cached.
		{"claude", []string{`{"type":"system","subtype":"init","cwd":"/r","session_id":"be06e92d-7e30-408b-a760-4199698be73e","permissionMode":"plan"}`,
			`{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"be06e92d-7e30-408b-a760-4199698be73e","total_cost_usd":0.0019345,` +
				`"usage":{"input_tokens":228,"cache_creation_input_tokens":6,"cache_read_input_tokens":14,"output_tokens":30}}`},
			"done", "", Usage{InputTokens: 248, OutputTokens: 30, CachedTokens: 14, CostUSD: 0.0019345}, "be06e92d-7e30-408b-a760-4199698be73e"},
		{"cursor", []string{`{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s"}`}, "done", "", Usage{}, "s"},
		{"codex", []string{`{"type":"thread.started","thread_id":"t"}`, `{"type":"error","message":"Reconnecting... 1/5"}`,
			`{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"the plan"}}`,
			`{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":50,"output_tokens":20}}`},
			"the plan", "", Usage{InputTokens: 100, OutputTokens: 20, CachedTokens: 50}, "t"},
		// codex counts the whole thread: the latest count stands, it is
		// not added to the one before.
		{"codex", []string{`{"type":"thread.started","thread_id":"01a21a7f-6211-7fc0-9a1e-a0fa8555ca1f"}`,
			`{"type":"turn.completed","usage":{"input_tokens":240,"cached_input_tokens":14,"output_tokens":45}}`,
			`{"type":"turn.completed","usage":{"input_tokens":516,"cached_input_tokens":28,"output_tokens":90}}`},
			"", "", Usage{InputTokens: 516, OutputTokens: 90, CachedTokens: 28}, "01a21a7f-6211-7fc0-9a1e-a0fa8555ca1f"},
		{"codex", []string{`{"type":"error","message":"stream error"}`, `{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized"}}`},
			"", "unexpected status 401 Unauthorized", Usage{}, ""},
		{"gemini", []string{`{"type":"init","timestamp":"t","session_id":"f6581809-0c11-4c02-815b-b4e7709e0ba8","model":"gemini-2.5-flash"}`, `{"type":"message","role":"user","content":"prompt"}`,
			`{"type":"message","role":"assistant","content":"part one, ","delta":true}`, `{"type":"message","role":"assistant","content":"part two","delta":true}`,
			`{"type":"result","status":"success","stats":{"total_tokens":9,"input_tokens":6,"cached":2,"input":4,"output_tokens":3}}`},
			"part one, part two", "", Usage{InputTokens: 6, OutputTokens: 3, CachedTokens: 2}, "f6581809-0c11-4c02-815b-b4e7709e0ba8"},
		{"gemini", []string{`{"type":"result","status":"error","error":{"type":"FatalAuthenticationError","message":"API key not valid"}}`},
			"", "API key not valid", Usage{}, ""},
		// opencode 1.18.33: input excludes the cache, which is counted apart.
		{"opencode", []string{`{"type":"step_start","sessionID":"ses_de58068acffe5icQe7VmATEd4j","part":{}}`, `{"type":"text","sessionID":"ses_de58068acffe5icQe7VmATEd4j","part":{"type":"text","text":"answer"}}`,
			`{"type":"step_finish","sessionID":"ses_de58068acffe5icQe7VmATEd4j","part":{"cost":0.5,"tokens":{"input":4,"output":2,"reasoning":1,"cache":{"read":7,"write":1}}}}`,
			`{"type":"step_finish","part":{"cost":0.25,"tokens":{"input":1,"output":1,"reasoning":0}}}`},
			"answer", "", Usage{InputTokens: 13, OutputTokens: 4, CachedTokens: 7, CostUSD: 0.75}, "ses_de58068acffe5icQe7VmATEd4j"},
		{"opencode", []string{`{"type":"error","sessionID":"ses_de562f06cffeCz2V87pN8v5BJV","error":{"name":"APIError","data":{"message":"invalid x-api-key"}}}`}, "", "invalid x-api-key", Usage{}, "ses_de562f06cffeCz2V87pN8v5BJV"},
	}
	for _, tc := range cases {
		var heard []string
		w, _ := watch(t, tc.kind, WatchOptions{Phase: "plan", Structured: true, Linger: time.Hour, OnSession: func(id string) { heard = append(heard, id) }})
		for _, l := range tc.lines {
			w.Line(phase.Stdout, []byte(l))
		}
		msg, failed := w.Failed()
		if tc.failed != "" {
			if !failed || msg != tc.failed {
				t.Errorf("%s: failed %q %v, want %q", tc.kind, msg, failed, tc.failed)
			}
		} else if text, _ := w.Answer(); failed || text != tc.answer {
			t.Errorf("%s: answer %q (failed %q), want %q", tc.kind, text, msg, tc.answer)
		}
		if u := w.Usage(); u != tc.usage {
			t.Errorf("%s: usage %+v, want %+v", tc.kind, u, tc.usage)
		}
		want := []string(nil)
		if tc.session != "" {
			want = []string{tc.session}
		}
		if w.Session() != tc.session || !slices.Equal(heard, want) {
			t.Errorf("%s: session %q, heard %q; want %q once", tc.kind, w.Session(), heard, tc.session)
		}
	}
}

// TestReportedErrorIsClassified: an error the events report is classified
// by its text.
func TestReportedErrorIsClassified(t *testing.T) {
	t.Parallel()
	k, _ := Lookup("claude")
	w, _ := watch(t, "claude", WatchOptions{Phase: "plan", Structured: true, Linger: time.Hour})
	w.Line(phase.Stdout, []byte(`{"type":"result","subtype":"success","is_error":true,"result":"Invalid API key · Fix external API key"}`))
	v := k.Rules(builtin).Classifier(nil, func() *Watcher { return w }, nil)(phase.Result{Phase: "plan", ExitCode: 1})
	if v.Class != phase.Fatal || !strings.Contains(v.Err.Error(), "plan call reported an error: Invalid API key") {
		t.Fatalf("%s %v", v.Class, v.Err)
	}
	w2, _ := watch(t, "claude", WatchOptions{Phase: "plan", Structured: true, Linger: time.Hour})
	w2.Line(phase.Stdout, []byte(`{"type":"result","subtype":"error_max_turns","is_error":true,"result":""}`))
	v = k.Rules(builtin).Classifier(nil, func() *Watcher { return w2 }, nil)(phase.Result{Phase: "plan", ExitCode: 1})
	if v.Class != phase.Ordinary || !strings.Contains(v.Err.Error(), "error_max_turns") {
		t.Fatalf("%s %v", v.Class, v.Err)
	}
}

// clock is a clock a test moves by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// The Gemini CLI's lines for one try that failed on a per-minute quota.
var geminiTry = []string{
	"Attempt 1 failed: You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
	"* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 10, model: gemini-2.5-flash",
	"Please retry in 1s.",
	"Suggested retry after 1s.. Retrying after 5915ms...",
}

// TestWatcherBoundsOwnRetries: an attempt that shows nothing but the CLI's
// own retries of a rate limit for what is left of rate_limit_max_wait_sec
// is ended as rate limited, and the time counts as waited.
func TestWatcherBoundsOwnRetries(t *testing.T) {
	t.Parallel()
	w, e := watch(t, "gemini", WatchOptions{Phase: "plan", RateLimitCap: 40 * time.Second, RateLimitWaited: 40*time.Second - 50*time.Millisecond})
	w.Line(phase.Stderr, []byte("Ripgrep is not available. Falling back to GrepTool."))
	for _, line := range geminiTry[:2] {
		w.Line(phase.Stderr, []byte(line))
	}
	ed := ending(t, e)
	if ed.Class != phase.RateLimited || !strings.Contains(ed.Error(), "plan call stopped after 50ms of nothing but the CLI's own retries of a rate limit, all that was left of rate_limit_max_wait_sec: Attempt 1 failed: You exceeded your current quota") {
		t.Fatalf("%s: %v", ed.Class, ed)
	}
	if w.RateLimited() <= 0 {
		t.Fatal("the CLI's retries are not counted as waited")
	}
}

// TestWatcherOwnRetriesRun: the lines of a failure's report (a stack, the
// CLI's retry notice) keep the run of refusals going; work ends it, and the
// time counted is the run's.
func TestWatcherOwnRetriesRun(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	w, e := watch(t, "gemini", WatchOptions{Phase: "plan", RateLimitCap: time.Hour, Now: c.now})
	w.Line(phase.Stderr, []byte("Attempt 1 failed: Resource has been exhausted (e.g. check quota)."))
	c.add(5 * time.Second)
	for _, line := range []string{"Suggested retry after 1s.. Retrying after 5022ms...", "    at retryWithBackoff (file:///x.js:1:2)", "  status: 429", "}"} {
		w.Line(phase.Stderr, []byte(line))
	}
	c.add(5 * time.Second)
	if w.rateAt == nil || w.RateLimited() != 10*time.Second {
		t.Fatalf("the run of refusals stopped: %v", w.RateLimited())
	}
	w.Line(phase.Stdout, []byte("1. Create hello.txt."))
	if w.rateAt != nil || w.RateLimited() != 0 {
		t.Fatalf("work goes on, yet the run did not end: %v", w.RateLimited())
	}
	w.Line(phase.Stderr, []byte("Attempt 1 failed: Resource has been exhausted (e.g. check quota)."))
	c.add(3 * time.Second)
	w.Done()
	c.add(time.Hour)
	if got := w.RateLimited(); got != 3*time.Second {
		t.Fatalf("counted %v, want the last run, 3 s", got)
	}
	select {
	case err := <-e:
		t.Fatalf("ended: %v", err)
	default:
	}
}

// TestWatcherServerAsksTooMuch: a server that asks for a wait longer than
// what is left of rate_limit_max_wait_sec ends the attempt at once.
func TestWatcherServerAsksTooMuch(t *testing.T) {
	t.Parallel()
	// A clock of the test's: no time passes between the two lines, however
	// busy the machine.
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	w, e := watch(t, "gemini", WatchOptions{Phase: "execute", RateLimitCap: 10 * time.Second, RateLimitWaited: 9 * time.Second, Now: c.now})
	w.Line(phase.Stderr, []byte(geminiTry[0]))
	w.Line(phase.Stderr, []byte("Please retry in 30s."))
	ed := ending(t, e)
	if ed.Class != phase.RateLimited || !strings.Contains(ed.Error(), "execute call stopped: the server asks for a wait of 30 s, more than is left of rate_limit_max_wait_sec (1 s): Please retry in 30s.") {
		t.Fatalf("%s: %v", ed.Class, ed)
	}
}

// TestWatcherWithoutCap: with no cap, the CLI's own retries are not ended.
func TestWatcherWithoutCap(t *testing.T) {
	t.Parallel()
	w, e := watch(t, "gemini", WatchOptions{Phase: "plan"})
	for _, line := range geminiTry {
		w.Line(phase.Stderr, []byte(line))
	}
	w.Line(phase.Stderr, []byte("Please retry in 3600s."))
	if w.rateAt != nil {
		t.Fatal("a timer without a cap")
	}
	select {
	case err := <-e:
		t.Fatalf("ended: %v", err)
	default:
	}
}

// TestWatcherClaudeRetryEvents: Claude Code's retry events are the CLI's
// own retries: a rate limit's server time is remembered for the next wait,
// one beyond what is left ends the attempt, a retry with no answer counts
// toward the network stall; its API error worded as a message does not end
// the run of refusals.
func TestWatcherClaudeRetryEvents(t *testing.T) {
	t.Parallel()
	retry := `{"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":7000,"error_status":429,"error":"rate_limit"}`
	failed := fakes.CLIs["claude"].Failures[fakes.FailRetryAfter].Events

	t.Run("within the cap", func(t *testing.T) {
		t.Parallel()
		c := &clock{t: time.Unix(1_700_000_000, 0)}
		w, e := watch(t, "claude", WatchOptions{Phase: "plan", Structured: true, Linger: time.Hour, RateLimitCap: time.Minute, Now: c.now})
		w.Line(phase.Stdout, []byte(`{"type":"system","subtype":"init"}`))
		for _, line := range strings.Split(failed, "\n") {
			w.Line(phase.Stdout, []byte(line))
			c.add(7 * time.Second)
		}
		w.Done()
		if got := w.ServerWait(c.now()); got != 7*time.Second {
			t.Fatalf("server wait %v", got)
		}
		if got := w.RateLimited(); got != 21*time.Second {
			t.Fatalf("waited %v, want the three events' 21 s", got)
		}
		k, _ := Lookup("claude")
		v := k.Rules(builtin).Classifier(nil, func() *Watcher { return w }, c.now)(phase.Result{Phase: "plan", ExitCode: 1, Stdout: failed})
		if v.Class != phase.RateLimited || v.Wait != 7*time.Second || v.Waited != 21*time.Second ||
			!strings.Contains(v.Err.Error(), "API Error: Request rejected (429)") {
			t.Fatalf("%s wait %v waited %v: %v", v.Class, v.Wait, v.Waited, v.Err)
		}
		select {
		case err := <-e:
			t.Fatalf("ended: %v", err)
		default:
		}
	})
	t.Run("beyond the cap", func(t *testing.T) {
		t.Parallel()
		w, e := watch(t, "claude", WatchOptions{Phase: "plan", Structured: true, RateLimitCap: time.Minute, RateLimitWaited: 55 * time.Second})
		w.Line(phase.Stdout, []byte(retry))
		ed := ending(t, e)
		if ed.Class != phase.RateLimited || !strings.Contains(ed.Error(), "the server asks for a wait of 7 s, more than is left of rate_limit_max_wait_sec (5 s): api_retry: HTTP 429 (rate_limit), retry 1 of 1 in 7s") {
			t.Fatalf("%s: %v", ed.Class, ed)
		}
	})
	t.Run("no answer", func(t *testing.T) {
		t.Parallel()
		w, e := watch(t, "claude", WatchOptions{Phase: "plan", Structured: true, NetworkStall: 50 * time.Millisecond, RateLimitCap: time.Hour})
		w.Line(phase.Stdout, []byte(`{"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":600.52,"error_status":null,"error":"unknown"}`))
		ed := ending(t, e)
		if ed.Class != phase.Network || !strings.Contains(ed.Error(), "nothing but network errors: api_retry: no answer (unknown)") {
			t.Fatalf("%s: %v", ed.Class, ed)
		}
	})
}

// TestWatcherGrace: with nothing left of the cap, a CLI still gets the
// grace to exit by itself after printing its refusal, and is quoted in its
// own words; only one that goes on retrying is ended.
func TestWatcherGrace(t *testing.T) {
	t.Parallel()
	w, e := watch(t, "claude", WatchOptions{Phase: "plan", RateLimitCap: 40 * time.Second, RateLimitWaited: 40 * time.Second})
	w.grace = time.Hour
	w.Line(phase.Stdout, []byte("API Error: Request rejected (429) · Number of request tokens has exceeded your per-minute rate limit"))
	w.Line(phase.Stdout, []byte("Please try again in 1s."))
	if w.rateAt == nil || w.rateLimit != time.Hour {
		t.Fatalf("the run ends after %v, want the grace", w.rateLimit)
	}
	w.Done()
	select {
	case err := <-e:
		t.Fatalf("ended: %v", err)
	default:
	}
}

// TestWatcherSilentRetries: a CLI whose output shows its work (opencode)
// and that ends on a rate limit after a silence spent that silence on its
// own retries: it counts as waited. A CLI that is silent while it works
// (gemini without structured output) counts only its refusals.
func TestWatcherSilentRetries(t *testing.T) {
	t.Parallel()
	for kind, want := range map[string]time.Duration{"opencode": 100 * time.Second, "gemini": 0} {
		c := &clock{t: time.Unix(1_700_000_000, 0)}
		w, _ := watch(t, kind, WatchOptions{Phase: "plan", RateLimitCap: time.Hour, Now: c.now})
		w.Line(phase.Stderr, []byte("> plan · mock-model"))
		c.add(100 * time.Second)
		w.Line(phase.Stderr, []byte("\x1b[91m\x1b[1mError: \x1b[0mRate limit reached for requests. Please try again in 1s."))
		w.Done()
		if got := w.RateLimited(); got != want {
			t.Errorf("%s: counted %v, want %v", kind, got, want)
		}
	}
}

// TestWatcherEndsWhenNoHostIsReached: a call whose CLI cannot reach any of
// its hosts through peal's proxy (no route, no name) is ended at once, as a
// network failure that names the host and says its own cause (no refused
// side request is then put forward); once a host was reached, a failure is
// only a network error of the stall; one the proxy told before the watch
// began ends the call as it begins.
func TestWatcherEndsWhenNoHostIsReached(t *testing.T) {
	t.Parallel()
	offline := errors.New("dial tcp: lookup opencode.ai: no such host")
	w, e := watch(t, "opencode", WatchOptions{Phase: "plan"})
	w.Reached("opencode.ai:443", offline, true)
	ed := ending(t, e)
	var un *UnreachableHostError
	if ed.Class != phase.Network || !errors.As(ed.Err, &un) || un.Host != "opencode.ai:443" || !SaysItsCause(ed.Err) ||
		ed.Error() != "plan call stopped: peal's proxy cannot reach opencode.ai:443 for it (dial tcp: lookup opencode.ai: no such host): this machine has no network there, or cannot resolve the name" {
		t.Fatalf("%s: %v", ed.Class, ed)
	}

	w, e = watch(t, "opencode", WatchOptions{Phase: "plan"})
	w.Reached("api.anthropic.com:443", nil, false)
	w.Reached("opencode.ai:443", offline, true)
	w.Reached("api.anthropic.com:443", errors.New("connection refused"), false)
	select {
	case err := <-e:
		t.Fatalf("a call that reached its host was ended: %v", err)
	default:
	}

	k, _ := Lookup("opencode")
	w = k.Rules(builtin).Watcher(WatchOptions{Phase: "execute"})
	w.Reached("opencode.ai:443", offline, true)
	e = make(ends, 1)
	w.Begin(e.end)
	t.Cleanup(w.Done)
	if ed := ending(t, e); ed.Class != phase.Network {
		t.Fatalf("before the watch began: %s: %v", ed.Class, ed)
	}
}
