package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"peal/internal/testkit/fakes"
)

// cli puts the fake agent into dir under a CLI's name.
func cli(t *testing.T, dir, name string) string {
	t.Helper()
	dir = filepath.Join(dir, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.Symlink(bins["fakeagent"], p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDoctor(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nA\n")
	agentBin, codexBin := cli(t, s.dir, "agent"), cli(t, s.dir, "codex")
	// broken is an executable file whose interpreter is missing.
	broken := filepath.Join(s.dir, "bin", "broken")
	if err := os.WriteFile(broken, []byte("#!/nonexistent/interpreter\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	noKey := func(env []string) []string {
		return slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "CURSOR_API_KEY=") })
	}
	cases := []struct {
		name  string
		env   []string
		code  int
		lines []string
		not   string // what no line may say
	}{
		{"ready", s.env("PEAL_AGENT_CMD="+agentBin, "PEAL_STET_PATH="+bins["fakestet"]), 0, []string{
			"ok    agent (cursor) binary: " + agentBin,
			"ok    agent (cursor) version: fake cursor 1.0.0",
			"ok    agent (cursor) login: CURSOR_API_KEY is set",
			"ok    stet: " + bins["fakestet"],
		}, ""},
		{"no key and no session", noKey(s.env("PEAL_AGENT_CMD=" + agentBin)), 1, []string{
			"FAIL  agent (cursor) login: no credential variable set (CURSOR_API_KEY) and `agent status` says: Not logged in\n        in CI set CURSOR_API_KEY",
		}, ""},
		{"a stand-in that cannot say", noKey(s.env("PEAL_AGENT_CMD=echo")), 0, []string{
			"warn  agent (cursor) login: `agent status` exited 0 without saying whether there is a session: status",
		}, ""},
		{"a session", noKey(s.env("PEAL_AGENT_CMD="+agentBin, fakes.SessionEnv+"=1")), 0, []string{
			"ok    agent (cursor) login: `agent status` reports a session: ✓ Logged in as fake@example.com",
		}, ""},
		{"missing binary and a fallback of another kind", s.env("PEAL_AGENT_CMD=/nonexistent/agent", "PEAL_FALLBACK_AGENT_KIND=codex",
			"PEAL_FALLBACK_AGENT_CMD="+codexBin, "OPENAI_API_KEY=sk-test"), 1, []string{
			`FAIL  agent (cursor) binary: "/nonexistent/agent" not an executable file`,
			"ok    fallback agent (codex) version: fake codex 1.0.0",
			"ok    fallback agent (codex) login: OPENAI_API_KEY is set",
		}, ""},
		// A CLI that cannot start: the login line says so, with no hint
		// about credentials, which are not the cause.
		{"a CLI that cannot start", noKey(s.env("PEAL_AGENT_CMD=" + broken)), 1, []string{
			"FAIL  agent (cursor) login: `agent status` could not run: cannot start " + broken + ": ",
		}, "in CI set"},
		{"stet_path not executable", s.env("PEAL_AGENT_CMD="+agentBin, "PEAL_STET_PATH="+s.plan), 1, []string{
			"FAIL  stet: stet_path " + s.plan + " is not an executable file",
		}, ""},
		// A confinement that would write the repository's .git is a
		// failure, never a policy that says it is written and never written.
		{"confine_write_paths holds .git", s.env("PEAL_AGENT_CMD="+agentBin, "PEAL_CONFINE=auto", "PEAL_CONFINE_WRITE_PATHS="+s.repo), 1, []string{
			`FAIL  confinement: confine_write_paths "` + s.repo + `" (set by PEAL_CONFINE_WRITE_PATHS) is or holds the repository's .git (` + filepath.Join(s.repo, ".git") + `)`,
		}, ""},
	}
	for _, tc := range cases {
		r := s.peal(tc.env, "doctor")
		for _, line := range tc.lines {
			if !strings.Contains(r.stdout, line) {
				t.Errorf("%s: stdout lacks %q:\n%s", tc.name, line, r.stdout)
			}
		}
		if tc.not != "" && strings.Contains(r.stdout, tc.not) {
			t.Errorf("%s: stdout says %q:\n%s", tc.name, tc.not, r.stdout)
		}
		if strings.Contains(r.stdout, "(the repository's .git)") && strings.Contains(r.stdout, "write: "+s.repo+" (confine_write_paths)") {
			t.Errorf("%s: a policy that writes what it never writes:\n%s", tc.name, r.stdout)
		}
		if r.code != tc.code || (tc.code != 0 && !strings.Contains(r.stderr, "check(s) failed")) {
			t.Errorf("%s: exit %d (want %d), stderr %q", tc.name, r.code, tc.code, r.stderr)
		}
	}
	if calls, _ := fakes.ReadCalls(s.agentDir); len(calls) != 0 {
		t.Fatalf("doctor made agent calls: %v", fakes.Keys(calls))
	}
}

// TestDoctorPathForms: doctor takes every form of the paths a run takes,
// relative ones included, confined or not: the agent's probes run, and
// every line holds.
func TestDoctorPathForms(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nA\n")
	agentBin := cli(t, s.dir, "agent")
	for _, tc := range []struct {
		name string
		dir  string // where doctor starts: the sandbox or the repository
		env  []string
		args []string
	}{
		{"as the README writes it", "repo", nil, nil},
		{"--repo .", "repo", nil, []string{"--repo", "."}},
		{"--repo repo --state-dir .peal", "", nil, []string{"--repo", "repo", "--state-dir", ".peal"}},
		{"variables", "", []string{"PEAL_REPO_PATH=repo", "PEAL_STATE_DIR=state"}, nil},
	} {
		env := slices.DeleteFunc(s.env("PEAL_AGENT_CMD="+agentBin), func(kv string) bool {
			return strings.HasPrefix(kv, "PEAL_REPO_PATH=") || strings.HasPrefix(kv, "PEAL_STATE_DIR=") || strings.HasPrefix(kv, "PEAL_PLAN_PATH=")
		})
		cmd := exec.Command(bins["peal"], append([]string{"doctor"}, tc.args...)...)
		cmd.Dir, cmd.Env = filepath.Join(s.dir, tc.dir), append(env, tc.env...)
		out, err := cmd.Output()
		if err != nil {
			t.Errorf("%s: %v\n%s", tc.name, err, out)
			continue
		}
		for _, want := range []string{"ok    agent (cursor) version: fake cursor 1.0.0\n", "ok    agent (cursor) login: CURSOR_API_KEY is set\n"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("%s: stdout lacks %q:\n%s", tc.name, want, out)
			}
		}
	}
}

// TestRunStopsWithoutCursorKey: a run whose Cursor CLI cannot authenticate
// stops before any call, with one line saying how to authenticate in CI.
func TestRunStopsWithoutCursorKey(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nA\n")
	env := slices.DeleteFunc(s.env("PEAL_AGENT_CMD="+cli(t, s.dir, "agent")), func(kv string) bool { return strings.HasPrefix(kv, "CURSOR_API_KEY=") })
	r := s.peal(env, "run")
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	last := lines[len(lines)-1]
	if r.code != 1 || !strings.HasPrefix(last, "peal: error: the cursor CLI cannot authenticate") || !strings.Contains(last, "in CI set CURSOR_API_KEY") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if calls, _ := fakes.ReadCalls(s.agentDir); len(calls) != 0 {
		t.Fatalf("calls were made: %v", fakes.Keys(calls))
	}
}

// TestCostLimitExit3: max_cost_usd stops the run with exit 3 and one line.
func TestCostLimitExit3(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nA\n## Task 2\nB\n")
	s.scenario(map[string][]fakes.Outcome{"plan": {{CostUSD: 0.5}}, "execute": {{CostUSD: 0.5}}})
	r := s.peal(s.env("PEAL_AGENT_CMD="+cli(t, s.dir, "claude"), "PEAL_AGENT_KIND=claude", "ANTHROPIC_API_KEY=sk-test", "IS_SANDBOX=1",
		"PEAL_STRUCTURED_OUTPUT=true", "PEAL_MAX_COST_USD=1"), "run")
	if r.code != 3 || !strings.Contains(r.stderr, "reaches max_cost_usd ($1.0000)") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	data, err := os.ReadFile(filepath.Join(s.stateDir, "state.json"))
	if err != nil || !strings.Contains(string(data), `"completed_task_indices": [
    1
  ]`) && !strings.Contains(string(data), `"completed_task_indices":[1]`) {
		t.Fatalf("state %s, %v", data, err)
	}
}

// TestStatusShowsUsage: tokens and cost of the last run, per task and in all.
func TestStatusShowsUsage(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nA\n## Task 2\nB\n")
	s.scenario(map[string][]fakes.Outcome{"plan": {{InputTokens: 10, OutputTokens: 2, CostUSD: 0.5}}, "execute": {{InputTokens: 5, OutputTokens: 1, CostUSD: 0.25}}})
	env := s.env("PEAL_AGENT_CMD="+cli(t, s.dir, "claude"), "PEAL_AGENT_KIND=claude", "ANTHROPIC_API_KEY=sk-test", "PEAL_STRUCTURED_OUTPUT=true")
	if r := s.peal(env, "run"); r.code != 0 {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	r := s.peal(env, "status")
	for _, want := range []string{"last run tokens in/out", "15/3", "$0.7500", "last run usage: 30 input tokens, 6 output tokens, $1.5000"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, r.stdout)
		}
	}
}
