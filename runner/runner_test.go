package runner

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"peal/agent"
	"peal/config"
	"peal/confine"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testbin"
	"peal/internal/testkit/testgit"
	"peal/plan"
	"peal/state"
)

var fakeAgent, fakeStet string

func TestMain(m *testing.M) {
	os.Exit(testbin.Main(m, func(b map[string]string) { fakeAgent, fakeStet = b["fakeagent"], b["fakestet"] }, "peal/testdata/fakeagent", "peal/testdata/fakestet"))
}

// harness is one scratch git repository, plan, state folder and fake agent.
type harness struct {
	t                                   *testing.T
	repo, plan, stateDir, agentDir, tmp string
	stetDir                             string
	log                                 *lockedLog
	// env reaches every child of the run (the fakes' folders, a git
	// identity), so that tests never change the process environment.
	env []string
	// extra options of every run (e.g. withTaskStart)
	extra []Option
	// launchGap keeps the agent kinds' gaps between parallel launches.
	launchGap bool
	// confine is the harness's confine setting: the suite's
	// (testbin.ConfineMode), unless a test of confinement sets its own;
	// writable are more paths its confined calls may write.
	confine  string
	writable []string
	// bin holds the fake agent under CLI names; agent is the Cursor CLI.
	bin, agent string
}

// withTaskStart makes fn run at the start of every task.
func withTaskStart(fn func(plan.Task)) Option {
	return func(s *settings) { s.taskStart = fn }
}

// withoutLaunchGap starts the Cursor CLI's parallel calls without the gap
// between launches that keeps the real CLI from racing on its files: the
// fake does not race, and tests of parallel blocks would wait out the gaps.
func withoutLaunchGap() Option {
	return func(s *settings) { s.launchGap = func(*agent.Kind) time.Duration { return 0 } }
}

// withGitTimeout bounds peal's git commands by d (settings.gitTimeout).
func withGitTimeout(d time.Duration) Option {
	return func(s *settings) { s.gitTimeout = d }
}

// opts are the options every run of the harness gets: git's commands are
// bounded by a minute, whatever phase_timeout_sec a test sets to time an
// agent, stet or setup call out, so that none fails because a loaded
// machine ran one of them in over a second.
func (h *harness) opts(more ...Option) []Option {
	base := []Option{withEnv(h.env...), withGitTimeout(time.Minute)}
	if !h.launchGap {
		base = append(base, withoutLaunchGap())
	}
	return append(append(base, h.extra...), more...)
}

func newHarness(t *testing.T, plan string) *harness {
	t.Helper()
	tmp := testbin.ListSafeDir(t)
	h := &harness{t: t, tmp: tmp, repo: filepath.Join(tmp, "repo"), plan: filepath.Join(tmp, "plan.md"),
		stateDir: filepath.Join(tmp, "state"), agentDir: filepath.Join(tmp, "agent"), log: &lockedLog{}, confine: testbin.ConfineMode()}
	for _, d := range []string{h.repo, h.agentDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	testgit.Init(t, h.repo)
	if err := os.WriteFile(h.plan, []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	h.env = append([]string{fakes.AgentDirEnv + "=" + h.agentDir, "CURSOR_API_KEY=test-key"}, testgit.Env...)
	h.bin = filepath.Join(tmp, "bin")
	h.agent = h.cli("agent")
	return h
}

// cli is the fake agent under a CLI's name (agent for the Cursor CLI,
// claude, codex, gemini, opencode), which makes it imitate that CLI.
func (h *harness) cli(name string) string {
	h.t.Helper()
	path := filepath.Join(h.bin, name)
	if _, err := os.Lstat(path); err == nil {
		return path
	}
	if err := os.MkdirAll(h.bin, 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Symlink(fakeAgent, path); err != nil {
		h.t.Fatal(err)
	}
	return path
}

// workDir is where the run's tasks work: the work tree, or, where the
// kernel confines files, the run's worktree (home.go).
func (h *harness) workDir() string {
	if h.confine != "off" && confine.Probe().Files {
		return filepath.Join(h.stateDir, "worktrees", "home")
	}
	return h.repo
}

func (h *harness) scenario(rules map[string][]fakes.Outcome) {
	h.t.Helper()
	if err := fakes.WriteScenario(h.agentDir, fakes.Scenario{Rules: rules}); err != nil {
		h.t.Fatal(err)
	}
}

// configEnv are the variables of the harness's configuration. Its phase
// timeout is a bound against a hang only, generous enough for a loaded
// machine under the race detector (a call that streams megabytes through
// the watch there took over 20 s): a test that times a call out sets its own.
func (h *harness) configEnv() []string {
	return []string{"PEAL_PLAN_PATH=" + h.plan, "PEAL_REPO_PATH=" + h.repo, "PEAL_STATE_DIR=" + h.stateDir,
		"PEAL_AGENT_CMD=" + h.agent, "PEAL_PHASE_TIMEOUT_SEC=180", "PEAL_KILL_GRACE_SEC=1",
		"PEAL_CONFINE=" + h.confine, "PEAL_CONFINE_WRITE_PATHS=" + strings.Join(append([]string{h.agentDir, pipes(h.t)}, h.writable...), ",")}
}

func (h *harness) config(env ...string) *config.Config {
	h.t.Helper()
	cfg, err := config.Load(config.Inputs{Env: append(h.configEnv(), env...)})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		h.t.Fatal(err)
	}
	return cfg
}

func (h *harness) runCfg(cfg *config.Config, more ...Option) (Outcome, error) {
	return h.runCtx(context.Background(), cfg, more...)
}

// runCtx is runCfg under ctx (cancelled: as a signal would).
func (h *harness) runCtx(ctx context.Context, cfg *config.Config, more ...Option) (Outcome, error) {
	log := slog.New(slog.NewTextHandler(h.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return Run(ctx, cfg, log, h.opts(more...)...)
}

func (h *harness) run(env ...string) (Outcome, error) {
	h.t.Helper()
	return h.runCfg(h.config(env...))
}

func (h *harness) calls() []fakes.Call {
	h.t.Helper()
	c, err := fakes.ReadCalls(h.agentDir)
	if err != nil {
		h.t.Fatal(err)
	}
	return fakes.Starts(c)
}

func (h *harness) keys() string { return strings.Join(fakes.Keys(h.calls()), " ") }

func (h *harness) state() state.State {
	h.t.Helper()
	var st state.State
	data, err := os.ReadFile(filepath.Join(h.stateDir, state.FileName))
	if err != nil {
		h.t.Fatalf("state file: %v", err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		h.t.Fatal(err)
	}
	return st
}

func (h *harness) summary() (state.RunSummary, bool) {
	var s state.RunSummary
	data, err := os.ReadFile(filepath.Join(h.stateDir, "run_summary.json"))
	if err != nil {
		return s, false
	}
	if err := json.Unmarshal(data, &s); err != nil {
		h.t.Fatal(err)
	}
	return s, true
}

// lockedLog is the harness's log: the runs of one test (a run in the
// background and a second one, say) write to it through handlers of their
// own, and the test reads it while they run.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var (
	fail = fakes.Outcome{Exit: 1, Stderr: "agent broke"}
	hang = fakes.Outcome{Hang: true}
	ok   = fakes.Outcome{}
)

const twoTasks = "# Plan\n## Task 1\nDo A\n\n## Task 2\nDo B\n"
const threeTasks = "## Task 1\nA\n## Task 2\nB\n## Task 3\nC\n"

func TestSequentialRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, twoTasks)
	out, err := h.run()
	if err != nil {
		t.Fatal(err)
	}
	if got := h.keys(); got != "plan:1 execute:1 plan:2 execute:2" {
		t.Fatalf("calls %q", got)
	}
	if out.ExitCode != ExitOK || !slices.Equal(h.state().CompletedTaskIndices, []int{1, 2}) {
		t.Fatalf("outcome %+v, state %+v", out, h.state())
	}
	sum, found := h.summary()
	if !found || sum.ExitCode != 0 || !slices.Equal(sum.TasksCompleted, []int{1, 2}) || sum.PlanPath != h.plan || sum.CompletedAt == "" {
		t.Fatalf("summary %+v", sum)
	}
}

// TestAgentContract checks the agent argv and the call environment as the
// agent saw them, with and without a model.
func TestAgentContract(t *testing.T) {
	t.Parallel()
	for _, model := range []string{"", "gpt-x"} {
		h := newHarness(t, "## Task 3\nDo C\n")
		h.scenario(map[string][]fakes.Outcome{"plan": {{Stdout: "THE PLAN"}}})
		env := []string{"PEAL_SANDBOX=enabled"}
		if model != "" {
			env = append(env, "PEAL_MODEL="+model)
		}
		if _, err := h.run(env...); err != nil {
			t.Fatal(err)
		}
		c := h.calls()
		if len(c) != 2 {
			t.Fatalf("calls %v", fakes.Keys(c))
		}
		withModel := func(argv ...string) []string {
			if model != "" {
				argv = append(argv, "--model", model)
			}
			return argv
		}
		wantPlan := withModel("--print", "--plan", "--workspace", h.workDir(), "--output-format", "text", "--trust")
		wantExec := withModel("--print", "--workspace", h.workDir(), "--sandbox", "enabled", "--trust", "--force")
		if got := c[0].Argv[:len(c[0].Argv)-1]; !slices.Equal(got, wantPlan) {
			t.Errorf("plan argv %q, want %q", got, wantPlan)
		}
		if got := c[1].Argv[:len(c[1].Argv)-1]; !slices.Equal(got, wantExec) {
			t.Errorf("execute argv %q, want %q", got, wantExec)
		}
		planPrompt, execPrompt := c[0].Argv[len(c[0].Argv)-1], c[1].Argv[len(c[1].Argv)-1]
		if !strings.Contains(planPrompt, "---TASK---\nDo C\n---TASK---") {
			t.Errorf("plan prompt %q", planPrompt)
		}
		if !strings.Contains(execPrompt, "---PLAN---\nTHE PLAN\n---PLAN---") {
			t.Errorf("execute prompt %q", execPrompt)
		}
		for i, phaseName := range []string{"plan", "execute"} {
			e := c[i].Env
			if e["PEAL_PHASE"] != phaseName || e["PEAL_TASK_INDEX"] != "3" || e["PEAL_ATTEMPT"] != "1" || !c[i].StdinNull || c[i].Cwd != h.workDir() {
				t.Errorf("%s call env %v, stdin null %v, cwd %s", phaseName, e, c[i].StdinNull, c[i].Cwd)
			}
			// Each call has a temporary folder of its own under the state
			// folder, gone once the call has ended.
			if filepath.Dir(c[i].TmpDir) != filepath.Join(h.stateDir, "tmp") {
				t.Errorf("%s call TMPDIR %q, want a folder in %s", phaseName, c[i].TmpDir, filepath.Join(h.stateDir, "tmp"))
			} else if _, err := os.Stat(c[i].TmpDir); !os.IsNotExist(err) {
				t.Errorf("%s call's TMPDIR %s is still there: %v", phaseName, c[i].TmpDir, err)
			}
		}
		if strings.Contains(h.log.String(), "Do C") || strings.Contains(h.log.String(), "THE PLAN") {
			t.Error("the log contains prompt text")
		}
		if !strings.Contains(h.log.String(), "<prompt len=") {
			t.Error("the log does not show argv with the prompt hidden")
		}
	}
}

// TestRetryRows checks each Phase 1–2 row of the retry table with exact attempt counts.
func TestRetryRows(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		env     []string
		rules   map[string][]fakes.Outcome
		want    string
		wantErr bool
	}{
		{"no retries by default", nil, map[string][]fakes.Outcome{"plan": {fail, ok}}, "plan:1", true},
		{"plan retried on exit", []string{"PEAL_PHASE_RETRY_COUNT=2"}, map[string][]fakes.Outcome{"plan": {fail, fail, ok}}, "plan:1 plan:1 plan:1 execute:1", false},
		{"plan exhausted", []string{"PEAL_PHASE_RETRY_COUNT=2"}, map[string][]fakes.Outcome{"plan": {fail}}, "plan:1 plan:1 plan:1", true},
		{"execute retried on timeout", []string{"PEAL_PHASE_RETRY_COUNT=1", "PEAL_PHASE_TIMEOUT_SEC=1"}, map[string][]fakes.Outcome{"execute": {hang, ok}}, "plan:1 execute:1 execute:1", false},
		{"execute timeouts exhaust", []string{"PEAL_PHASE_RETRY_COUNT=1", "PEAL_PHASE_TIMEOUT_SEC=1"}, map[string][]fakes.Outcome{"execute": {hang}}, "plan:1 execute:1 execute:1", true},
		{"phase 3 count leaves phases 1-2 alone", []string{"PEAL_PHASE_3_RETRY_COUNT=2"}, map[string][]fakes.Outcome{"execute": {fail, ok}}, "plan:1 execute:1", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "## Task 1\nA\n")
			h.scenario(tc.rules)
			_, err := h.run(tc.env...)
			if got := h.keys(); got != tc.want {
				t.Fatalf("calls %q, want %q", got, tc.want)
			}
			var te *TaskError
			if tc.wantErr != (err != nil) || (err != nil && !errors.As(err, &te)) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestValidatePlanText(t *testing.T) {
	t.Parallel()
	empty := fakes.Outcome{NoStdout: true}
	short := fakes.Outcome{Stdout: "tiny"}
	long := fakes.Outcome{Stdout: strings.Repeat("a real plan ", 5)}
	cases := []struct {
		name    string
		env     []string
		plan    []fakes.Outcome
		want    string
		wantErr bool
	}{
		{"off: empty plan text accepted", nil, []fakes.Outcome{empty}, "plan:1 execute:1", false},
		{"empty then good", []string{"PEAL_VALIDATE_PLAN_TEXT=true"}, []fakes.Outcome{empty, long}, "plan:1 plan:1 execute:1", false},
		{"empty twice fails", []string{"PEAL_VALIDATE_PLAN_TEXT=true"}, []fakes.Outcome{empty}, "plan:1 plan:1", true},
		{"too short twice fails", []string{"PEAL_VALIDATE_PLAN_TEXT=true", "PEAL_MIN_PLAN_TEXT_LEN=20"}, []fakes.Outcome{short}, "plan:1 plan:1", true},
		{"independent of retry count", []string{"PEAL_VALIDATE_PLAN_TEXT=true", "PEAL_PHASE_RETRY_COUNT=3"}, []fakes.Outcome{empty}, "plan:1 plan:1", true},
		{"short then long", []string{"PEAL_VALIDATE_PLAN_TEXT=true", "PEAL_MIN_PLAN_TEXT_LEN=20"}, []fakes.Outcome{short, long}, "plan:1 plan:1 execute:1", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "## Task 1\nA\n")
			h.scenario(map[string][]fakes.Outcome{"plan": tc.plan})
			_, err := h.run(tc.env...)
			if got := h.keys(); got != tc.want || tc.wantErr != (err != nil) {
				t.Fatalf("calls %q (want %q), err %v", got, tc.want, err)
			}
		})
	}
}

func TestStopOnFailure(t *testing.T) {
	t.Parallel()
	h := newHarness(t, threeTasks)
	h.scenario(map[string][]fakes.Outcome{"execute:2": {fail}})
	out, err := h.run()
	var te *TaskError
	if !errors.As(err, &te) || te.Index != 2 || !strings.Contains(err.Error(), "agent broke") {
		t.Fatalf("err = %v", err)
	}
	if h.keys() != "plan:1 execute:1 plan:2 execute:2" || out.ExitCode != 0 {
		t.Fatalf("calls %q", h.keys())
	}
	if !slices.Equal(h.state().CompletedTaskIndices, []int{1}) {
		t.Fatalf("state %+v", h.state())
	}
	if _, found := h.summary(); found {
		t.Fatal("a hard failure must not write a run summary")
	}
}

func TestContinueWithRemainingTasks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, threeTasks)
	h.scenario(map[string][]fakes.Outcome{"plan:2": {fail}})
	out, err := h.run("PEAL_CONTINUE_WITH_REMAINING_TASKS=true")
	if err != nil {
		t.Fatal(err)
	}
	if h.keys() != "plan:1 execute:1 plan:2 plan:3 execute:3" {
		t.Fatalf("calls %q", h.keys())
	}
	if out.ExitCode != ExitWithIssues || !slices.Equal(out.Failed, []int{2}) || !slices.Equal(out.Completed, []int{1, 3}) {
		t.Fatalf("outcome %+v", out)
	}
	sum, _ := h.summary()
	if sum.ExitCode != 2 || !slices.Equal(sum.TasksFailed, []int{2}) || !slices.Equal(sum.TasksCompleted, []int{1, 3}) {
		t.Fatalf("summary %+v", sum)
	}
	if !slices.Equal(h.state().CompletedTaskIndices, []int{1, 3}) {
		t.Fatalf("state %+v", h.state())
	}
}

func TestConsecutiveFailureCap(t *testing.T) {
	t.Parallel()
	plan := "## Task 1\n## Task 2\n## Task 3\n## Task 4\n## Task 5\n"
	t.Run("stops at the cap", func(t *testing.T) {
		h := newHarness(t, plan)
		h.scenario(map[string][]fakes.Outcome{"plan:2": {fail}, "plan:3": {fail}})
		_, err := h.run("PEAL_CONTINUE_WITH_REMAINING_TASKS=true", "PEAL_MAX_CONSECUTIVE_TASK_FAILURES=2")
		var se *StoppedError
		if !errors.As(err, &se) || se.Failures != 2 {
			t.Fatalf("err = %v", err)
		}
		if h.keys() != "plan:1 execute:1 plan:2 plan:3" {
			t.Fatalf("calls %q", h.keys())
		}
		if !slices.Equal(h.state().CompletedTaskIndices, []int{1}) {
			t.Fatalf("state %+v", h.state())
		}
	})
	t.Run("a success resets the count", func(t *testing.T) {
		h := newHarness(t, plan)
		h.scenario(map[string][]fakes.Outcome{"plan:1": {fail}, "plan:3": {fail}, "plan:5": {fail}})
		out, err := h.run("PEAL_CONTINUE_WITH_REMAINING_TASKS=true", "PEAL_MAX_CONSECUTIVE_TASK_FAILURES=2")
		if err != nil || !slices.Equal(out.Failed, []int{1, 3, 5}) || out.ExitCode != ExitWithIssues {
			t.Fatalf("err %v, outcome %+v", err, out)
		}
	})
	t.Run("already completed tasks change nothing", func(t *testing.T) {
		h := newHarness(t, plan)
		h.scenario(map[string][]fakes.Outcome{"plan:1": {fail}, "plan:3": {fail}})
		writeState(t, h, []int{2})
		_, err := h.run("PEAL_CONTINUE_WITH_REMAINING_TASKS=true", "PEAL_MAX_CONSECUTIVE_TASK_FAILURES=2")
		var se *StoppedError
		if !errors.As(err, &se) || h.keys() != "plan:1 plan:3" {
			t.Fatalf("err %v, calls %q", err, h.keys())
		}
	})
	// As in Peal, the cap applies without continue_with_remaining_tasks too:
	// a cap of 1 and a failing first task stop the run (exit 3), not exit 1.
	t.Run("without continue_with_remaining_tasks", func(t *testing.T) {
		h := newHarness(t, plan)
		h.scenario(map[string][]fakes.Outcome{"plan:1": {fail}})
		_, err := h.run("PEAL_MAX_CONSECUTIVE_TASK_FAILURES=1")
		var se *StoppedError
		if !errors.As(err, &se) || se.Failures != 1 || h.keys() != "plan:1" {
			t.Fatalf("err %v, calls %q", err, h.keys())
		}
		// A cap not reached leaves the usual stop at the first failure.
		h2 := newHarness(t, plan)
		h2.scenario(map[string][]fakes.Outcome{"plan:1": {fail}})
		_, err = h2.run("PEAL_MAX_CONSECUTIVE_TASK_FAILURES=2")
		var te *TaskError
		if errors.As(err, &se) || !errors.As(err, &te) || te.Index != 1 {
			t.Fatalf("err %v", err)
		}
	})
}

func writeState(t *testing.T, h *harness, done []int) {
	t.Helper()
	st := state.State{PlanPath: h.plan, RepoPath: h.repo, CompletedTaskIndices: done}
	if err := state.WriteJSONAtomic(filepath.Join(h.stateDir, state.FileName), st); err != nil {
		t.Fatal(err)
	}
}

func TestResume(t *testing.T) {
	t.Parallel()
	h := newHarness(t, threeTasks)
	writeState(t, h, []int{1, 2})
	if _, err := h.run(); err != nil {
		t.Fatal(err)
	}
	if h.keys() != "plan:3 execute:3" || !slices.Equal(h.state().CompletedTaskIndices, []int{1, 2, 3}) {
		t.Fatalf("calls %q, state %+v", h.keys(), h.state())
	}
}

// TestStateOfAnotherPlanIsKept: a state folder that holds another plan's
// progress runs this plan from its start and keeps the other's, which a
// later run of that plan finds again.
func TestStateOfAnotherPlanIsKept(t *testing.T) {
	t.Parallel()
	h := newHarness(t, twoTasks)
	other := filepath.Join(h.tmp, "other.md")
	os.WriteFile(other, []byte(threeTasks), 0o644)
	st := state.State{PlanPath: other, RepoPath: h.repo, CompletedTaskIndices: []int{1, 2}}
	if err := state.WriteJSONAtomic(filepath.Join(h.stateDir, state.FileName), st); err != nil {
		t.Fatal(err)
	}
	if _, err := h.run(); err != nil {
		t.Fatal(err)
	}
	if h.keys() != "plan:1 execute:1 plan:2 execute:2" {
		t.Fatalf("calls %q; log:\n%s", h.keys(), h.log)
	}
	if st := h.state(); st.PlanPath != h.plan || !slices.Equal(st.CompletedTaskIndices, []int{1, 2}) {
		t.Fatalf("state %+v", st)
	}
	// The other plan resumes at its task 3.
	if _, err := h.run("PEAL_PLAN_PATH=" + other); err != nil {
		t.Fatal(err)
	}
	if h.keys() != "plan:1 execute:1 plan:2 execute:2 plan:3 execute:3" {
		t.Fatalf("calls %q", h.keys())
	}
	if st := h.state(); st.PlanPath != other || !slices.Equal(st.CompletedTaskIndices, []int{1, 2, 3}) {
		t.Fatalf("state %+v", st)
	}
}

// An unreadable state file is kept aside, never overwritten.
func TestCorruptStateKeptAside(t *testing.T) {
	t.Parallel()
	h := newHarness(t, twoTasks)
	os.MkdirAll(h.stateDir, 0o755)
	garbage := []byte("{not json")
	os.WriteFile(filepath.Join(h.stateDir, state.FileName), garbage, 0o644)
	if _, err := h.run(); err != nil {
		t.Fatal(err)
	}
	aside, _ := filepath.Glob(filepath.Join(h.stateDir, "state.json.corrupt-*"))
	if len(aside) != 1 {
		t.Fatalf("kept aside: %v", aside)
	}
	if data, _ := os.ReadFile(aside[0]); string(data) != string(garbage) {
		t.Fatalf("kept file holds %q", data)
	}
	if h.keys() != "plan:1 execute:1 plan:2 execute:2" || !slices.Equal(h.state().CompletedTaskIndices, []int{1, 2}) {
		t.Fatalf("calls %q", h.keys())
	}
}

// TestStateSavedBeforeEveryError lists the error paths of a run after a first
// completed task: each leaves state.json recording task 1.
func TestStateSavedBeforeEveryError(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		env   []string
		rules map[string][]fakes.Outcome
		setup func(h *harness)
	}{
		{"plan call fails", nil, map[string][]fakes.Outcome{"plan:2": {fail}}, nil},
		{"execute call fails", nil, map[string][]fakes.Outcome{"execute:2": {fail}}, nil},
		{"execute times out", []string{"PEAL_PHASE_TIMEOUT_SEC=1"}, map[string][]fakes.Outcome{"execute:2": {hang}}, nil},
		{"plan text invalid twice", []string{"PEAL_VALIDATE_PLAN_TEXT=true"}, map[string][]fakes.Outcome{"plan:2": {{NoStdout: true}}}, nil},
		{"commit fails", []string{"PEAL_COMMIT_AFTER_PHASE2=true"}, map[string][]fakes.Outcome{"execute:2": {{WriteFiles: map[string]string{"b.txt": "b"}}}}, func(h *harness) {
			hook := filepath.Join(h.repo, ".git", "hooks", "pre-commit")
			os.MkdirAll(filepath.Dir(hook), 0o755)
			// Only task 2's commit (which stages b.txt) is refused.
			os.WriteFile(hook, []byte("#!/bin/sh\ngit diff --cached --name-only | grep -q b.txt || exit 0\necho refused by hook >&2\nexit 1\n"), 0o755)
		}},
		{"consecutive failure cap", []string{"PEAL_CONTINUE_WITH_REMAINING_TASKS=true", "PEAL_MAX_CONSECUTIVE_TASK_FAILURES=1"}, map[string][]fakes.Outcome{"plan:2": {fail}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, threeTasks)
			h.scenario(tc.rules)
			if tc.setup != nil {
				tc.setup(h)
			}
			_, err := h.run(tc.env...)
			if err == nil {
				t.Fatal("run succeeded")
			}
			if !slices.Equal(h.state().CompletedTaskIndices, []int{1}) {
				t.Fatalf("state %+v after %v", h.state(), err)
			}
			if strings.Contains(h.keys(), ":3") {
				t.Fatalf("task 3 ran after the error: %q", h.keys())
			}
		})
	}
}

func TestInterruptedRunSavesState(t *testing.T) {
	t.Parallel()
	h := newHarness(t, threeTasks)
	ready := readyPipe(t)
	h.scenario(map[string][]fakes.Outcome{"execute:2": {{WriteFiles: map[string]string{ready: "x"}, Hang: true}}})
	cfg := h.config()
	r := startCfg(h, cfg)
	waitReady(t, ready)
	r.cancel(errors.New("SIGTERM"))
	if _, err := r.wait(t); !isInterrupted(err) {
		t.Fatalf("err = %v", err)
	}
	if !slices.Equal(h.state().CompletedTaskIndices, []int{1}) {
		t.Fatalf("state %+v", h.state())
	}
	if h.calls()[3].ID().Alive() {
		t.Fatal("agent alive after interruption")
	}
}

func TestCommitAfterPhase2(t *testing.T) {
	t.Parallel()
	h := newHarness(t, twoTasks)
	testgit.Git(t, h.repo, "commit", "-q", "--allow-empty", "-m", "root")
	h.scenario(map[string][]fakes.Outcome{
		"plan:1":    {{Stdout: "\n  Add the widget module with tests, carefully and completely, so that the line is longer than eighty characters\nsecond line"}},
		"execute:1": {{WriteFiles: map[string]string{"widget.go": "package widget\n"}}},
		// Task 2 changes nothing: "nothing to commit" is not an error.
	})
	out, err := h.run("PEAL_COMMIT_AFTER_PHASE2=true")
	if err != nil || out.ExitCode != 0 {
		t.Fatalf("err %v, outcome %+v", err, out)
	}
	subjects := strings.Split(testgit.Git(t, h.repo, "log", "--format=%s"), "\n")
	line := "Add the widget module with tests, carefully and completely, so that the line is longer than eighty characters"
	// As Peal: a first line longer than 80 characters keeps 77 and "...".
	want := "peal: task 1 - " + line[:77] + "..."
	if len(subjects) != 2 || subjects[0] != want {
		t.Fatalf("commits %q, want %q on top of root", subjects, want)
	}
	if files := testgit.Git(t, h.repo, "show", "--name-only", "--format=", "HEAD"); files != "widget.go" {
		t.Fatalf("committed files %q", files)
	}

	// An empty plan text gives the subject without a dash.
	h = newHarness(t, "## Task 1\nA\n")
	testgit.Git(t, h.repo, "commit", "-q", "--allow-empty", "-m", "root")
	h.scenario(map[string][]fakes.Outcome{
		"plan:1":    {{NoStdout: true}},
		"execute:1": {{WriteFiles: map[string]string{"a.txt": "a\n"}}},
	})
	if out, err := h.run("PEAL_COMMIT_AFTER_PHASE2=true"); err != nil || out.ExitCode != 0 {
		t.Fatalf("err %v, outcome %+v", err, out)
	}
	if got := testgit.Git(t, h.repo, "log", "-1", "--format=%s"); got != "peal: task 1" {
		t.Fatalf("subject %q", got)
	}
}

func TestPostRunCommands(t *testing.T) {
	t.Parallel()
	h := newHarness(t, twoTasks)
	// Confined as checks in the work tree: they write where checks may
	// (the harness's agent folder is in confine_write_paths).
	marker := filepath.Join(h.agentDir, "marker")
	summaryCopy := filepath.Join(h.agentDir, "summary-copy.json")
	env := []string{"PEAL_POST_RUN_COMMANDS=false, touch " + marker + ", cp " + filepath.Join(h.stateDir, "run_summary.json") + " " + summaryCopy +
		", echo post-run says hi, ls " + filepath.Join(h.tmp, "nonexistent")}
	if _, err := h.run(env...); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("post-run command did not run after a failing one")
	}
	if _, err := os.Stat(summaryCopy); err != nil {
		t.Fatal("post-run commands run before the summary is written")
	}
	if !strings.Contains(h.log.String(), "post-run command failed") {
		t.Fatal("a failing post-run command is not warned about")
	}
	// What a command prints is logged: at info when it succeeds, at warn
	// when it fails.
	if !strings.Contains(h.log.String(), `level=INFO msg="post-run stdout" command="echo post-run says hi" stdout="post-run says hi"`) {
		t.Fatalf("post-run stdout not logged:\n%s", h.log.String())
	}
	if !strings.Contains(h.log.String(), `level=WARN msg="post-run stderr" command="ls `+filepath.Join(h.tmp, "nonexistent")+`"`) {
		t.Fatalf("post-run stderr of a failure not logged:\n%s", h.log.String())
	}

	// Not after a hard failure.
	h2 := newHarness(t, twoTasks)
	h2.scenario(map[string][]fakes.Outcome{"plan:1": {fail}})
	marker2 := filepath.Join(h2.tmp, "marker")
	if _, err := h2.run("PEAL_POST_RUN_COMMANDS=touch " + marker2); err == nil {
		t.Fatal("run succeeded")
	}
	if _, err := os.Stat(marker2); err == nil {
		t.Fatal("post-run command ran after a hard failure")
	}
}

func TestTaskSelection(t *testing.T) {
	t.Parallel()
	h := newHarness(t, threeTasks)
	cfg := h.config()
	two := uint32(2)
	cfg.Task = &two
	if _, err := h.runCfg(cfg); err != nil {
		t.Fatal(err)
	}
	if h.keys() != "plan:2 execute:2" {
		t.Fatalf("--task 2 ran %q", h.keys())
	}
	h = newHarness(t, threeTasks)
	cfg = h.config()
	cfg.FromTask = &two
	if _, err := h.runCfg(cfg); err != nil || h.keys() != "plan:2 execute:2 plan:3 execute:3" {
		t.Fatalf("--from-task 2 ran %q, err %v", h.keys(), err)
	}
}

func TestPlanErrorsRunNothing(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, plan string
		env        []string
		selectTask uint32
		want       string
	}{
		{"no task heading", "# Plan\nJust prose.\n", nil, 0, "no `## Task N` heading"},
		{"empty plan", "  \n\n", []string{"PEAL_NORMALIZE_PLAN=true"}, 0, "is empty"},
		{"unknown --task", twoTasks, nil, 7, "--task 7"},
		{"duplicate task", "## Task 1\n## Task 1\n", nil, 0, "more than once"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.plan)
			cfg := h.config(tc.env...)
			if tc.selectTask != 0 {
				cfg.Task = &tc.selectTask
			}
			_, err := h.runCfg(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if len(h.calls()) != 0 {
				t.Fatalf("agent called: %q", h.keys())
			}
			if _, err := os.Stat(h.stateDir); err == nil {
				t.Fatal("state folder written for bad input")
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	prose := "# Ideas\nWe should add A and then B.\n"
	good := fakes.Outcome{Stdout: "## Task 1\nAdd A\n## Task 2\nAdd B\n"}
	bad := fakes.Outcome{Stdout: "Sure! Here are some thoughts about the document."}
	cases := []struct {
		name    string
		env     []string
		outs    []fakes.Outcome
		want    string
		wantErr string
	}{
		{"converted once", nil, []fakes.Outcome{good}, "normalize plan:1 execute:1 plan:2 execute:2", ""},
		{"retried when no task", []string{"PEAL_NORMALIZE_RETRY_COUNT=1"}, []fakes.Outcome{bad, good}, "normalize normalize plan:1 execute:1 plan:2 execute:2", ""},
		{"exhausted", []string{"PEAL_NORMALIZE_RETRY_COUNT=1"}, []fakes.Outcome{bad}, "normalize normalize", "Sure! Here are some thoughts"},
		{"call failure", nil, []fakes.Outcome{fail}, "normalize", "could not be normalized"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, prose)
			h.scenario(map[string][]fakes.Outcome{"normalize": tc.outs})
			_, err := h.run(append([]string{"PEAL_NORMALIZE_PLAN=true"}, tc.env...)...)
			if h.keys() != tc.want {
				t.Fatalf("calls %q, want %q", h.keys(), tc.want)
			}
			if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
	t.Run("custom prompt", func(t *testing.T) {
		h := newHarness(t, prose)
		h.scenario(map[string][]fakes.Outcome{"normalize": {good}})
		tmpl := filepath.Join(h.tmp, "norm.txt")
		os.WriteFile(tmpl, []byte("CONVERT THIS: {{DOC}} END"), 0o644)
		if _, err := h.run("PEAL_NORMALIZE_PLAN=true", "PEAL_NORMALIZE_PROMPT_PATH="+tmpl); err != nil {
			t.Fatal(err)
		}
		c := h.calls()[0]
		if got := c.Argv[len(c.Argv)-1]; got != "CONVERT THIS: "+prose+" END" || !slices.Contains(c.Argv, "--plan") {
			t.Fatalf("normalize argv %q", c.Argv)
		}
	})
}

// readyPipe makes a named pipe: a fake writing to it (write_files) is the
// event a test waits on, with no sleeping or polling. It is made in the
// test's pipes folder, which a confined call may write.
func readyPipe(t *testing.T) string {
	t.Helper()
	f, err := os.MkdirTemp(pipes(t), "pipe-")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(f, "ready")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

var pipesDirs sync.Map // *testing.T → its pipes folder

// pipes is the folder of the test's named pipes, which its runs let
// confined calls write (confine_write_paths).
func pipes(t *testing.T) string {
	if d, ok := pipesDirs.Load(t); ok {
		return d.(string)
	}
	// Not t.TempDir(): its name holds the test's, whose commas would
	// split the list of confine_write_paths.
	d, err := os.MkdirTemp("", "peal-pipes-")
	if err != nil {
		t.Fatal(err)
	}
	pipesDirs.Store(t, d)
	t.Cleanup(func() {
		pipesDirs.Delete(t)
		os.RemoveAll(d)
	})
	return d
}

// waitReady blocks until a fake has written to the pipe; the deadline only
// guards against a hang.
func waitReady(t *testing.T, p string) {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		_, err := os.ReadFile(p)
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the fake never became ready")
	}
}

// TestSequentialTaskPanic: a panic inside a task is that task's failure, not
// a crash: the state is saved and, under continue_with_remaining_tasks, the
// run goes on.
func TestSequentialTaskPanic(t *testing.T) {
	t.Parallel()
	boom := withTaskStart(func(task plan.Task) {
		if task.Index == 2 {
			panic("boom")
		}
	})
	h := newHarness(t, threeTasks)
	h.extra = append(h.extra, boom)
	out, err := h.run("PEAL_CONTINUE_WITH_REMAINING_TASKS=true")
	if err != nil || !slices.Equal(out.Failed, []int{2}) || !slices.Equal(out.Completed, []int{1, 3}) {
		t.Fatalf("err %v, outcome %+v", err, out)
	}
	if !strings.Contains(h.log.String(), "task panicked") {
		t.Fatal("the panic was not logged")
	}
	h2 := newHarness(t, threeTasks)
	h2.extra = append(h2.extra, boom)
	if _, err := h2.run(); err == nil || !strings.Contains(err.Error(), "panic: boom") {
		t.Fatalf("err = %v", err)
	}
	if !slices.Equal(h2.state().CompletedTaskIndices, []int{1}) {
		t.Fatalf("state %+v", h2.state())
	}
}

// TestPostRunTimeout: a post-run command past post_run_timeout_sec is stopped
// with a warning; the run still succeeds.
func TestPostRunTimeout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	start := time.Now()
	out, err := h.run("PEAL_POST_RUN_COMMANDS=sleep 60", "PEAL_POST_RUN_TIMEOUT_SEC=1")
	if err != nil || out.ExitCode != ExitOK {
		t.Fatalf("err %v, outcome %+v", err, out)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("post-run command not stopped: %s", took)
	}
	if !strings.Contains(h.log.String(), "post-run command failed") || !strings.Contains(h.log.String(), "timed out after 1 s") {
		t.Fatalf("no timeout warning:\n%s", h.log)
	}
}

// TestPostRunSignalsAndSweep: a signal during the post-run commands ends the run as
// interrupted (never exit 0); while they run, the state folder is free and
// the next run on it neither waits for them nor takes them for what a dead
// run left; and the idle timeout, which is for agents, does not stop a
// silent command.
func TestPostRunSignalsAndSweep(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	ready := readyPipe(t)
	// The plain fake as the post-run command: the key of a call of no phase
	// and no task is "execute".
	h.scenario(map[string][]fakes.Outcome{"execute:1": {{}}, "execute": {{WriteFiles: map[string]string{ready: "x"}, Hang: true}}})
	cfg := h.config("PEAL_POST_RUN_COMMANDS="+fakeAgent, "PEAL_IDLE_TIMEOUT_SEC=1")
	r := startCfg(h, cfg)
	waitReady(t, ready)
	post := h.calls()[len(h.calls())-1]
	if post.Key != "execute" {
		t.Fatalf("calls %q", h.keys())
	}
	// A second run meanwhile: nothing to do, and the post-run command of
	// the first is none of its business.
	if out, err := h.runCfg(h.config()); err != nil || len(out.Completed) != 0 || !slices.Equal(out.AlreadyCompleted, []int{1}) {
		t.Fatalf("second run: %v %+v", err, out)
	}
	if !post.ID().Alive() {
		t.Fatal("the second run stopped the first run's post-run command")
	}
	r.cancel(errors.New("SIGINT"))
	if _, err := r.wait(t); !isInterrupted(err) {
		t.Fatalf("a signal during the post-run commands: err = %v", err)
	}
}

// TestPostRunNotIdle: the idle timeout, which is for agents, does not stop a
// silent post-run command (a build may well print nothing for a while).
func TestPostRunNotIdle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	h.scenario(map[string][]fakes.Outcome{"execute:1": {{}}, "execute": {{NoStdout: true, SleepMS: 2500}}})
	if _, err := h.run("PEAL_POST_RUN_COMMANDS="+fakeAgent, "PEAL_IDLE_TIMEOUT_SEC=1"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(h.log.String(), "post-run command failed") {
		t.Fatalf("a silent post-run command was stopped:\n%s", h.log)
	}
}

// TestSummaryWriteFailureIsAWarning: a run summary that cannot be written
// changes nothing but a warning.
func TestSummaryWriteFailureIsAWarning(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	blocker := filepath.Join(h.tmp, "summary.json") // a folder where the file goes
	os.Mkdir(blocker, 0o755)
	out, err := h.run("PEAL_RUN_SUMMARY_PATH=" + blocker)
	if err != nil || out.ExitCode != ExitOK || !slices.Equal(h.state().CompletedTaskIndices, []int{1}) {
		t.Fatalf("err %v, outcome %+v", err, out)
	}
	if !strings.Contains(h.log.String(), "could not write the run summary") {
		t.Fatalf("no warning:\n%s", h.log)
	}
}

// withEnv adds variables to the environment of every child the run starts
// (agent, stet, git and post-run commands), on top of peal's own.
func withEnv(kv ...string) Option {
	return func(s *settings) { s.env = append(s.env, kv...) }
}
