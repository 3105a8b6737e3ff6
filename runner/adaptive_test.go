package runner

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"peal/internal/testkit/fakes"
	"peal/phase"
)

var (
	netDown = fakes.Outcome{Exit: 1, Stderr: "fetch failed: getaddrinfo EAI_AGAIN api.example.com"}
	noLogin = fakes.Outcome{Exit: 1, Stderr: "Error: not logged in; run `agent login` first"}
)

// fast makes network retries immediate so that the tests do not wait.
var fast = []string{"PEAL_NETWORK_RETRY_DELAY_SEC=0"}

func TestNetworkRetriesDrawOnTheirOwnBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	h.scenario(map[string][]fakes.Outcome{"execute": {netDown, netDown, ok}})
	if _, err := h.run(fast...); err != nil {
		t.Fatal(err)
	}
	if h.keys() != "plan:1 execute:1 execute:1 execute:1" {
		t.Fatalf("calls %q", h.keys())
	}
}

// TestUnreachableStopsTheRun: every attempt failed with a network error → the
// run stops at once, even under continue_with_remaining_tasks, with the state
// saved and the ticket's attempt marked error.
func TestUnreachableStopsTheRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, threeTasks)
	h.scenario(map[string][]fakes.Outcome{"plan:2": {netDown}})
	_, err := h.run(append(fast, "PEAL_CONTINUE_WITH_REMAINING_TASKS=true", "PEAL_NETWORK_RETRY_COUNT=1", "PEAL_PHASE_RETRY_COUNT=3")...)
	var ue *phase.UnreachableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("err = %v", err)
	}
	if h.keys() != "plan:1 execute:1 plan:2 plan:2" {
		t.Fatalf("calls %q: no further task may run", h.keys())
	}
	if !slices.Equal(h.state().CompletedTaskIndices, []int{1}) {
		t.Fatalf("state %+v", h.state())
	}
	if last := lastAttempt(t, h, h.ticket(2)); last.Status != "error" {
		t.Fatalf("attempt status %q, want error", last.Status)
	}
}

// TestNetworkGiveUp: network_give_up_sec reaches agent calls: no retry
// starts once failing and waiting would pass it, however many retries
// network_retry_count still allows.
func TestNetworkGiveUp(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	h.scenario(map[string][]fakes.Outcome{"plan": {netDown, netDown, netDown, netDown, netDown, netDown}})
	var w fakes.Sleeps
	// Waits of 48-72 s, then 96-144 s: the second retry would start past
	// 100 s.
	cfg := h.config("PEAL_NETWORK_RETRY_COUNT=5", "PEAL_NETWORK_RETRY_DELAY_SEC=60", "PEAL_NETWORK_RETRY_MAX_DELAY_SEC=600",
		"PEAL_NETWORK_GIVE_UP_SEC=100")
	_, err := h.runCfg(cfg, withSleep(&w))
	var ue *phase.UnreachableError
	if !errors.As(err, &ue) {
		t.Fatalf("err = %v, want the agent unreachable", err)
	}
	if h.keys() != "plan:1 plan:1" {
		t.Fatalf("calls %q, want one retry before giving up", h.keys())
	}
}

func TestFatalFailureIsNotRetried(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	h.scenario(map[string][]fakes.Outcome{"plan": {noLogin, ok}})
	_, err := h.run("PEAL_PHASE_RETRY_COUNT=3")
	if err == nil || !strings.Contains(err.Error(), "not logged in") || h.keys() != "plan:1" {
		t.Fatalf("calls %q, err %v", h.keys(), err)
	}
}

func TestCustomPatterns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	h.scenario(map[string][]fakes.Outcome{"plan": {{Exit: 1, Stderr: "upstream hiccup"}, {Exit: 1, Stderr: "quota gone"}, ok}})
	_, err := h.run(append(fast, "PEAL_NETWORK_ERROR_PATTERNS=hiccup", "PEAL_FATAL_ERROR_PATTERNS=quota gone", "PEAL_PHASE_RETRY_COUNT=3")...)
	if err == nil || !strings.Contains(err.Error(), "quota gone") || h.keys() != "plan:1 plan:1" {
		t.Fatalf("calls %q, err %v", h.keys(), err)
	}
}

func TestFallbackAgentAlternates(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	h.scenario(map[string][]fakes.Outcome{"plan": {fail, fail, ok}})
	// The fallback is the same fake under another name, so both record calls.
	fallback := filepath.Join(h.tmp, "fallback-agent")
	if err := os.Symlink(fakeAgent, fallback); err != nil {
		t.Fatal(err)
	}
	if _, err := h.run("PEAL_PHASE_RETRY_COUNT=2", "PEAL_FALLBACK_AGENT_CMD="+fallback, "PEAL_FALLBACK_MODEL=backup-model", "PEAL_MODEL=main-model"); err != nil {
		t.Fatal(err)
	}
	c := h.calls()
	var roles []string
	for _, call := range c[:3] {
		roles = append(roles, call.Env["PEAL_AGENT_ROLE"])
	}
	if strings.Join(roles, " ") != "primary fallback primary" {
		t.Fatalf("roles %q", roles)
	}
	if !slices.Contains(c[1].Argv, "backup-model") || !slices.Contains(c[2].Argv, "main-model") {
		t.Fatalf("models: %q / %q", c[1].Argv, c[2].Argv)
	}
}

func TestFallbackMustResolve(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	cfg := h.config()
	cfg.FallbackAgentCmd = "no-such-fallback-agent"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "no-such-fallback-agent") {
		t.Fatalf("err = %v", err)
	}
}

// TestPlateau: rounds without fewer findings end the loop early; rounds that
// make progress do not count.
func TestPlateau(t *testing.T) {
	t.Parallel()
	three := append(twoFindings(), fakes.Finding{ID: "F003", File: "c.go", Severity: "info", Message: "doc"})
	cases := []struct {
		name    string
		address []fakes.Outcome
		rounds  int // address calls
		left    bool
	}{
		{"no progress: stops after 2 rounds", []fakes.Outcome{{}}, 2, true},
		{"progress then none", []fakes.Outcome{{StetFix: 1}, {}}, 3, true},
		{"steady progress is no plateau", []fakes.Outcome{{StetFix: 1}}, 3, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "## Task 1\nA\n")
			env := h.withStet(fakes.StetScenario{})
			h.scenario(map[string][]fakes.Outcome{"execute": plants(three...), "address": tc.address})
			out, err := h.run(append(env, "PEAL_PLATEAU_ROUNDS=2", "PEAL_MAX_ADDRESS_ROUNDS=10", "PEAL_ON_FINDINGS_REMAINING=warn")...)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(h.keys(), "address:1"); n != tc.rounds {
				t.Fatalf("%d address rounds, want %d (%s)", n, tc.rounds, h.keys())
			}
			if tc.left != (len(out.WithFindings) == 1) {
				t.Fatalf("outcome %+v", out)
			}
			if tc.left && !strings.Contains(h.log.String(), "plateau") {
				t.Fatal("the plateau is not logged")
			}
		})
	}
}

// TestDefer: a task left with findings under "defer" is neither completed
// nor failed; the run goes on, exits 2, and the next run tries it again.
func TestDefer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, threeTasks)
	env := h.withStet(fakes.StetScenario{})
	// Task 1's review has findings no round fixes; tasks 2 and 3 find none.
	h.scenario(map[string][]fakes.Outcome{"execute:1": plants(twoFindings()...)})
	env = append(env, "PEAL_ON_FINDINGS_REMAINING=defer", "PEAL_MAX_ADDRESS_ROUNDS=1",
		"PEAL_CONTINUE_WITH_REMAINING_TASKS=true", "PEAL_MAX_CONSECUTIVE_TASK_FAILURES=1", "PEAL_STET_DISABLE_LLM_TRIAGE=true")
	out, err := h.run(env...)
	if err != nil {
		t.Fatal(err)
	}
	if out.ExitCode != ExitWithIssues || !slices.Equal(out.Deferred, []int{1}) || !slices.Equal(out.Completed, []int{2, 3}) || len(out.Failed) != 0 {
		t.Fatalf("outcome %+v", out)
	}
	st := h.state()
	if !slices.Equal(st.CompletedTaskIndices, []int{2, 3}) || !slices.Equal(st.DeferredTaskIndices, []int{1}) {
		t.Fatalf("state %+v", st)
	}
	if sum, _ := h.summary(); !slices.Equal(sum.TasksDeferred, []int{1}) || sum.ExitCode != 2 {
		t.Fatalf("summary %+v", sum)
	}
	// Task 1's work is kept on a branch, not on the user's.
	if kept := keptBranches(t, h); len(kept) != 1 || !strings.HasPrefix(kept[0], "peal-kept/task-1-") ||
		!slices.Equal(h.commits(), []string{"root"}) {
		t.Fatalf("kept %q, commits %q", kept, h.commits())
	}
	// The next run tries task 1 again, from the tree tasks 2 and 3 left;
	// this time its work has no finding.
	h.scenario(nil)
	before := len(h.calls())
	out, err = h.run(env...)
	if err != nil || !slices.Equal(out.Completed, []int{1}) || out.ExitCode != ExitOK {
		t.Fatalf("second run: err %v, outcome %+v", err, out)
	}
	if got := fakes.Keys(h.calls()[before:]); strings.Join(got, " ") != "plan:1 execute:1" {
		t.Fatalf("second run calls %q", got)
	}
	if st := h.state(); len(st.DeferredTaskIndices) != 0 || !slices.Equal(st.CompletedTaskIndices, []int{1, 2, 3}) {
		t.Fatalf("state after the second run %+v", st)
	}
}

// TestDefaultsKeepPealBehaviour: with the adaptive keys at their defaults, an
// ordinary failure is retried by phase_retry_count alone, at once, always by
// the primary agent.
func TestDefaultsKeepPealBehaviour(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	h.scenario(map[string][]fakes.Outcome{"plan": {fail, fail, ok}})
	cfg := h.config("PEAL_PHASE_RETRY_COUNT=2")
	if cfg.RetryDelaySec != 0 || cfg.PlateauRounds != 0 || cfg.FallbackAgentCmd != "" || cfg.OnFindingsRemaining != "fail" {
		t.Fatalf("defaults changed: %+v", cfg)
	}
	if _, err := h.runCfg(cfg); err != nil {
		t.Fatal(err)
	}
	c := h.calls()
	if h.keys() != "plan:1 plan:1 plan:1 execute:1" {
		t.Fatalf("calls %q", h.keys())
	}
	for _, call := range c {
		if call.Env["PEAL_AGENT_ROLE"] != "primary" {
			t.Fatalf("%s ran as %q", call.Key, call.Env["PEAL_AGENT_ROLE"])
		}
	}
	// No delay between ordinary retries (a generous bound: the default
	// network delay is 60 s, so any delay at all would show).
	if gap := c[2].Time.Sub(c[0].Time); gap > 20*time.Second {
		t.Fatalf("retries waited %s", gap)
	}
}
