package integration

import (
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"peal/internal/testkit/mockllm"
)

// The CLIs' own words for an account out of credit, and for a prompt over
// the context window, as measured in TestCLIFailures.
var (
	outOfCredit = map[string]string{
		"claude":   "Credit balance is too low",
		"codex":    "ERROR: Quota exceeded. Check your plan and billing details.",
		"gemini":   "TerminalQuotaError: You have exhausted your daily quota on this model.",
		"opencode": "Error: You exceeded your current quota, please check your plan and billing details.",
	}
	overContext = map[string]string{
		"claude":   "Prompt is too long · the request is ~212345 tokens (limit 200000)",
		"codex":    "ERROR: Codex ran out of room in the model's context window.",
		"gemini":   "The input token count (1212345) exceeds the maximum number of tokens allowed (1048576).",
		"opencode": "Error: This model's maximum context length is 200000 tokens. However, your messages resulted in 212345 tokens.",
	}
	// The sizes each CLI reports (codex says none).
	overContextSizes = map[string]string{
		"claude":   "about 212345 tokens, where the model takes at most 200000",
		"codex":    "the CLI does not say by how much",
		"gemini":   "about 1212345 tokens, where the model takes at most 1048576",
		"opencode": "about 212345 tokens, where the model takes at most 200000",
	}
)

// errorLine is peal's last line, which says why it stopped.
func errorLine(p *pealRun) string {
	for _, line := range strings.Split(p.result.stderr, "\n") {
		if strings.HasPrefix(line, "peal: error:") {
			return line
		}
	}
	return ""
}

// TestPealOutOfCredit: an account out of quota or credit fails the run
// after one attempt, even with retries allowed (exit 1), in one line that
// says so, quotes the CLI and says what to do.
func TestPealOutOfCredit(t *testing.T) {
	t.Parallel()
	eachAgent(t, func(t *testing.T, a agent) {
		p := startPeal(t, a, always(mockllm.Failure{Refusal: mockllm.OutOfCredit}), testKey, "")
		var extra []string
		if a.kind == "gemini" {
			// With no model set, the Gemini CLI answers a quota it cannot
			// retry by falling back to its other default model, and then
			// asks again and again, silently, until the phase timeout (as
			// with a model the API does not know; see docs/agents.md).
			extra = []string{"--model", "gemini-2.5-flash"}
		}
		fatal(t, p, []string{outOfCredit[a.kind]}, extra...)
		if line := errorLine(p); !strings.Contains(line, "the account the "+a.kind+" CLI uses is out of quota or credit, which no wait brings back") {
			t.Errorf("the line does not say the account is out of quota: %s", line)
		}
		t.Logf("%s: exit %d after %s, %d requests", a.kind, p.result.code, p.result.elapsed.Round(100*time.Millisecond), len(modelRequests(p.srv)))
	})
}

// TestPealOutOfCreditRelayed: opencode relays the words of the provider it
// uses; an Anthropic account without credit and Google's daily quota are
// recognised through it.
func TestPealOutOfCreditRelayed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		protocol mockllm.Protocol
		said     string
	}{
		{mockllm.Anthropic, "Error: Your credit balance is too low to access the Anthropic API."},
		{mockllm.Gemini, "Error: You exceeded your current quota, please check your plan and billing details."},
	} {
		t.Run(string(tc.protocol), func(t *testing.T) {
			t.Parallel()
			p := startPeal(t, opencodeOn(tc.protocol), always(mockllm.Failure{Refusal: mockllm.OutOfCredit}), testKey, "")
			fatal(t, p, []string{tc.said})
			if line := errorLine(p); !strings.Contains(line, "is out of quota or credit") {
				t.Errorf("the line does not say the account is out of quota: %s", line)
			}
			t.Logf("opencode on %s: exit %d after %s", tc.protocol, p.result.code, p.result.elapsed.Round(100*time.Millisecond))
		})
	}
}

// TestPealOverContext: a prompt over the model's context window is sent
// once, even with retries allowed (exit 1), and the line names the phase,
// the sizes the CLI reported and quotes its error (codex's ERROR: line, not
// its footer; gemini's message, not its "status: 400").
func TestPealOverContext(t *testing.T) {
	t.Parallel()
	eachAgent(t, func(t *testing.T, a agent) {
		p := startPeal(t, a, always(mockllm.Failure{Refusal: mockllm.OverContext}), testKey, "")
		fatal(t, p, []string{overContext[a.kind]})
		line := errorLine(p)
		if !strings.Contains(line, "the plan prompt is larger than the model's context window ("+overContextSizes[a.kind]+")") {
			t.Errorf("the line does not name the phase and the sizes: %s", line)
		}
		if strings.Contains(line, "tokens used") || strings.Contains(line, "status: 400") || strings.HasSuffix(line, ": 0") {
			t.Errorf("the line quotes a footer: %s", line)
		}
		t.Logf("%s: exit %d after %s", a.kind, p.result.code, p.result.elapsed.Round(100*time.Millisecond))
	})
}

// TestPealOutOfCreditFallback: codex's account is out of quota (OpenAI's
// insufficient_quota); the claude fallback, another provider, takes over at
// once, with no retry allowed, and completes the task; codex is not asked
// again.
func TestPealOutOfCreditFallback(t *testing.T) {
	t.Parallel()
	p, r, openai := fallbackTakesOver(t, "codex", "claude", mockllm.Failure{Refusal: mockllm.OutOfCredit})
	if openai != 1 || !strings.Contains(r.stderr, "the account the codex CLI uses is out of quota or credit") {
		t.Errorf("%d requests to codex's API, want 1; and the log says why the fallback took over\n%s", openai, p)
	}
	t.Logf("exit %d after %s", r.code, r.elapsed.Round(100*time.Millisecond))
}

// attemptCount matches the attempt counter of the log.
var attemptCount = regexp.MustCompile(`attempt (\d+) of (\d+)`)

// TestPealRateLimitCap: an API whose 429 (Retry-After 1), or 529, never
// lifts, with rate_limit_max_wait_sec 40: the run stops with exit 4 within
// the cap and a few attempts, whether the CLI retries by itself, silently or
// line by line (gemini's own retries are ended at the cap), and the log
// counts no wait as an attempt.
func TestPealRateLimitCap(t *testing.T) {
	t.Parallel()
	for _, f := range []mockllm.Failure{{Status: 429, RetryAfter: "1"}, {Status: 529}} {
		t.Run(strconv.Itoa(f.Status), func(t *testing.T) {
			t.Parallel()
			rateLimitCap(t, f)
		})
	}
}

func rateLimitCap(t *testing.T, f mockllm.Failure) {
	const within = 3 * time.Minute
	eachAgent(t, func(t *testing.T, a agent) {
		p := startPeal(t, a, always(f), testKey, "")
		r := p.run(t, within+3*time.Minute, "--rate-limit-max-wait-sec", "40")
		if r.code != 4 || !strings.Contains(errorLine(p), "rate_limit_max_wait_sec (40 s)") {
			t.Fatalf("want exit 4 naming the cap\n%s", p)
		}
		if r.elapsed > within {
			t.Errorf("exit 4 came after %s, want within %s\n%s", r.elapsed.Round(time.Second), within, p)
		}
		for _, m := range attemptCount.FindAllStringSubmatch(r.stderr, -1) {
			if n, _ := strconv.Atoi(m[1]); n > 1 {
				t.Errorf("the log counts a wait as an attempt: %q\n%s", m[0], p)
				break
			}
		}
		if a.kind == "gemini" && !strings.Contains(errorLine(p), "plan call stopped") {
			t.Errorf("gemini's own retries were not ended by the cap: %s", errorLine(p))
		}
		t.Logf("%s: exit 4 after %s, attempts %v, %d requests; %s", a.kind, r.elapsed.Round(time.Second), p.attempts(t), len(modelRequests(p.srv)), errorLine(p))
	})
}

// TestPealRateLimitBlip: one request refused with 429 and Retry-After 1:
// each CLI waits the server's second by itself, and peal adds no wait of
// its own (before, a CLI whose own retries were off cost peal's 30 s).
func TestPealRateLimitBlip(t *testing.T) {
	t.Parallel()
	eachAgent(t, func(t *testing.T, a agent) {
		blip := func(repo string) mockllm.Script {
			s := taskScript(repo)
			s.First = []mockllm.Reply{{Fail: &mockllm.Failure{Status: 429, RetryAfter: "1"}}}
			return s
		}
		p := startPeal(t, a, blip, testKey, "")
		r := p.run(t, 10*time.Minute)
		if r.code != 0 {
			t.Fatalf("want exit 0\n%s", p)
		}
		if n := p.attempts(t); !reflect.DeepEqual(n, map[string]int{"plan": 1, "execute": 1}) || strings.Contains(r.stderr, "rate limited, not counted") {
			t.Errorf("attempts = %v, want one plan and one execute attempt, and no wait of peal's\n%s", n, p)
		}
		t.Logf("%s: exit 0 after %s", a.kind, r.elapsed.Round(100*time.Millisecond))
	})
}

// TestPealServerRetryTime: with structured output, Claude Code shows the
// server's Retry-After in its retry event; refused again after its one
// retry, peal waits that time (2 s), once, instead of its 30 s.
func TestPealServerRetryTime(t *testing.T) {
	t.Parallel()
	a := agentOf(t, "claude")
	limited := func(repo string) mockllm.Script {
		s := taskScript(repo)
		rl := mockllm.Reply{Fail: &mockllm.Failure{Status: 429, RetryAfter: "2"}}
		s.First = []mockllm.Reply{rl, rl}
		return s
	}
	p := startPeal(t, a, limited, testKey, "")
	r := p.run(t, 10*time.Minute, "--structured-output")
	if r.code != 0 {
		t.Fatalf("want exit 0\n%s", p)
	}
	if n := p.attempts(t); !reflect.DeepEqual(n, map[string]int{"plan": 2, "execute": 1}) ||
		strings.Count(r.stderr, "waiting 2 s before the next attempt (rate limited, not counted)") != 1 {
		t.Errorf("attempts = %v, want two plan attempts with one wait of the server's 2 s between them\n%s", n, p)
	}
	t.Logf("exit 0 after %s", r.elapsed.Round(100*time.Millisecond))
}
