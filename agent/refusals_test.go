package agent

import (
	"errors"
	"strings"
	"testing"
	"time"

	"peal/internal/testkit/fakes"
	"peal/phase"
)

// opencodeSaid is a line as opencode prints the API's words: coloured, after
// "Error: ".
func opencodeSaid(msg string) string {
	return "\x1b[0m\n> plan · mock-model\n\x1b[0m\n\x1b[91m\x1b[1mError: \x1b[0m" + msg + "\n"
}

// TestNoWaitHelps: an account out of quota or credit and a prompt over the
// context window are fatal at once, told apart from other fatal failures,
// and quote the CLI's own words, as each CLI was measured to print them
// against an API answering so (directly, or relayed by opencode from each
// provider); Google's quota refusals that give a time to retry stay rate
// limits for that time.
func TestNoWaitHelps(t *testing.T) {
	t.Parallel()
	type want int
	const (
		quota want = iota
		window
		rate
	)
	geminiMinute := fakes.CLIs["gemini"].Failures[fakes.FailRateLimitRetries].TextFor("gemini-2.5-flash")
	cases := []struct {
		name, kind string
		r          phase.Result
		want       want
		quote      string
		tokens     int
		limit      int
		wait       time.Duration
	}{
		{"claude's credit", "claude", res(1, "Credit balance is too low\n", ""), quota, "Credit balance is too low", 0, 0, 0},
		// A refusal that exits 0 is never a success.
		{"claude's credit, exit 0", "claude", res(0, "Credit balance is too low\n", ""), quota, "Credit balance is too low", 0, 0, 0},
		{"claude's spend limit", "claude", res(1, "You've hit your monthly spend limit. Run /usage-credits to manage your limit.\n", ""), quota, "You've hit your monthly spend limit.", 0, 0, 0},
		{"codex's quota", "codex", res(1, "", "ERROR: Quota exceeded. Check your plan and billing details.\nERROR: Quota exceeded. Check your plan and billing details.\n"),
			quota, "ERROR: Quota exceeded. Check your plan and billing details.", 0, 0, 0},
		{"gemini's daily quota", "gemini", res(1, "", fakes.CLIs["gemini"].Failures[fakes.FailOutOfCredit].TextFor("gemini-2.5-flash")),
			quota, "…TerminalQuotaError: You have exhausted your daily quota on this model.", 0, 0, 0},
		// A quota refusal naming billing and no time to retry, after the
		// CLI's own ten tries.
		{"gemini's billing, no time to retry", "gemini", res(1, "", "Attempt 10 failed: You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.. Max attempts reached\n"+
			"Error when talking to Gemini API Full report available at: /tmp/x.json RetryableQuotaError: You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n"+
			"  cause: {\n    code: 429,\n    details: []\n  },\n  retryDelayMs: undefined,\n  status: 429\n}\nAn unexpected critical error occurred:[object Object]\n"),
			quota, "Attempt 10 failed: You exceeded your current quota, please check your plan and billing details.", 0, 0, 0},
		{"gemini's per-minute quota", "gemini", res(-1, "", geminiMinute), rate, "check your plan and billing details", 0, 0, time.Second},
		{"gemini's quota of none", "gemini", res(1, "", "Error when talking to Gemini API Full report available at: /tmp/x.json TerminalQuotaError: Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 0, model: gemini-3-pro\n"),
			quota, "…TerminalQuotaError: Quota exceeded for metric", 0, 0, 0},
		{"opencode relays OpenAI", "opencode", res(1, "", opencodeSaid("You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.")),
			quota, "Error: You exceeded your current quota", 0, 0, 0},
		{"opencode relays Anthropic", "opencode", res(1, "", opencodeSaid("Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.")),
			quota, "Error: Your credit balance is too low to access the Anthropic API.", 0, 0, 0},
		{"opencode relays Google's daily quota", "opencode", res(1, "", opencodeSaid("You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 250, model: mock-model")),
			quota, "Error: You exceeded your current quota", 0, 0, 0},
		{"opencode relays Google's per-minute quota", "opencode", res(1, "", opencodeSaid("You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 10, model: mock-model\nPlease retry in 1s.")),
			rate, "", 0, 0, time.Second},

		{"claude's prompt too long", "claude", res(1, fakes.CLIs["claude"].Failures[fakes.FailOverContext].Text+"\n", ""), window, "Prompt is too long · the request is ~212345 tokens (limit 200000)", 212345, 200000, 0},
		{"codex's context window", "codex", res(1, "", fakes.CLIs["codex"].Failures[fakes.FailOverContext].Text+"\n"), window,
			"ERROR: Codex ran out of room in the model's context window.", 0, 0, 0},
		{"gemini's token count", "gemini", res(1, "", fakes.CLIs["gemini"].Failures[fakes.FailOverContext].Text), window,
			`…_ApiError: {"error":{"code":400,"message":"The input token count (1212345) exceeds the maximum number of tokens allowed (1048576).",`, 1212345, 1048576, 0},
		{"opencode relays OpenAI's window", "opencode", res(1, "", opencodeSaid("This model's maximum context length is 200000 tokens. However, your messages resulted in 212345 tokens. Please reduce the length of the messages.")),
			window, "Error: This model's maximum context length is 200000 tokens.", 212345, 200000, 0},
		{"opencode relays Anthropic's window", "opencode", res(1, "", opencodeSaid("prompt is too long: 212345 tokens > 200000 maximum")), window,
			"Error: prompt is too long: 212345 tokens > 200000 maximum", 212345, 200000, 0},
		{"opencode relays Google's window", "opencode", res(1, "", opencodeSaid("The input token count (1212345) exceeds the maximum number of tokens allowed (1048576).")), window,
			"Error: The input token count (1212345)", 1212345, 1048576, 0},
	}
	for _, tc := range cases {
		v := classify(t, tc.kind, builtin, tc.r)
		var q *QuotaError
		var w *ContextWindowError
		msg := ""
		if v.Err != nil {
			msg = v.Err.Error()
		}
		switch tc.want {
		case quota:
			if v.Class != phase.Fatal || !errors.As(v.Err, &q) || !strings.HasPrefix(q.Said, tc.quote) || q.Kind != tc.kind || !phase.EndsRun(v.Err) {
				t.Errorf("%s: %s %v\nwant out of quota, quoting %q", tc.name, v.Class, v.Err, tc.quote)
			}
			k, _ := Lookup(tc.kind)
			if !strings.Contains(msg, "out of quota or credit") || !strings.Contains(msg, k.Failures.QuotaHint) || strings.Contains(msg, k.Failures.FatalHint) {
				t.Errorf("%s: the line does not say what it is and what to do: %s", tc.name, msg)
			}
		case window:
			if v.Class != phase.Fatal || !errors.As(v.Err, &w) || !strings.HasPrefix(w.Said, tc.quote) || w.Tokens != tc.tokens || w.Limit != tc.limit ||
				w.Phase != "execute" || phase.EndsRun(v.Err) {
				t.Errorf("%s: %s %v (sizes %d/%d)\nwant over the window, quoting %q, sizes %d/%d", tc.name, v.Class, v.Err, w.Tokens, w.Limit, tc.quote, tc.tokens, tc.limit)
			}
			if !strings.HasPrefix(msg, "the execute prompt is larger than the model's context window") {
				t.Errorf("%s: the line does not name the phase: %s", tc.name, msg)
			}
		case rate:
			if v.Class != phase.RateLimited || v.Wait != tc.wait || errors.As(v.Err, &q) || !strings.Contains(msg, tc.quote) {
				t.Errorf("%s: %s wait %s %v\nwant a rate limit of %s", tc.name, v.Class, v.Wait, v.Err, tc.wait)
			}
		}
		if strings.Contains(msg, "\n") || strings.Contains(msg, "\x1b") || strings.Contains(msg, "status: 4") || strings.Contains(msg, "[object Object]") {
			t.Errorf("%s: not one clean line quoting the error: %q", tc.name, msg)
		}
	}
}

// TestContextSizesInTheMessage: the line names the phase, the size the CLI
// reported and the limit, or says that the CLI does not tell.
func TestContextSizesInTheMessage(t *testing.T) {
	t.Parallel()
	e := &ContextWindowError{Kind: "claude", Phase: "plan", Tokens: 212345, Limit: 200000, Said: "Prompt is too long", Err: errors.New("x")}
	if got := e.Error(); !strings.HasPrefix(got, "the plan prompt is larger than the model's context window (about 212345 tokens, where the model takes at most 200000), so it was not sent again") ||
		!strings.HasSuffix(got, "claude says: Prompt is too long") {
		t.Errorf("%s", got)
	}
	e = &ContextWindowError{Kind: "codex", Phase: "address", Said: "ERROR: Codex ran out of room", Err: errors.New("x")}
	if got := e.Error(); !strings.Contains(got, "the address prompt is larger than the model's context window (the CLI does not say by how much)") {
		t.Errorf("%s", got)
	}
}

// TestQuoteNeverTheFooter: a failure no pattern explains quotes the CLI's
// last words that say something: not codex's footer ("tokens used" and a
// count), not the fields of the error object gemini dumps ("status: 400"),
// not a bare number.
func TestQuoteNeverTheFooter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		kind  string
		r     phase.Result
		quote string
	}{
		{"codex", res(1, "", "ERROR: stream error: the turn went wrong\ntokens used\n0\n"), "status 1: ERROR: stream error: the turn went wrong"},
		{"codex", res(1, "", "ERROR: stream error: the turn went wrong\ntokens used\n12,345\n"), "status 1: ERROR: stream error: the turn went wrong"},
		{"gemini", res(1, "", "Error when talking to Gemini API Full report available at: /tmp/r.json _ApiError: {\"error\":{\"code\":400,\"message\":\"Something odd.\",\"status\":\"INVALID_ARGUMENT\"}}\n"+
			"    at throwErrorIfNotOK (file:///x.js:1:2)\n  status: 400\n}\nAn unexpected critical error occurred:[object Object]\n"),
			`status 1: …_ApiError: {"error":{"code":400,"message":"Something odd.","status":"INVALID_ARGUMENT"}}`},
		{"claude", res(1, "something broke\n42\n", ""), "status 1: something broke"},
	}
	for _, tc := range cases {
		v := classify(t, tc.kind, builtin, tc.r)
		if v.Class != phase.Ordinary || !strings.HasSuffix(v.Err.Error(), tc.quote) {
			t.Errorf("%s: %s %v\nwant it to end %q", tc.kind, v.Class, v.Err, tc.quote)
		}
	}
}

// TestServerRetryTimes: the server's time to retry, in each form a CLI
// shows it, is the wait; the latest mention wins.
func TestServerRetryTimes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 1, 16, 23, 0, time.UTC)
	cases := map[string]time.Duration{
		// Google's RetryInfo, as a CLI dumps the error's JSON.
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}`: 26 * time.Second,
		`retryDelay: '1500ms'`: 1500 * time.Millisecond,
		// Google's message and the Gemini CLI's own words.
		"Please retry in 26.5s.":                              26500 * time.Millisecond,
		"Suggested retry after 7s.. Retrying after 7211ms...": 7 * time.Second,
		// The answer's headers, as opencode's error event carries them.
		`"responseHeaders":{"content-type":"application/json","retry-after":"3"}`: 3 * time.Second,
		`"retry-after-ms":"250"`: 250 * time.Millisecond,
		// Claude Code's limits of a subscription.
		"You've hit your session limit · resets 2:16am (UTC)":          59*time.Minute + 37*time.Second,
		"You've hit your session limit · resets 1am (UTC)":             23*time.Hour + 43*time.Minute + 37*time.Second,
		"You've hit your weekly limit · resets Nov 28, 3pm (UTC)":      37*time.Hour + 43*time.Minute + 37*time.Second,
		"You've hit your weekly limit · resets Jan 2, 2027, 1am (UTC)": 35*24*time.Hour + 23*time.Hour + 43*time.Minute + 37*time.Second,
		"resets 2:16am (Nowhere/Unknown)":                              0,
		// Its own backoff is no time the server gave.
		"Attempt 2 failed with status 529. Retrying with backoff...": 0,
		"Retrying after 5915ms...":                                   0,
		// The latest mention wins, whatever its form.
		"retry after 90s\n\"retryDelay\":\"5s\"": 5 * time.Second,
	}
	for text, want := range cases {
		if got := ResetWait(text, now); got != want {
			t.Errorf("%q: %s, want %s", text, got, want)
		}
	}
}

// TestClaudeRetryEvents: Claude Code's own retries and limits in its
// stream-json: a retry after a 429 or 529 is a rate limit, with the
// server's time when the delay is its retry-after (whole seconds) and not
// when it is the CLI's jittered backoff; a retry with no answer is the
// network; a rejected limit gives its reset time; an API error worded as an
// assistant message is an error, not an answer.
func TestClaudeRetryEvents(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_795_745_000, 0)
	cases := []struct {
		line   string
		class  phase.Class
		server time.Duration
	}{
		{`{"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":7000,"error_status":429,"error":"rate_limit"}`, phase.RateLimited, 7 * time.Second},
		{`{"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":600.1170579286211,"error_status":529,"error":"overloaded"}`, phase.RateLimited, 0},
		{`{"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":600.5238132563707,"error_status":null,"error":"unknown"}`, phase.Network, 0},
		{`{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1795745793,"rateLimitType":"five_hour","isUsingOverage":false}}`, phase.RateLimited, 793 * time.Second},
	}
	for _, tc := range cases {
		ev, ok := parseStreamJSON([]byte(tc.line))
		if !ok || ev.Retry == nil || ev.Retry.Class != tc.class || ev.Retry.serverWait(now) != tc.server || ev.Retry.Text == "" {
			t.Errorf("%s: %+v %+v", tc.line, ev, ev.Retry)
		}
	}
	for _, line := range []string{
		`{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1795745793}}`,
		`{"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":500,"error_status":400}`,
	} {
		if ev, ok := parseStreamJSON([]byte(line)); !ok || ev.Retry != nil {
			t.Errorf("%s: %+v", line, ev)
		}
	}
	ev, _ := parseStreamJSON([]byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"Credit balance is too low"}]},"error":"billing_error"}`))
	if ev.Error != "Credit balance is too low" || ev.Text != "" {
		t.Errorf("an API error as a message: %+v", ev)
	}
}
