package runner

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"peal/agent"
	"peal/internal/testkit/fakes"
	"peal/phase"
)

// kindsWith are the kinds whose fake has the canned failure.
func kindsWith(failure string) []string {
	var out []string
	for _, kind := range agent.Names() {
		if _, ok := fakes.CLIs[kind].Failures[failure]; ok {
			out = append(out, kind)
		}
	}
	return out
}

// roles are the calls' phase, kind and agent role, in order.
func (h *harness) roles() []string {
	var out []string
	for _, c := range h.calls() {
		out = append(out, c.Phase+" "+c.Kind+" "+c.Env["PEAL_AGENT_ROLE"])
	}
	return out
}

// TestOutOfQuotaThroughRuns: an account out of quota or credit, in each
// CLI's measured words (its events, with structured output), fails the call
// at once whatever the retry count, and ends the run (every later call would
// meet it), with one line saying so, quoting the CLI and saying what to do.
func TestOutOfQuotaThroughRuns(t *testing.T) {
	t.Parallel()
	for _, kind := range kindsWith(fakes.FailOutOfCredit) {
		for _, structured := range []string{"false", "true"} {
			t.Run(kind+" structured "+structured, func(t *testing.T) {
				t.Parallel()
				outOfQuota(t, kind, "PEAL_STRUCTURED_OUTPUT="+structured)
			})
		}
	}
}

func outOfQuota(t *testing.T, kind, structured string) {
	h, env := kindHarness(t, kind, "## Task 1\nA\n## Task 2\nB\n")
	h.scenario(map[string][]fakes.Outcome{"plan": {{Failure: fakes.FailOutOfCredit}}})
	var w fakes.Sleeps
	_, err := h.runCfg(h.config(append(env, structured, "PEAL_PHASE_RETRY_COUNT=2", "PEAL_RETRY_DELAY_SEC=600", "PEAL_CONTINUE_WITH_REMAINING_TASKS=true")...), withSleep(&w))
	var q *agent.QuotaError
	var fatal *phase.FatalError
	if !errors.As(err, &q) || !errors.As(err, &fatal) || !phase.EndsRun(err) || h.keys() != "plan:1" || len(w.Waits()) != 0 {
		t.Fatalf("calls %q, waits %v, err %v", h.keys(), w.Waits(), err)
	}
	k, _ := agent.Lookup(kind)
	if msg := err.Error(); !strings.Contains(msg, "is out of quota or credit") || !strings.Contains(msg, k.Failures.QuotaHint) ||
		!strings.Contains(msg, kind+" says: ") || strings.Contains(msg, "\n") {
		t.Fatalf("the line: %v", err)
	}
}

// TestOverContextThroughRuns: a prompt over the model's context window, in
// each CLI's measured words, fails its call after one attempt, whatever the
// retry count, with one line naming the phase and the sizes; the run goes
// on with the next task (its prompt is another).
func TestOverContextThroughRuns(t *testing.T) {
	t.Parallel()
	for _, kind := range kindsWith(fakes.FailOverContext) {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			h, env := kindHarness(t, kind, "## Task 1\nA\n## Task 2\nB\n")
			h.scenario(map[string][]fakes.Outcome{"plan:1": {{Failure: fakes.FailOverContext}}})
			out, err := h.run(append(env, "PEAL_PHASE_RETRY_COUNT=2", "PEAL_CONTINUE_WITH_REMAINING_TASKS=true")...)
			if err != nil || h.keys() != "plan:1 plan:2 execute:2" || !slices.Equal(out.Failed, []int{1}) {
				t.Fatalf("calls %q, outcome %+v, err %v", h.keys(), out, err)
			}
			log := h.log.String()
			if !strings.Contains(log, "the plan prompt is larger than the model's context window") || !strings.Contains(log, kind+" says: ") {
				t.Fatalf("the log does not say why task 1 failed:\n%s", log)
			}
			if kind != "codex" && !strings.Contains(log, "tokens, where the model takes at most") {
				t.Fatalf("the sizes are not named:\n%s", log)
			}
			if strings.Contains(log, "tokens used") || strings.Contains(log, "status: 400") {
				t.Fatalf("a footer quoted:\n%s", log)
			}
		})
	}
}

// TestOutOfQuotaFallback: a fallback agent of another provider takes the
// call over at once, without spending a retry, and the agent out of quota
// is left out of every later call; a fallback that draws on the same
// provider's account is not tried.
func TestOutOfQuotaFallback(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		fallback []string
		roles    []string
		failed   bool
	}{
		{"another provider", []string{"PEAL_FALLBACK_AGENT_KIND=codex"},
			[]string{"plan claude primary", "plan codex fallback", "execute codex fallback"}, false},
		{"opencode asking another provider's model", []string{"PEAL_FALLBACK_AGENT_KIND=opencode", "PEAL_FALLBACK_MODEL=openai/gpt-x"},
			[]string{"plan claude primary", "plan opencode fallback", "execute opencode fallback"}, false},
		{"the same provider", []string{"PEAL_FALLBACK_AGENT_KIND=claude"}, []string{"plan claude primary"}, true},
		{"opencode asking the same provider's model", []string{"PEAL_FALLBACK_AGENT_KIND=opencode", "PEAL_FALLBACK_MODEL=anthropic/claude-x"},
			[]string{"plan claude primary"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, env := kindHarness(t, "claude", "## Task 1\nA\n")
			fb, _, _ := strings.Cut(strings.TrimPrefix(tc.fallback[0], "PEAL_FALLBACK_AGENT_KIND="), " ")
			h.scenario(map[string][]fakes.Outcome{"plan": {{Failure: fakes.FailOutOfCredit}, {Stdout: "THE PLAN"}}})
			var w fakes.Sleeps
			_, err := h.runCfg(h.config(append(append(env, "PEAL_FALLBACK_AGENT_CMD="+h.cli(fb), "PEAL_PHASE_RETRY_COUNT=0", "PEAL_RETRY_DELAY_SEC=600"),
				tc.fallback...)...), withSleep(&w))
			var q *agent.QuotaError
			if got := h.roles(); !slices.Equal(got, tc.roles) || len(w.Waits()) != 0 || tc.failed != errors.As(err, &q) || (!tc.failed && err != nil) {
				t.Fatalf("calls %q, want %q; waits %v; err %v", got, tc.roles, w.Waits(), err)
			}
			if !tc.failed && !strings.Contains(h.log.String(), "going on with the other agent") {
				t.Fatalf("the log does not say why the fallback took over:\n%s", h.log)
			}
		})
	}
}

// TestOverContextFallback: a fallback agent that asks for another model
// takes the call over at once; the next call, with another prompt, starts
// with the primary again. A fallback asking for the same model is not
// tried.
func TestOverContextFallback(t *testing.T) {
	t.Parallel()
	t.Run("another model", func(t *testing.T) {
		t.Parallel()
		h, env := kindHarness(t, "claude", "## Task 1\nA\n")
		h.scenario(map[string][]fakes.Outcome{"plan": {{Failure: fakes.FailOverContext}, {Stdout: "THE PLAN"}}})
		_, err := h.run(append(env, "PEAL_FALLBACK_AGENT_KIND=codex", "PEAL_FALLBACK_AGENT_CMD="+h.cli("codex"), "PEAL_PHASE_RETRY_COUNT=0")...)
		want := []string{"plan claude primary", "plan codex fallback", "execute claude primary"}
		if got := h.roles(); err != nil || !slices.Equal(got, want) {
			t.Fatalf("calls %q, want %q; err %v", got, want, err)
		}
	})
	t.Run("the same model", func(t *testing.T) {
		t.Parallel()
		h, env := kindHarness(t, "claude", "## Task 1\nA\n")
		h.scenario(map[string][]fakes.Outcome{"plan": {{Failure: fakes.FailOverContext}, {Stdout: "THE PLAN"}}})
		_, err := h.run(append(env, "PEAL_MODEL=m", "PEAL_FALLBACK_AGENT_CMD="+h.cli("claude"), "PEAL_PHASE_RETRY_COUNT=2")...)
		var cw *agent.ContextWindowError
		if !errors.As(err, &cw) || h.keys() != "plan:1" {
			t.Fatalf("calls %q, err %v", h.keys(), err)
		}
	})
}

// TestServerRetryTime: after a 429 whose server said when to come back, the
// wait before the next attempt is the server's time where the CLI shows it
// (claude's retry events, gemini's and opencode's words), else peal's own
// backoff (30 s, ±10%); the wait is not an attempt.
func TestServerRetryTime(t *testing.T) {
	t.Parallel()
	cases := []struct {
		kind       string
		structured bool
		server     bool // the CLI shows the server's time
	}{
		{"claude", true, true}, {"claude", false, false}, {"codex", false, false}, {"gemini", false, true}, {"opencode", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.kind+map[bool]string{true: " structured"}[tc.structured], func(t *testing.T) {
			t.Parallel()
			h, env := kindHarness(t, tc.kind, "## Task 1\nA\n")
			h.scenario(map[string][]fakes.Outcome{"plan": {{Failure: fakes.FailRetryAfter}, {Stdout: "THE PLAN"}}})
			var w fakes.Sleeps
			env = append(env, "PEAL_PHASE_RETRY_COUNT=0")
			if tc.structured {
				env = append(env, "PEAL_STRUCTURED_OUTPUT=true")
			}
			if _, err := h.runCfg(h.config(env...), withSleep(&w)); err != nil || h.keys() != "plan:1 plan:1 execute:1" {
				t.Fatalf("calls %q, err %v", h.keys(), err)
			}
			waits := w.Waits()
			if len(waits) != 1 || (tc.server && waits[0] != 7*time.Second) || (!tc.server && (waits[0] < 27*time.Second || waits[0] > 33*time.Second)) {
				t.Fatalf("waits %v", waits)
			}
			if !strings.Contains(h.log.String(), "(rate limited, not counted)") || !strings.Contains(h.log.String(), `attempt="attempt 1 of 1, +2 on network failures (+1 not counted)"`) {
				t.Fatalf("the log counts the wait as an attempt:\n%s", h.log)
			}
		})
	}
}

// TestOwnRetriesBoundedByTheCap: a CLI that retries a rate limit by itself
// for ever, showing each refusal, is stopped within rate_limit_max_wait_sec,
// and the run ends as rate limited (exit 4), with no wait of peal's own on
// top.
func TestOwnRetriesBoundedByTheCap(t *testing.T) {
	t.Parallel()
	for _, kind := range kindsWith(fakes.FailRateLimitRetries) {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			h, env := kindHarness(t, kind, "## Task 1\nA\n")
			h.scenario(map[string][]fakes.Outcome{"plan": {{Failure: fakes.FailRateLimitRetries}}})
			var w fakes.Sleeps
			_, err := h.runCfg(h.config(append(env, "PEAL_RATE_LIMIT_MAX_WAIT_SEC=2")...), withSleep(&w))
			var rl *phase.RateLimitError
			if !errors.As(err, &rl) || !phase.EndsRun(err) || h.keys() != "plan:1" || len(w.Waits()) != 0 ||
				!strings.Contains(err.Error(), "plan call stopped") || !strings.Contains(err.Error(), "rate_limit_max_wait_sec (2 s)") {
				t.Fatalf("calls %q, waits %v, err %v", h.keys(), w.Waits(), err)
			}
		})
	}
}
