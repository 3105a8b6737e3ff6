package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"peal/config"
	"peal/confine"
	"peal/internal/gitrepo"
	"peal/internal/procs"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testbin"
	"peal/internal/testkit/testgit"
)

var bins map[string]string

func TestMain(m *testing.M) {
	os.Exit(testbin.Main(m, func(b map[string]string) { bins = b }, "peal/cmd/peal", "peal/testdata/fakeagent", "peal/testdata/fakestet", "peal/testdata/escape"))
}

// sandbox is a scratch repo, plan, state folder and fake agent for one peal process.
type sandbox struct {
	t                                   *testing.T
	dir, repo, plan, stateDir, agentDir string
	killedAt                            time.Time // when runKilled killed peal
}

func newSandbox(t *testing.T, plan string) *sandbox {
	t.Helper()
	dir := testbin.ListSafeDir(t)
	s := &sandbox{t: t, dir: dir, repo: filepath.Join(dir, "repo"), plan: filepath.Join(dir, "plan.md"),
		stateDir: filepath.Join(dir, "state"), agentDir: filepath.Join(dir, "agent")}
	for _, d := range []string{s.repo, s.agentDir} {
		os.MkdirAll(d, 0o755)
	}
	testgit.Init(t, s.repo)
	os.WriteFile(s.plan, []byte(plan), 0o644)
	return s
}

// git runs git in the sandbox's repository with env.
func (s *sandbox) git(env []string, args ...string) string {
	s.t.Helper()
	out, err := gitrepo.Plain(s.repo, env...).Command(args...).Run(context.Background())
	if err != nil {
		s.t.Fatalf("%v", err)
	}
	return out
}

func (s *sandbox) scenario(rules map[string][]fakes.Outcome) {
	if err := fakes.WriteScenario(s.agentDir, fakes.Scenario{Rules: rules}); err != nil {
		s.t.Fatal(err)
	}
}

// env is a CI-style environment: everything through PEAL_* variables. Its
// PATH finds no stet: a test reviews with the fake stet when it names it.
func (s *sandbox) env(extra ...string) []string {
	env := []string{"PATH=" + testbin.PathWithout(os.Getenv("PATH"), "stet"), "HOME=" + s.dir, "FAKE_AGENT_DIR=" + s.agentDir,
		"PEAL_PLAN_PATH=" + s.plan, "PEAL_REPO_PATH=" + s.repo, "PEAL_STATE_DIR=" + s.stateDir,
		"PEAL_AGENT_CMD=" + bins["fakeagent"], "PEAL_PHASE_TIMEOUT_SEC=30", "PEAL_KILL_GRACE_SEC=1", "CURSOR_API_KEY=test-key",
		// The suite's confine setting (testbin.ConfineMode), unless a test
		// of confinement asks for its own (escape_test.go); the fakes keep
		// their variables, write the folders of their records and read their
		// programs.
		"PEAL_CONFINE=" + testbin.ConfineMode(), "PEAL_CONFINE_ENV_PASS=FAKE_*", "PEAL_CONFINE_WRITE_PATHS=" + s.agentDir,
		"PEAL_CONFINE_READ_PATHS=" + testbin.ReadPaths(bins)}
	return append(env, extra...)
}

// workDir is where a run's tasks work: the work tree, or, where the
// kernel confines files, the run's worktree.
func (s *sandbox) workDir() string {
	if testbin.ConfineMode() != "off" && confine.Probe().Files {
		return filepath.Join(s.stateDir, "worktrees", "home")
	}
	return s.repo
}

type result struct {
	code           int
	stdout, stderr string
}

func (s *sandbox) peal(env []string, args ...string) result {
	s.t.Helper()
	cmd := exec.Command(bins["peal"], args...)
	cmd.Dir = s.dir
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		s.t.Fatal(err)
	}
	return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

func (s *sandbox) keys() string {
	c, err := fakes.ReadCalls(s.agentDir)
	if err != nil {
		s.t.Fatal(err)
	}
	return strings.Join(fakes.Keys(fakes.Starts(c)), " ")
}

func (s *sandbox) completed() []int {
	var st struct {
		Completed []int `json:"completed_task_indices"`
	}
	data, err := os.ReadFile(filepath.Join(s.stateDir, "state.json"))
	if err != nil {
		s.t.Fatalf("state: %v", err)
	}
	json.Unmarshal(data, &st)
	return st.Completed
}

// lastLine is the one line peal prints for a failure.
func lastLine(stderr string) string {
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	return lines[len(lines)-1]
}

var fail = fakes.Outcome{Exit: 1, Stderr: "agent broke"}

const plan3 = "## Task 1\nA\n## Task 2\nB\n## Task 3\nC\n"

func TestExitCodes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		rules map[string][]fakes.Outcome
		env   []string
		args  []string
		code  int
		line  string
	}{
		{"0: every task completed", nil, nil, nil, 0, ""},
		{"1: phase failure", map[string][]fakes.Outcome{"plan:2": {fail}}, nil, nil, 1, "peal: error: task 2: plan failed after 1 attempt: plan call exited with status 1: agent broke"},
		{"1: configuration", nil, []string{"PEAL_MAX_PARALLEL=lots"}, nil, 1, `peal: error: PEAL_MAX_PARALLEL: invalid value "lots"`},
		{"1: usage", nil, nil, []string{"--task", "1", "--from-task", "2"}, 1, "peal: error: --task and --from-task can't be used together"},
		{"1: unknown flag", nil, nil, []string{"--bogus"}, 1, "peal: error: unknown flag --bogus"},
		{"2: a task failed, run continued", map[string][]fakes.Outcome{"plan:2": {fail}}, []string{"PEAL_CONTINUE_WITH_REMAINING_TASKS=true"}, nil, 2, "peal: finished with issues: task 2 failed (summary: "},
		{"4: the agent is unreachable", map[string][]fakes.Outcome{"plan:2": {{Exit: 1, Stderr: "connect ECONNREFUSED 10.0.0.1:443"}}},
			[]string{"PEAL_CONTINUE_WITH_REMAINING_TASKS=true", "PEAL_NETWORK_RETRY_DELAY_SEC=0", "PEAL_NETWORK_RETRY_COUNT=1"}, nil, 4,
			"peal: error: task 2: the agent looks unreachable: all 2 attempts of the plan call failed with network errors"},
		{"3: consecutive failure cap", map[string][]fakes.Outcome{"plan:1": {fail}, "plan:2": {fail}}, []string{"PEAL_CONTINUE_WITH_REMAINING_TASKS=true", "PEAL_MAX_CONSECUTIVE_TASK_FAILURES=2"}, nil, 3, "peal: error: stopped after 2 consecutive task failures"},
		{"2: every task completed, the final tree fails a check", nil, []string{"PEAL_CHECK_COMMANDS=echo FAIL: lint; false"}, nil, 2,
			"peal: finished with issues: the final tree fails the checks `echo FAIL: lint; false` (summary: "},
		{"1: a check still fails after the last round", map[string][]fakes.Outcome{"execute:1": {{WriteFiles: map[string]string{"broken": "x"}}}},
			[]string{"PEAL_CHECK_COMMANDS=test ! -f broken || { echo FAIL: TestBroken; exit 1; }", "PEAL_MAX_ADDRESS_ROUNDS=1"}, nil, 1,
			"peal: error: task 1: checks still fail after 1 address round(s): `test ! -f broken || { echo FAIL: TestBroken; exit 1; }` exited with status 1: FAIL: TestBroken"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t, plan3)
			s.scenario(tc.rules)
			r := s.peal(s.env(tc.env...), append([]string{"run"}, tc.args...)...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, tc.code, r.stderr)
			}
			if tc.line != "" && !strings.HasPrefix(lastLine(r.stderr), tc.line) {
				t.Fatalf("last line %q, want prefix %q", lastLine(r.stderr), tc.line)
			}
		})
	}
	// No command at all is a usage error too, naming the commands.
	s := newSandbox(t, plan3)
	if r := s.peal(s.env()); r.code != 1 || r.stderr != "peal: error: no command given: use one of run, prompt, config, status, retry-state, report, doctor or clean (peal --help describes them)\n" {
		t.Fatalf("no command: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestBadInput: each class of bad input gets one line naming what to fix and
// exit 1, before any child runs and without writing to the state folder.
func TestBadInput(t *testing.T) {
	t.Parallel()
	notGit := t.TempDir()
	cases := []struct {
		name  string
		plan  string
		env   func(s *sandbox) []string
		args  []string
		wants []string
	}{
		{"missing plan path", plan3, func(s *sandbox) []string { return without(s.env(), "PEAL_PLAN_PATH") }, nil, []string{"plan_path is not set", "--plan", "PEAL_PLAN_PATH"}},
		{"missing repo path", plan3, func(s *sandbox) []string { return without(s.env(), "PEAL_REPO_PATH") }, nil, []string{"repo_path is not set", "--repo"}},
		{"plan missing", plan3, func(s *sandbox) []string { return s.env("PEAL_PLAN_PATH=/nonexistent/plan.md") }, nil, []string{"/nonexistent/plan.md", "does not exist"}},
		{"plan not a file", plan3, func(s *sandbox) []string { return s.env("PEAL_PLAN_PATH=" + s.repo) }, nil, []string{"not a regular file"}},
		{"plan without task", "# Notes\nnothing here\n", func(s *sandbox) []string { return s.env() }, nil, []string{"no `## Task N` heading"}},
		{"repo missing", plan3, func(s *sandbox) []string { return s.env("PEAL_REPO_PATH=/nonexistent/repo") }, nil, []string{"/nonexistent/repo", "does not exist"}},
		{"repo not a folder", plan3, func(s *sandbox) []string { return s.env("PEAL_REPO_PATH=" + s.plan) }, nil, []string{"not a folder"}},
		{"repo not git", plan3, func(s *sandbox) []string { return s.env("PEAL_REPO_PATH=" + notGit) }, nil, []string{"not inside a git work tree"}},
		{"agent not found", plan3, func(s *sandbox) []string { return s.env("PEAL_AGENT_CMD=cursor-agent-missing") }, nil, []string{`"cursor-agent-missing"`, "PEAL_AGENT_CMD"}},
		{"toml syntax", plan3, func(s *sandbox) []string { return s.env() }, []string{"--config", "bad-syntax.toml"}, []string{"bad-syntax.toml", "line 2"}},
		{"toml unknown key", plan3, func(s *sandbox) []string { return s.env() }, []string{"--config", "unknown.toml"}, []string{`unknown key "phase_timeout"`}},
		{"toml wrong type", plan3, func(s *sandbox) []string { return s.env() }, []string{"--config", "type.toml"}, []string{"max_parallel", "wrong type"}},
		{"toml dismiss reason", plan3, func(s *sandbox) []string { return s.env() }, []string{"--config", "reason.toml"}, []string{`"because"`, "stet_dismiss_patterns"}},
		{"env value", plan3, func(s *sandbox) []string { return s.env("PEAL_PHASE_RETRY_COUNT=-1") }, nil, []string{"PEAL_PHASE_RETRY_COUNT", `"-1"`}},
		{"enum value", plan3, func(s *sandbox) []string { return s.env() }, []string{"--on-stet-fail", "sometimes"}, []string{"--on-stet-fail", `"sometimes"`}},
		{"unknown task", plan3, func(s *sandbox) []string { return s.env() }, []string{"--task", "9"}, []string{"--task 9", "1, 2, 3"}},
		{"stet_path missing", plan3, func(s *sandbox) []string { return s.env() }, []string{"--stet-path", "/nonexistent/stet"},
			[]string{"stet_path /nonexistent/stet does not exist (set by --stet-path)"}},
		{"agent_log_dir in a missing folder", plan3, func(s *sandbox) []string { return s.env("PEAL_AGENT_LOG_DIR=/nonexistent/logs") }, nil,
			[]string{"agent_log_dir /nonexistent/logs", "/nonexistent, does not exist (set by PEAL_AGENT_LOG_DIR)"}},
		{"toml key misspelt", plan3, func(s *sandbox) []string { return s.env() }, []string{"--config", "misspelt.toml"}, []string{`unknown key "plan": did you mean plan_path?`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t, tc.plan)
			files := map[string]string{
				"bad-syntax.toml": "model = \"m\"\nmax_parallel = [\n",
				"unknown.toml":    "phase_timeout = 5\n",
				"type.toml":       "max_parallel = \"four\"\n",
				"reason.toml":     "stet_dismiss_patterns = [{pattern = \"x\", reason = \"because\"}]\n",
				"misspelt.toml":   "plan = \"plan.md\"\n",
			}
			for name, body := range files {
				os.WriteFile(filepath.Join(s.dir, name), []byte(body), 0o644)
			}
			r := s.peal(tc.env(s), append([]string{"run"}, tc.args...)...)
			if r.code != 1 {
				t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
			}
			if strings.Count(strings.TrimRight(r.stderr, "\n"), "\n") != 0 || !strings.HasPrefix(r.stderr, "peal: error: ") {
				t.Fatalf("want exactly one error line, got:\n%s", r.stderr)
			}
			for _, w := range tc.wants {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("%q does not mention %q", r.stderr, w)
				}
			}
			if s.keys() != "" {
				t.Fatalf("agent called: %s", s.keys())
			}
			if _, err := os.Stat(s.stateDir); err == nil {
				t.Fatal("state folder written for bad input")
			}
		})
	}
}

func without(env []string, name string) []string {
	return slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
}

func TestFlagsOverrideEnvAndFile(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nA\n")
	os.WriteFile(filepath.Join(s.dir, "peal.toml"), []byte("model = \"from-file\"\nsandbox = \"from-file\"\n"), 0o644)
	r := s.peal(s.env("PEAL_MODEL=from-env"), "run", "--config", "peal.toml", "--model", "from-flag")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	c, _ := fakes.ReadCalls(s.agentDir)
	argv := strings.Join(fakes.Starts(c)[1].Argv, " ")
	if !strings.Contains(argv, "--model from-flag") || !strings.Contains(argv, "--sandbox from-file") {
		t.Fatalf("execute argv %q", argv)
	}
}

// SIGINT, SIGTERM and SIGHUP (a closed terminal or SSH session) stop the
// running agent and its group, save state and exit 130 / 143 / 129.
func TestSignals(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t, plan3)
			ready := filepath.Join(s.agentDir, "ready") // where a confined call may write
			if err := syscall.Mkfifo(ready, 0o644); err != nil {
				t.Fatal(err)
			}
			s.scenario(map[string][]fakes.Outcome{"execute:2": {{Grandchild: true, WriteFiles: map[string]string{ready: "x"}, Hang: true}}})
			cmd := exec.Command(bins["peal"], "run")
			cmd.Dir, cmd.Env = s.dir, s.env("PEAL_KILL_GRACE_SEC=2")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.ReadFile(ready); err != nil { // blocks until the agent of task 2 runs
				t.Fatal(err)
			}
			cmd.Process.Signal(sig)
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatal("peal did not exit after the signal")
			}
			want := 128 + int(sig)
			if code := cmd.ProcessState.ExitCode(); code != want {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, want, stderr.String())
			}
			if !slices.Equal(s.completed(), []int{1}) {
				t.Fatalf("state %v", s.completed())
			}
			if !strings.Contains(lastLine(stderr.String()), "interrupted by SIG") {
				t.Fatalf("last line %q", lastLine(stderr.String()))
			}
			calls, _ := fakes.ReadCalls(s.agentDir)
			starts := fakes.Starts(calls)
			ids, _ := fakes.GrandchildPIDs(s.agentDir)
			for _, id := range append(ids, starts[len(starts)-1].ID()) {
				if pid := id.Host(); procs.Alive(pid) {
					id.Kill()
					t.Fatalf("process %d (%v) outlived peal", pid, id)
				}
			}
		})
	}
}

func TestLogFile(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nSECRET TASK TEXT\n")
	logFile := filepath.Join(s.dir, "logs", "peal.jsonl")
	os.MkdirAll(filepath.Dir(logFile), 0o755)
	os.WriteFile(logFile, []byte(`{"earlier":"record"}`+"\n"), 0o644)
	r := s.peal(s.env("PEAL_LOG_FILE="+logFile, "PEAL_LOG_LEVEL=debug"), "run")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	data, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if lines[0] != `{"earlier":"record"}` {
		t.Fatal("the log file was not appended to")
	}
	sawArgv := false
	for _, line := range lines[1:] {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		if rec["msg"] == nil || rec["level"] == nil || rec["time"] == nil {
			t.Fatalf("record lacks msg/level/time: %q", line)
		}
		if argv, ok := rec["argv"].([]any); ok && rec["phase"] != "git" {
			sawArgv = true
			if last := fmt.Sprint(argv[len(argv)-1]); !strings.HasPrefix(last, "<prompt len=") {
				t.Fatalf("argv logged with its prompt: %q", line)
			}
		}
	}
	if !sawArgv || strings.Contains(string(data), "SECRET TASK TEXT") || strings.Contains(r.stderr, "SECRET TASK TEXT") {
		t.Fatal("prompt text logged, or no argv logged")
	}

	// The file gets every record whatever log_level says (as Peal's did);
	// stderr keeps to log_level.
	s = newSandbox(t, "## Task 1\nA\n")
	logFile = filepath.Join(s.dir, "quiet.jsonl")
	r = s.peal(s.env("PEAL_LOG_FILE="+logFile, "PEAL_LOG_LEVEL=warn"), "run")
	data, _ = os.ReadFile(logFile)
	if r.code != 0 || strings.Contains(r.stderr, "level=INFO") || !strings.Contains(string(data), `"level":"DEBUG"`) ||
		!strings.Contains(string(data), `"level":"INFO"`) {
		t.Fatalf("exit %d, stderr:\n%s\nfile:\n%s", r.code, r.stderr, data)
	}
}

func TestHelpShowsVariablesAndDefaults(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, plan3)
	for _, command := range []string{"run", "config"} {
		r := s.peal(nil, command, "--help")
		if r.code != 0 {
			t.Fatalf("exit %d", r.code)
		}
		checkHelp(t, command, strings.Join(strings.Fields(r.stdout), " "))
	}
	for _, args := range [][]string{{"retry-state", "show", "--help"}, {"retry-state", "reset", "--help"}} {
		if r := s.peal(nil, args...); !strings.Contains(r.stdout, "PEAL_KNOWLEDGE_DIR") {
			t.Errorf("%v: help lacks PEAL_KNOWLEDGE_DIR:\n%s", args, r.stdout)
		}
	}
	if r := s.peal(nil, "retry-state", "detect", "--help"); !strings.Contains(strings.Join(strings.Fields(r.stdout), " "), "default: Critical,Major") {
		t.Errorf("detect help lacks the --fail-on default:\n%s", r.stdout)
	}
}

func checkHelp(t *testing.T, command, help string) {
	t.Helper()
	for _, k := range config.Keys {
		if k.Flag == "" {
			continue
		}
		named := strings.Contains(help, k.FlagName()) || strings.Contains(help, "--[no-]"+k.Flag)
		if !named || !strings.Contains(help, k.Env()) {
			t.Errorf("%s help lacks %s or %s", command, k.FlagName(), k.Env())
		}
	}
	if !strings.Contains(help, "default: 1800") {
		t.Errorf("%s help lacks the default of phase_timeout_sec", command)
	}
}

// TestFlagNamesMatchKeys: `peal run` and `peal config` have one flag per key
// that has one, named after the key, of the Go type of its Config field, and
// no configuration flag without a key.
func TestFlagNamesMatchKeys(t *testing.T) {
	t.Parallel()
	parser, err := newParser(io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range parser.Model.Children {
		if node.Name != "run" && node.Name != "config" {
			continue
		}
		seen := map[string]bool{}
		for _, f := range node.Flags {
			key := f.Tag.Get("key")
			if key == "" {
				continue
			}
			k, ok := config.KeyByName(key)
			if !ok {
				t.Fatalf("%s: flag --%s names unknown key %q", node.Name, f.Name, key)
			}
			if f.Tag.Has("was") {
				// A flag's old name, hidden, still taken.
				if f.Name != k.OldFlag || f.Target.Type() != k.GoType || !f.Hidden {
					t.Errorf("%s: old flag --%s (%s, hidden %v) for key %s, want --%s, hidden", node.Name, f.Name, f.Target.Type(), f.Hidden, key, k.OldFlag)
				}
				continue
			}
			seen[key] = true
			if f.Name != k.Flag || f.Target.Type() != k.GoType || f.Hidden {
				t.Errorf("%s: flag --%s (%s, hidden %v) for key %s, want --%s (%s), shown", node.Name, f.Name, f.Target.Type(), f.Hidden, key, k.Flag, k.GoType)
			}
		}
		for _, k := range config.Keys {
			if (k.Flag != "") != seen[k.Name] {
				t.Errorf("%s: key %s has flag %q, and a flag for it: %v", node.Name, k.Name, k.Flag, seen[k.Name])
			}
		}
	}
}

// TestPromptOutputOnAFullDisk: peal prompt --output on a full disk says so,
// naming the folder where room must be made.
func TestPromptOutputOnAFullDisk(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, plan3)
	full := testbin.FullDisk(t)
	r := s.peal(nil, "prompt", "--output", filepath.Join(full, "prompt.md"))
	if want := "the disk holding " + full + " is full"; r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Fatalf("exit %d, stderr %q; want %q", r.code, r.stderr, want)
	}
}

func TestPromptCommand(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, plan3)
	r := s.peal(nil, "prompt")
	if r.code != 0 || !strings.Contains(r.stdout, "## Task N") || !strings.Contains(r.stdout, "(parallel)") {
		t.Fatalf("exit %d, stdout %q", r.code, r.stdout)
	}
	out := filepath.Join(s.dir, "a", "b", "prompt.md")
	if r := s.peal(nil, "prompt", "--output", out); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if data, _ := os.ReadFile(out); !strings.Contains(string(data), "## Task N") {
		t.Fatal("prompt not written")
	}
	blocker := filepath.Join(s.dir, "file")
	os.WriteFile(blocker, nil, 0o644)
	if r := s.peal(nil, "prompt", "--output", filepath.Join(blocker, "x.md")); r.code != 1 || !strings.HasPrefix(r.stderr, "peal: error:") {
		t.Fatalf("write error: exit %d, %q", r.code, r.stderr)
	}
	// The file is written atomically: a link at its path is replaced, never
	// written through.
	target, link := filepath.Join(s.dir, "target.md"), filepath.Join(s.dir, "link.md")
	os.WriteFile(target, []byte("keep\n"), 0o644)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if r := s.peal(nil, "prompt", "--output", link); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if data, _ := os.ReadFile(target); string(data) != "keep\n" {
		t.Fatalf("the prompt was written through the link: %q", data)
	}
	if info, err := os.Lstat(link); err != nil || !info.Mode().IsRegular() {
		t.Fatalf("the link was not replaced by the prompt: %v, %v", info, err)
	}
	// What to build: in the arguments, or on stdin (a pipe, a file, or
	// "-"); a terminal is never read.
	fenced := "---WHAT TO BUILD---\nA CLI that counts words.\n---WHAT TO BUILD---\n"
	prompt := func(stdin io.Reader, args ...string) string {
		t.Helper()
		cmd := exec.Command(bins["peal"], append([]string{"prompt"}, args...)...)
		cmd.Dir, cmd.Stdin = s.dir, stdin
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("peal prompt %q: %v", args, err)
		}
		return string(out)
	}
	words := strings.NewReader("A CLI that counts words.\n")
	for name, got := range map[string]string{
		"arguments": prompt(nil, "A", "CLI", "that counts words."),
		"a pipe":    prompt(io.MultiReader(words)),
		"-":         prompt(strings.NewReader("A CLI that counts words."), "-"),
	} {
		if !strings.Contains(got, fenced) || !strings.HasSuffix(got, "Reply with the plan only, in this format.\n") {
			t.Errorf("%s: the prompt lacks what to build:\n%s", name, got)
		}
	}
	if got := prompt(nil); strings.Contains(got, "WHAT TO BUILD") {
		t.Errorf("/dev/null on stdin: %s", got)
	}
}
