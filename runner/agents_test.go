package runner

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"peal/agent"
	"peal/agentcall"
	"peal/config"
	"peal/internal/testkit/fakes"
	"peal/internal/text"
	"peal/phase"
	"peal/report"
)

// withSleep records the waits between attempts instead of sleeping.
func withSleep(s *fakes.Sleeps) Option {
	return func(st *settings) { st.sleep = s.Sleep }
}

// withLinger sets how long an agent may live on after its final result.
func withLinger(d time.Duration) Option {
	return func(s *settings) { s.linger = d }
}

// kindHarness is a harness whose agent is the fake under the usual binary
// name of kind, with the credentials that CLI wants.
func kindHarness(t *testing.T, kind, plan string) (*harness, []string) {
	t.Helper()
	h := newHarness(t, plan)
	k, err := agent.Lookup(kind)
	if err != nil {
		t.Fatal(err)
	}
	h.env = append(h.env, "OPENAI_API_KEY=sk-test", "IS_SANDBOX=1")
	return h, []string{"PEAL_AGENT_KIND=" + kind, "PEAL_AGENT_CMD=" + h.cli(k.DefaultCmd)}
}

// without drops the variables named from env.
func without(env []string, names ...string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(names, k)
	})
}

// TestEveryKindEndToEnd: a plan/execute task through each CLI's stand-in:
// the argv each kind builds for the run's calls (pinned word for word by
// the agent package's TestArgvAndStdin), which the stand-in accepts, the
// prompt on stdin (or last, for a CLI that only takes it as an argument),
// and an execute call that may edit the repository.
func TestEveryKindEndToEnd(t *testing.T) {
	t.Parallel()
	for _, kind := range agent.Names() {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			k, _ := agent.Lookup(kind)
			h, env := kindHarness(t, kind, "## Task 1\nDo A\n")
			// Written where the call works; it comes to the work tree.
			out := filepath.Join(h.repo, "out.txt")
			h.scenario(map[string][]fakes.Outcome{"plan": {{Stdout: "THE PLAN"}}, "execute": {{Edits: map[string]string{"out.txt": "written"}}}})
			if _, err := h.run(env...); err != nil {
				t.Fatal(err)
			}
			c := h.calls()
			if len(c) != 2 || c[0].Kind != kind {
				t.Fatalf("calls %v, kind %q", fakes.Keys(c), c[0].Kind)
			}
			// The calls a run makes: the repository, the default options.
			argv := func(phaseName phase.Name) []string {
				inv, err := k.Invocation("", agent.Call{Phase: phaseName, Repo: h.workDir(), Prompt: "P",
					Options: agent.Options{Sandbox: "disabled", Trust: true, Force: true}})
				if err != nil {
					t.Fatal(err)
				}
				if inv.PromptInArgv() {
					return inv.Argv[1 : len(inv.Argv)-1]
				}
				return inv.Argv[1:]
			}
			plan, exe := c[0].Argv, c[1].Argv
			if !k.PromptOnStdin {
				plan, exe = plan[:len(plan)-1], exe[:len(exe)-1]
			}
			if !slices.Equal(plan, argv("plan")) || !slices.Equal(exe, argv("execute")) {
				t.Fatalf("argv\n%q\n%q", plan, exe)
			}
			prompt := c[1].Argv[len(c[1].Argv)-1]
			if k.PromptOnStdin {
				prompt = c[1].Stdin
				if c[0].StdinNull || c[1].StdinNull || strings.Contains(strings.Join(c[1].Argv, " "), "THE PLAN") {
					t.Fatalf("the prompt goes on stdin only: %q", c[1].Argv)
				}
			} else if !c[0].StdinNull {
				t.Fatal("stdin is /dev/null when the prompt is an argument")
			}
			if !strings.Contains(prompt, "---PLAN---\nTHE PLAN\n---PLAN---") {
				t.Fatalf("execute prompt %q", prompt)
			}
			if data, err := os.ReadFile(out); err != nil || string(data) != "written" || len(c[1].Denied) > 0 {
				t.Fatalf("the execute call could not edit: %v %q", err, c[1].Denied)
			}
		})
	}
}

// TestFailureClassesThroughRuns: the CLIs' own failure messages, from the
// fake, end the run as their class says, with exact attempt counts.
func TestFailureClassesThroughRuns(t *testing.T) {
	t.Parallel()
	retries := []string{"PEAL_PHASE_RETRY_COUNT=2", "PEAL_NETWORK_RETRY_COUNT=1", "PEAL_NETWORK_RETRY_DELAY_SEC=0", "PEAL_NETWORK_STALL_SEC=1"}
	fatal := func(err error) bool { var f *phase.FatalError; return errors.As(err, &f) }
	unreachable := func(err error) bool { var u *phase.UnreachableError; return errors.As(err, &u) }
	cases := []struct {
		kind, failure string
		calls         int
		check         func(error) bool
		quote         string
	}{
		{"claude", fakes.FailNoCredentials, 1, fatal, "Not logged in · Please run /login"},
		{"claude", fakes.FailInvalidKey, 1, fatal, "Invalid API key · Fix external API key"},
		{"claude", fakes.FailRoot, 1, fatal, "root/sudo privileges"},
		{"claude", fakes.FailConnectionRefused, 2, unreachable, "Unable to connect to API (ConnectionRefused)"},
		{"codex", fakes.FailInvalidKey, 1, fatal, "401 Unauthorized: Incorrect API key provided"},
		// codex never exits on an outage: the stall watch ends each attempt.
		{"codex", fakes.FailConnectionRefused, 2, unreachable, "nothing but network errors"},
		{"gemini", fakes.FailNoCredentials, 1, fatal, "Please set an Auth method"},
		{"gemini", fakes.FailConnectionRefused, 2, unreachable, "fetch failed sending request"},
		{"opencode", fakes.FailInvalidKey, 1, fatal, "Error: invalid x-api-key"},
		{"opencode", fakes.FailConnectionRefused, 2, unreachable, "Error: Cannot connect to API"},
		{"cursor", fakes.FailInvalidKey, 1, fatal, "exited 0 but did nothing: Invalid Cursor API key"},
		{"cursor", fakes.FailConnectionRefused, 2, unreachable, "ECONNREFUSED"},
		// 401 and 403 of the model API, in each CLI's words.
		{"claude", fakes.FailUnauthorized, 1, fatal, "Invalid API key · Fix external API key"},
		{"claude", fakes.FailForbidden, 1, fatal, "Failed to authenticate. API Error: 403 Your API key does not have permission"},
		{"codex", fakes.FailUnauthorized, 1, fatal, "unexpected status 401 Unauthorized: invalid x-api-key"},
		{"codex", fakes.FailForbidden, 1, fatal, "unexpected status 403 Forbidden"},
		{"gemini", fakes.FailUnauthorized, 1, fatal, `_ApiError: {"error":{"code":401,"message":"invalid x-api-key","status":"UNAUTHENTICATED"}}`},
		{"gemini", fakes.FailForbidden, 1, fatal, `"status":"PERMISSION_DENIED"`},
		{"gemini", fakes.FailInvalidKey, 1, fatal, "API key not valid. Please pass a valid API key."},
		{"opencode", fakes.FailUnauthorized, 1, fatal, "Error: Incorrect API key provided"},
		{"opencode", fakes.FailForbidden, 1, fatal, "Error: Forbidden:"},
	}
	for _, tc := range cases {
		t.Run(tc.kind+" "+tc.failure, func(t *testing.T) {
			t.Parallel()
			h, env := kindHarness(t, tc.kind, "## Task 1\nA\n")
			h.scenario(map[string][]fakes.Outcome{"plan": {{Failure: tc.failure}}})
			_, err := h.run(append(env, retries...)...)
			if got := len(h.calls()); got != tc.calls || !tc.check(err) || !strings.Contains(err.Error(), tc.quote) {
				t.Fatalf("%d calls (want %d), err %v", got, tc.calls, err)
			}
			if strings.Contains(err.Error(), "\x1b") || strings.Contains(err.Error(), "[object Object]") {
				t.Fatalf("message not cleaned: %q", err)
			}
		})
	}
}

// TestUsageErrorIsFatal: a binary of another kind than agent_kind rejects
// the argv; no retry helps.
func TestUsageErrorIsFatal(t *testing.T) {
	t.Parallel()
	h, env := kindHarness(t, "codex", "## Task 1\nA\n")
	_, err := h.run(append(env, "PEAL_AGENT_KIND=cursor", "PEAL_PHASE_RETRY_COUNT=3")...)
	var f *phase.FatalError
	if !errors.As(err, &f) || !strings.Contains(err.Error(), "unexpected argument '--print' found") || len(h.calls()) != 1 {
		t.Fatalf("%d calls, err %v", len(h.calls()), err)
	}
}

func TestRateLimitWaitsWithoutSpendingRetries(t *testing.T) {
	t.Parallel()
	t.Run("announced reset", func(t *testing.T) {
		t.Parallel()
		h, env := kindHarness(t, "cursor", "## Task 1\nA\n")
		h.scenario(map[string][]fakes.Outcome{"plan": {{Failure: fakes.FailRateLimit}, {Failure: fakes.FailRateLimit}, ok}})
		var w fakes.Sleeps
		if _, err := h.runCfg(h.config(env...), withSleep(&w)); err != nil {
			t.Fatal(err)
		}
		if h.keys() != "plan:1 plan:1 plan:1 execute:1" || !slices.Equal(w.Waits(), []time.Duration{2 * time.Minute, 2 * time.Minute}) {
			t.Fatalf("calls %q, waits %v", h.keys(), w.Waits())
		}
		if !strings.Contains(h.log.String(), "waiting 120 s before the next attempt (rate limited, not counted)") {
			t.Fatal("the log does not say how long it waits")
		}
	})
	t.Run("backoff", func(t *testing.T) {
		t.Parallel()
		h, env := kindHarness(t, "claude", "## Task 1\nA\n")
		h.scenario(map[string][]fakes.Outcome{"plan": {{Failure: fakes.FailRateLimit}, {Failure: fakes.FailOverloaded}, ok}})
		var w fakes.Sleeps
		if _, err := h.runCfg(h.config(env...), withSleep(&w)); err != nil {
			t.Fatal(err)
		}
		// 30 s, then 60 s, each ±10%.
		waits := w.Waits()
		if h.keys() != "plan:1 plan:1 plan:1 execute:1" || len(waits) != 2 ||
			waits[0] < 27*time.Second || waits[0] > 33*time.Second || waits[1] < 54*time.Second || waits[1] > 66*time.Second {
			t.Fatalf("calls %q, waits %v", h.keys(), waits)
		}
	})
	t.Run("beyond the cap", func(t *testing.T) {
		t.Parallel()
		h, env := kindHarness(t, "cursor", "## Task 1\nA\n## Task 2\nB\n")
		h.scenario(map[string][]fakes.Outcome{"plan": {{Failure: fakes.FailRateLimit}}})
		var w fakes.Sleeps
		_, err := h.runCfg(h.config(append(env, "PEAL_RATE_LIMIT_MAX_WAIT_SEC=60", "PEAL_CONTINUE_WITH_REMAINING_TASKS=true")...), withSleep(&w))
		var rl *phase.RateLimitError
		if !errors.As(err, &rl) || h.keys() != "plan:1" || len(w.Waits()) != 0 || !strings.Contains(err.Error(), "rate_limit_max_wait_sec (60 s)") {
			t.Fatalf("calls %q, waits %v, err %v", h.keys(), w.Waits(), err)
		}
	})
}

func TestCursorConfigRaceRetriedAtOnce(t *testing.T) {
	t.Parallel()
	h, env := kindHarness(t, "cursor", "## Task 1\nA\n")
	h.scenario(map[string][]fakes.Outcome{"plan": {{Failure: fakes.FailConfigRace}, {Failure: fakes.FailConfigRace}, ok}})
	var w fakes.Sleeps
	if _, err := h.runCfg(h.config(append(env, "PEAL_RETRY_DELAY_SEC=600")...), withSleep(&w)); err != nil {
		t.Fatal(err)
	}
	if h.keys() != "plan:1 plan:1 plan:1 execute:1" || !slices.Equal(w.Waits(), []time.Duration{0, 0}) {
		t.Fatalf("calls %q, waits %v", h.keys(), w.Waits())
	}
}

// TestOpencodeStoreRaceRetriedAtOnce: opencode's first starts racing to
// create its database are retried at once, without spending the retry
// count (0 here), as the Cursor CLI's configuration race is.
func TestOpencodeStoreRaceRetriedAtOnce(t *testing.T) {
	t.Parallel()
	h, env := kindHarness(t, "opencode", "## Task 1\nA\n")
	h.scenario(map[string][]fakes.Outcome{"execute": {{Failure: fakes.FailStoreRace}, ok}})
	var w fakes.Sleeps
	if _, err := h.runCfg(h.config(append(env, "PEAL_RETRY_DELAY_SEC=600")...), withSleep(&w)); err != nil {
		t.Fatal(err)
	}
	if h.keys() != "plan:1 execute:1 execute:1" || !slices.Equal(w.Waits(), []time.Duration{0}) {
		t.Fatalf("calls %q, waits %v", h.keys(), w.Waits())
	}
}

// TestCursorLaunchesStaggered: parallel Cursor calls start a launch gap
// apart while the earlier one runs, so they do not race on the CLI's files.
func TestCursorLaunchesStaggered(t *testing.T) {
	t.Parallel()
	h, env := kindHarness(t, "cursor", "## Task 1 (parallel)\nA\n## Task 2 (parallel)\nB\n")
	h.launchGap = true
	h.scenario(map[string][]fakes.Outcome{"plan": {{SleepMS: 1500}}})
	if _, err := h.run(append(env, "PEAL_PARALLEL=true", "PEAL_MAX_PARALLEL=2")...); err != nil {
		t.Fatal(err)
	}
	var starts []time.Time
	for _, c := range h.calls() {
		if c.Phase == "plan" {
			starts = append(starts, c.Time)
		}
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	// The Cursor CLI's launches are a second apart. Unstaggered, both start
	// within milliseconds; the bound leaves room for the time each process
	// takes to start and record itself.
	if k, _ := agent.Lookup("cursor"); len(starts) != 2 || k.LaunchGap != time.Second || starts[1].Sub(starts[0]) < time.Second/2 {
		t.Fatalf("plan calls started at %v", starts)
	}
}

// TestCursorInCI is the Cursor CLI as it behaves in a fresh CI checkout:
// untrusted folder, commands that need approval, no stored login.
func TestCursorInCI(t *testing.T) {
	t.Parallel()
	t.Run("untrusted folder refuses with exit 0", func(t *testing.T) {
		t.Parallel()
		h, env := kindHarness(t, "cursor", "## Task 1\nA\n")
		_, err := h.run(append(env, "PEAL_CURSOR_TRUST=false", "PEAL_CURSOR_FORCE=false", "PEAL_PHASE_RETRY_COUNT=2")...)
		// Seen as it is printed, or at the exit 0 that follows: fatal.
		var f *phase.FatalError
		if !errors.As(err, &f) || h.keys() != "plan:1" || !strings.Contains(err.Error(), "⚠ Workspace Trust Required") {
			t.Fatalf("calls %q, err %v", h.keys(), err)
		}
	})
	t.Run("commands denied without --force", func(t *testing.T) {
		t.Parallel()
		for _, force := range []bool{true, false} {
			h, env := kindHarness(t, "cursor", "## Task 1\nA\n")
			built := filepath.Join(h.repo, "built") // made where the call works, it comes to the work tree
			h.scenario(map[string][]fakes.Outcome{"execute": {{Commands: [][]string{{"touch", "built"}}}}})
			if _, err := h.run(append(env, "PEAL_CURSOR_FORCE="+map[bool]string{true: "true", false: "false"}[force])...); err != nil {
				t.Fatal(err)
			}
			_, statErr := os.Stat(built)
			all, _ := fakes.ReadCalls(h.agentDir)
			denied := fakes.Ends(all)[1].Denied
			if force != (statErr == nil) || force != (len(denied) == 0) {
				t.Fatalf("force %v: built %v, denied %q", force, statErr, denied)
			}
		}
	})
	t.Run("login prompt ends the call", func(t *testing.T) {
		t.Parallel()
		h, env := kindHarness(t, "cursor", "## Task 1\nA\n")
		// `agent status` reports a session, but print mode wants the key.
		h.env = append(without(h.env, "CURSOR_API_KEY"), fakes.SessionEnv+"=1")
		_, err := h.run(append(env, "PEAL_PHASE_TIMEOUT_SEC=600", "PEAL_PHASE_RETRY_COUNT=2")...)
		var f *phase.FatalError
		if !errors.As(err, &f) || h.keys() != "plan:1" || !strings.Contains(err.Error(), "waits for a person: Waiting for browser authentication") {
			t.Fatalf("calls %q, err %v", h.keys(), err)
		}
	})
	t.Run("no credentials stop the run before any call", func(t *testing.T) {
		t.Parallel()
		h, env := kindHarness(t, "cursor", "## Task 1\nA\n")
		h.env = without(h.env, "CURSOR_API_KEY")
		_, err := h.run(env...)
		var ae *agent.AuthError
		if !errors.As(err, &ae) || len(h.calls()) != 0 || !strings.Contains(err.Error(), "in CI set CURSOR_API_KEY") ||
			!strings.Contains(err.Error(), "says: Not logged in") {
			t.Fatalf("calls %q, err %v", h.keys(), err)
		}
		// Nothing was recorded or started for the agent: no ticket attempt.
		if _, err := os.Stat(filepath.Join(h.knowledge(), "tickets", h.ticket(1))); !os.IsNotExist(err) {
			t.Fatalf("a ticket attempt was recorded: %v", err)
		}
	})
	t.Run("a session is enough for the check", func(t *testing.T) {
		t.Parallel()
		h, env := kindHarness(t, "codex", "## Task 1\nA\n")
		h.env = append(without(h.env, "OPENAI_API_KEY"), fakes.SessionEnv+"=1")
		if _, err := h.run(env...); err != nil || h.keys() != "plan:1 execute:1" {
			t.Fatalf("calls %q, err %v", h.keys(), err)
		}
		h2, env2 := kindHarness(t, "codex", "## Task 1\nA\n")
		h2.env = without(h2.env, "OPENAI_API_KEY")
		_, err := h2.run(env2...)
		var ae *agent.AuthError
		if !errors.As(err, &ae) || len(h2.calls()) != 0 || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
			t.Fatalf("codex without credentials: %q, %v", h2.keys(), err)
		}
	})
}

func TestPromptTooLongIsAnErrorBeforeTheCall(t *testing.T) {
	t.Parallel()
	h, env := kindHarness(t, "cursor", "## Task 1\nA\n")
	h.scenario(map[string][]fakes.Outcome{"plan": {{Stdout: strings.Repeat("step\n", 30<<10)}}})
	_, err := h.run(env...)
	var pe *agent.PromptTooLongError
	if !errors.As(err, &pe) || h.keys() != "plan:1" || !strings.Contains(err.Error(), "execute prompt is") {
		t.Fatalf("calls %q, err %v", h.keys(), err)
	}
	h2, env2 := kindHarness(t, "claude", "## Task 1\nA\n")
	h2.scenario(map[string][]fakes.Outcome{"plan": {{Stdout: strings.Repeat("step\n", 30<<10)}}})
	if _, err := h2.run(env2...); err != nil || h2.keys() != "plan:1 execute:1" {
		t.Fatalf("on stdin a long prompt is fine: calls %q, err %v", h2.keys(), err)
	}
	if got := len(h2.calls()[1].Stdin); got < 150<<10 {
		t.Fatalf("the execute call read %d bytes of its prompt on stdin\n%s", got, h2.log)
	}
}

func TestStructuredOutput(t *testing.T) {
	t.Parallel()
	structured := "PEAL_STRUCTURED_OUTPUT=true"
	t.Run("the result is the plan text", func(t *testing.T) {
		t.Parallel()
		for _, kind := range agent.Names() {
			h, env := kindHarness(t, kind, "## Task 1\nA\n")
			h.scenario(map[string][]fakes.Outcome{"plan": {{Stdout: "THE PLAN"}}})
			if _, err := h.run(append(env, structured)...); err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
			c := h.calls()
			prompt := c[1].Stdin
			if k, _ := agent.Lookup(kind); !k.PromptOnStdin {
				prompt = c[1].Argv[len(c[1].Argv)-1]
			}
			if !strings.Contains(prompt, "---PLAN---\nTHE PLAN\n---PLAN---") {
				t.Fatalf("%s: execute prompt %q", kind, prompt)
			}
		}
	})
	t.Run("a final result ends a lingering call", func(t *testing.T) {
		t.Parallel()
		h, env := kindHarness(t, "cursor", "## Task 1\nA\n")
		h.scenario(map[string][]fakes.Outcome{"plan": {{Stdout: "THE PLAN", Linger: true}}})
		if _, err := h.runCfg(h.config(append(env, structured, "PEAL_PHASE_TIMEOUT_SEC=600")...), withLinger(0)); err != nil {
			t.Fatal(err)
		}
		if h.keys() != "plan:1 execute:1" || !strings.Contains(h.calls()[1].Argv[len(h.calls()[1].Argv)-1], "THE PLAN") {
			t.Fatalf("calls %q", h.keys())
		}
	})
	t.Run("error events classify the failure", func(t *testing.T) {
		t.Parallel()
		h, env := kindHarness(t, "claude", "## Task 1\nA\n")
		h.scenario(map[string][]fakes.Outcome{"plan": {{EventError: "Invalid API key · Fix external API key"}}})
		_, err := h.run(append(env, structured, "PEAL_PHASE_RETRY_COUNT=2")...)
		var f *phase.FatalError
		if !errors.As(err, &f) || h.keys() != "plan:1" || !strings.Contains(err.Error(), "plan call reported an error: Invalid API key") {
			t.Fatalf("calls %q, err %v", h.keys(), err)
		}
		h2, env2 := kindHarness(t, "gemini", "## Task 1\nA\n")
		h2.scenario(map[string][]fakes.Outcome{"plan": {{EventError: "model answered nonsense"}, ok}})
		if _, err := h2.run(append(env2, structured, "PEAL_PHASE_RETRY_COUNT=1")...); err != nil || h2.keys() != "plan:1 plan:1 execute:1" {
			t.Fatalf("an ordinary reported error is retried: %q, %v", h2.keys(), err)
		}
	})
	t.Run("tokens and cost are summed", func(t *testing.T) {
		t.Parallel()
		h, env := kindHarness(t, "claude", "## Task 1\nA\n## Task 2\nB\n")
		h.scenario(map[string][]fakes.Outcome{
			"plan":    {{InputTokens: 100, OutputTokens: 10, CostUSD: 0.5}},
			"execute": {{InputTokens: 1000, OutputTokens: 200, CostUSD: 0.25}},
		})
		if _, err := h.run(append(env, structured)...); err != nil {
			t.Fatal(err)
		}
		sum, found := h.summary()
		if !found || sum.Usage == nil || sum.Usage.CostUSD != 1.5 || sum.Usage.InputTokens != 2200 || sum.Usage.OutputTokens != 420 ||
			sum.Usage.Tasks[2].CostUSD != 0.75 || sum.Usage.Tasks[1].InputTokens != 1100 {
			t.Fatalf("summary usage %+v", sum.Usage)
		}
		report, _, err := report.Status(h.config(env...))
		if err != nil || report.Tasks[0].Usage == nil || report.Tasks[0].Usage.CostUSD != 0.75 {
			t.Fatalf("status %+v, %v", report.Tasks, err)
		}
	})
	t.Run("max_cost_usd stops the run after the call that reached it", func(t *testing.T) {
		t.Parallel()
		h, env := kindHarness(t, "claude", threeTasks)
		h.scenario(map[string][]fakes.Outcome{"plan": {{CostUSD: 0.25}}, "execute": {{CostUSD: 0.25}}})
		_, err := h.run(append(env, structured, "PEAL_MAX_COST_USD=0.6", "PEAL_CONTINUE_WITH_REMAINING_TASKS=true")...)
		var cl *agentcall.CostLimitError
		if !errors.As(err, &cl) || h.keys() != "plan:1 execute:1 plan:2" || !slices.Equal(h.state().CompletedTaskIndices, []int{1}) ||
			!strings.Contains(err.Error(), "cost $0.7500, which reaches max_cost_usd ($0.6000)") {
			t.Fatalf("calls %q, err %v", h.keys(), err)
		}
	})
}

// TestDryRunShowsEachKindsArgv: the dry run prints the argv a run would
// use, with the prompt on stdin for the kinds that read it there.
func TestDryRunShowsEachKindsArgv(t *testing.T) {
	t.Parallel()
	for kind, want := range map[string]string{
		"claude": "-p --permission-mode plan < <prompt len=",
		"codex":  "exec -C %s --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox - < <prompt: the plan text>",
		"cursor": "--print --workspace %s --sandbox disabled --trust --force <prompt: the plan text>",
	} {
		h, env := kindHarness(t, kind, "## Task 1\nA\n")
		var out strings.Builder
		if err := DryRun(h.config(env...), slog.New(slog.DiscardHandler), &out); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(want, "%s") {
			want = strings.ReplaceAll(want, "%s", h.workDir())
		}
		if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "("+kind+")") {
			t.Errorf("%s: dry run lacks %q:\n%s", kind, want, out.String())
		}
		if len(h.calls()) != 0 {
			t.Errorf("%s: the dry run called the agent", kind)
		}
	}
}

// TestFallbackOfAnotherKind: even attempts use the fallback kind's binary,
// argv and prompt delivery, and are judged by its messages.
func TestFallbackOfAnotherKind(t *testing.T) {
	t.Parallel()
	h, env := kindHarness(t, "cursor", "## Task 1\nA\n")
	h.scenario(map[string][]fakes.Outcome{"plan": {fail, {Stdout: "THE PLAN"}}})
	if _, err := h.run(append(env, "PEAL_FALLBACK_AGENT_KIND=claude", "PEAL_FALLBACK_AGENT_CMD="+h.cli("claude"), "PEAL_PHASE_RETRY_COUNT=1")...); err != nil {
		t.Fatal(err)
	}
	c := h.calls()
	if len(c) != 3 || c[0].Kind != "cursor" || c[1].Kind != "claude" || c[1].Env["PEAL_AGENT_ROLE"] != "fallback" || c[2].Kind != "cursor" {
		t.Fatalf("calls %v", c)
	}
	if !slices.Equal(c[1].Argv, []string{"-p", "--permission-mode", "plan"}) || !strings.Contains(c[1].Stdin, "---TASK---") || !c[0].StdinNull {
		t.Fatalf("fallback argv %q, stdin %q", c[1].Argv, c[1].Stdin)
	}
	// Set alone, fallback_agent_kind uses that kind's usual binary.
	cfg, err := config.Load(config.Inputs{Env: []string{"PEAL_FALLBACK_AGENT_KIND=claude", "PEAL_AGENT_KIND=codex"}})
	if err != nil || cfg.FallbackAgentCmd != "claude" || cfg.AgentCmd != "codex" {
		t.Fatalf("fallback_agent_cmd %q, agent_cmd %q, %v", cfg.FallbackAgentCmd, cfg.AgentCmd, err)
	}
}

// A plan text holding a NUL byte still reaches the execute call of a CLI
// that takes its prompt as an argument (an argument cannot hold a NUL: the
// exec would fail with "invalid argument").
func TestNULInPlanText(t *testing.T) {
	t.Parallel()
	h, env := kindHarness(t, "cursor", "## Task 1\nA\n")
	h.scenario(map[string][]fakes.Outcome{"plan": {{Stdout: "step one\x00 step two\n"}}})
	if _, err := h.run(env...); err != nil || h.keys() != "plan:1 execute:1" {
		t.Fatalf("calls %q, err %v", h.keys(), err)
	}
	argv := h.calls()[1].Argv
	if prompt := argv[len(argv)-1]; !strings.Contains(prompt, "step one\uFFFD step two") {
		t.Fatalf("execute prompt %q", prompt)
	}
}

// TestModelNotFound: an agent's API that does not know the model fails the
// call at once, whatever the retry count, with one line naming the model,
// the setting that chose it and the CLI's own words; the run stops there.
// Every kind whose fake has the CLI's words is run.
func TestModelNotFound(t *testing.T) {
	t.Parallel()
	for _, kind := range agent.Names() {
		f, ok := fakes.CLIs[kind].Failures[fakes.FailModelNotFound]
		if !ok {
			continue
		}
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			h, env := kindHarness(t, kind, "## Task 1\nA\n## Task 2\nB\n")
			h.scenario(map[string][]fakes.Outcome{"plan": {{Failure: fakes.FailModelNotFound}}})
			_, err := h.run(append(env, "PEAL_MODEL=nope", "PEAL_PHASE_RETRY_COUNT=2", "PEAL_RETRY_DELAY_SEC=600",
				"PEAL_CONTINUE_WITH_REMAINING_TASKS=true")...)
			var me *agentcall.ModelError
			var fatal *phase.FatalError
			if !errors.As(err, &me) || !errors.As(err, &fatal) || !phase.EndsRun(err) || h.keys() != "plan:1" {
				t.Fatalf("calls %q, err %v", h.keys(), err)
			}
			// The line of the CLI's words that says so is quoted: whole, or
			// from the error the CLI names in it.
			said := ""
			for _, l := range strings.Split(text.Clean(f.TextFor("nope")), "\n") {
				if strings.Contains(l, "nope") && !strings.HasPrefix(l, "warning:") {
					said = strings.Join(strings.Fields(l), " ")
				}
			}
			want := `the model "nope" (set by PEAL_MODEL) is not one the ` + kind + ` CLI's API knows: set model to a model it serves; ` +
				kind + ` says: `
			_, quoted, _ := strings.Cut(err.Error(), want)
			quoted = strings.TrimPrefix(quoted, "…")
			if said == "" || !strings.Contains(quoted, "nope") || !strings.HasSuffix(said, quoted) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err %v\nwant %q and the end of %q", err, want, said)
			}
			if k, _ := agent.Lookup(kind); strings.Contains(err.Error(), k.Failures.FatalHint) {
				t.Fatalf("a missing model gets no login hint: %v", err)
			}
			t.Log(err)
		})
	}
}

// TestModelNotFoundWithFallback: a fallback agent that asks for another
// model still runs, at once, without spending a retry (here none is
// allowed); the missing model is not asked for again in the run. A fallback
// that would ask for the same model is not tried.
func TestModelNotFoundWithFallback(t *testing.T) {
	t.Parallel()
	t.Run("another model", func(t *testing.T) {
		t.Parallel()
		h, env := kindHarness(t, "claude", "## Task 1\nA\n")
		h.scenario(map[string][]fakes.Outcome{"plan": {{Failure: fakes.FailModelNotFound}, {Stdout: "THE PLAN"}}})
		var w fakes.Sleeps
		_, err := h.runCfg(h.config(append(env, "PEAL_MODEL=nope", "PEAL_FALLBACK_AGENT_KIND=codex", "PEAL_FALLBACK_AGENT_CMD="+h.cli("codex"),
			"PEAL_FALLBACK_MODEL=other", "PEAL_PHASE_RETRY_COUNT=0", "PEAL_RETRY_DELAY_SEC=600")...), withSleep(&w))
		if err != nil {
			t.Fatal(err)
		}
		c := h.calls()
		var got []string
		for _, call := range c {
			got = append(got, call.Phase+" "+call.Kind+" "+call.Env["PEAL_AGENT_ROLE"])
		}
		want := []string{"plan claude primary", "plan codex fallback", "execute codex fallback"}
		if !slices.Equal(got, want) || len(w.Waits()) != 0 {
			t.Fatalf("calls %q, want %q; waits %v", got, want, w.Waits())
		}
		if !slices.Contains(c[1].Argv, "other") || !slices.Contains(c[0].Argv, "nope") {
			t.Fatalf("models: %q, %q", c[0].Argv, c[1].Argv)
		}
		if !strings.Contains(h.log.String(), `the model \"nope\" (set by PEAL_MODEL) is not one the claude CLI's API knows`) {
			t.Fatalf("the log does not say why the fallback took over:\n%s", h.log)
		}
	})
	t.Run("the same model", func(t *testing.T) {
		t.Parallel()
		h, env := kindHarness(t, "claude", "## Task 1\nA\n")
		h.scenario(map[string][]fakes.Outcome{"plan": {{Failure: fakes.FailModelNotFound}, {Stdout: "THE PLAN"}}})
		_, err := h.run(append(env, "PEAL_MODEL=nope", "PEAL_FALLBACK_AGENT_CMD="+h.cli("claude"), "PEAL_PHASE_RETRY_COUNT=2")...)
		var me *agentcall.ModelError
		if !errors.As(err, &me) || h.keys() != "plan:1" {
			t.Fatalf("calls %q, err %v", h.keys(), err)
		}
	})
	t.Run("the fallback's model missing too", func(t *testing.T) {
		t.Parallel()
		h, env := kindHarness(t, "claude", "## Task 1\nA\n")
		h.scenario(map[string][]fakes.Outcome{"plan": {{Failure: fakes.FailModelNotFound}}})
		_, err := h.run(append(env, "PEAL_MODEL=nope", "PEAL_FALLBACK_AGENT_CMD="+h.cli("claude"), "PEAL_FALLBACK_MODEL=gone",
			"PEAL_PHASE_RETRY_COUNT=2")...)
		var me *agentcall.ModelError
		if !errors.As(err, &me) || h.keys() != "plan:1 plan:1" ||
			!strings.Contains(err.Error(), `the model "gone" (set by PEAL_FALLBACK_MODEL)`) || !strings.Contains(err.Error(), "set fallback_model to a model it serves") {
			t.Fatalf("calls %q, err %v", h.keys(), err)
		}
	})
}
