package mockllm

import (
	"strings"
	"testing"
	"time"
)

// TestRefusals: each refusal is answered in each API's own terms: status,
// error type (and OpenAI's code), message and the details and headers its
// clients read.
func TestRefusals(t *testing.T) {
	t.Parallel()
	type want struct {
		status int
		kind   string // as TestFailures reads it: type[/code], Google's status
		msg    string // a part of the message
		header map[string]string
		detail []string // parts of Google's details, as JSON
	}
	cases := map[Refusal]map[Protocol]want{
		OutOfCredit: {
			Anthropic: {400, "invalid_request_error", "Your credit balance is too low to access the Anthropic API.", nil, nil},
			Responses: {429, "insufficient_quota/insufficient_quota", "You exceeded your current quota, please check your plan and billing details.", nil, nil},
			Chat:      {429, "insufficient_quota/insufficient_quota", "You exceeded your current quota, please check your plan and billing details.", nil, nil},
			Gemini: {429, "RESOURCE_EXHAUSTED", "You exceeded your current quota, please check your plan and billing details.", nil,
				[]string{`"@type":"type.googleapis.com/google.rpc.QuotaFailure"`, `"quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"`}},
		},
		OverContext: {
			Anthropic: {400, "invalid_request_error", "prompt is too long: 212345 tokens > 200000 maximum", nil, nil},
			Responses: {400, "invalid_request_error/context_length_exceeded", "Your input exceeds the context window of this model.", nil, nil},
			Chat: {400, "invalid_request_error/context_length_exceeded",
				"This model's maximum context length is 200000 tokens. However, your messages resulted in 212345 tokens.", nil, nil},
			Gemini: {400, "INVALID_ARGUMENT", "The input token count (1212345) exceeds the maximum number of tokens allowed (1048576).", nil, nil},
		},
		MinuteQuota: {
			Anthropic: {429, "rate_limit_error", "per-minute rate limit", map[string]string{"Retry-After": "7"}, nil},
			Responses: {429, "requests/rate_limit_exceeded", "Please try again in 7s.", map[string]string{"Retry-After": "7", "x-ratelimit-reset-requests": "7s"}, nil},
			Chat:      {429, "requests/rate_limit_exceeded", "Please try again in 7s.", map[string]string{"Retry-After": "7"}, nil},
			Gemini: {429, "RESOURCE_EXHAUSTED", "Please retry in 7s.", map[string]string{"Retry-After": "7"},
				[]string{`"quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier"`, `"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"7s"`}},
		},
	}
	message := map[Protocol]func(t *testing.T, body []byte) (string, string){
		Responses: openAIMessage, Chat: openAIMessage,
	}
	for _, r := range Refusals {
		for _, p := range protos {
			w := cases[r][p.name]
			t.Run(string(r)+"/"+string(p.name), func(t *testing.T) {
				t.Parallel()
				s := New(Always(Failure{Refusal: r, RetryAfter: map[bool]string{true: "7"}[r == MinuteQuota]}))
				defer s.Close()
				a, err := send(t, s, p, "k", "hi", nil, 0, true)
				if err != nil {
					t.Fatal(err)
				}
				if a.status != w.status {
					t.Fatalf("status %d, want %d: %s", a.status, w.status, a.raw)
				}
				var kind, msg string
				switch p.name {
				case Anthropic:
					var e struct {
						Error struct{ Type, Message string }
					}
					mustJSON(t, a.raw, &e)
					kind, msg = e.Error.Type, e.Error.Message
				case Gemini:
					var e struct {
						Error struct{ Status, Message string }
					}
					mustJSON(t, a.raw, &e)
					kind, msg = e.Error.Status, e.Error.Message
				default:
					kind, msg = message[p.name](t, a.raw)
				}
				if kind != w.kind || !strings.Contains(msg, w.msg) {
					t.Errorf("error %q %q, want %q and %q", kind, msg, w.kind, w.msg)
				}
				for k, v := range w.header {
					if got := a.header.Get(k); got != v {
						t.Errorf("header %s = %q, want %q", k, got, v)
					}
				}
				for _, d := range w.detail {
					if !strings.Contains(string(a.raw), d) {
						t.Errorf("the details lack %s: %s", d, a.raw)
					}
				}
				if rs := s.Requests(); len(rs) != 1 || rs[0].Status != w.status {
					t.Errorf("records %+v", rs)
				}
			})
		}
	}
}

// TestRefusalSizes: an OverContext refusal reports the sizes it is given,
// and a status set beside a refusal wins.
func TestRefusalSizes(t *testing.T) {
	t.Parallel()
	s := New(Always(Failure{Refusal: OverContext, Tokens: 300001, Limit: 128000}))
	defer s.Close()
	a, err := send(t, s, protos[0], "k", "hi", nil, 0, false)
	if err != nil || !strings.Contains(string(a.raw), "prompt is too long: 300001 tokens > 128000 maximum") {
		t.Fatalf("%v: %s", err, a.raw)
	}
	s2 := New(Always(Failure{Refusal: OutOfCredit, Status: 402, Message: "pay up"}))
	defer s2.Close()
	a, err = send(t, s2, protos[0], "k", "hi", nil, 0, false)
	if err != nil || a.status != 402 || !strings.Contains(string(a.raw), `"message":"pay up"`) {
		t.Fatalf("%v: %d %s", err, a.status, a.raw)
	}
}

// TestAnthropicResetHeader: a 429 with Retry-After also says, as Anthropic
// does, when the limit is replenished (RFC 3339).
func TestAnthropicResetHeader(t *testing.T) {
	t.Parallel()
	s := New(Always(Failure{Status: 429, RetryAfter: "30"}))
	defer s.Close()
	before := time.Now()
	a, err := send(t, s, protos[0], "k", "hi", nil, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	at, err := time.Parse(time.RFC3339, a.header.Get("anthropic-ratelimit-requests-reset"))
	if err != nil || at.Before(before.Add(29*time.Second)) || at.After(time.Now().Add(31*time.Second)) {
		t.Fatalf("reset %q (%v)", a.header.Get("anthropic-ratelimit-requests-reset"), err)
	}
}
