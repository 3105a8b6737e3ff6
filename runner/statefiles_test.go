package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"peal/plan"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"peal/config"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/safefstest"
	"peal/state"
	"peal/tickets"
)

// TestSecondRunOnTheStateFolderStopsAtOnce holds run A at the moment its
// task 1 has ended its ticket's attempt but is not yet recorded in
// state.json: the window in which a second run used to read "task 1 not
// done", take the free ticket and run the task again. Run B must stop at
// once, before any call, and every task must run exactly once.
func TestSecondRunOnTheStateFolderStopsAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, twoTasks)
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hold := func(s *settings) {
		s.ticketClosed = func(task plan.Task) {
			if task.Index == 1 {
				once.Do(func() { close(held); <-release })
			}
		}
	}
	a := startCfg(h, h.config(), hold)
	select {
	case <-held:
	case <-time.After(60 * time.Second):
		t.Fatal("run A never reached the end of task 1")
	}
	_, err := h.runCfg(h.config())
	close(release)
	if !errors.Is(err, state.ErrStateLocked) || !strings.Contains(err.Error(), h.stateDir) {
		t.Errorf("run B: %v", err)
	}
	if _, err := a.wait(t); err != nil {
		t.Fatalf("run A: %v", err)
	}
	if got := h.keys(); got != "plan:1 execute:1 plan:2 execute:2" {
		t.Fatalf("calls %q: a task ran twice or not at all", got)
	}
	if st := h.state(); !slices.Equal(st.CompletedTaskIndices, []int{1, 2}) {
		t.Fatalf("state %+v", st)
	}
}

// TestTicketModeFailureIsAnError: in ticket mode a failed run ends its
// attempt as error, leaves the retry count and the ticket's status alone and
// writes no close summary.
func TestTicketModeFailureIsAnError(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	h.scenario(map[string][]fakes.Outcome{"execute": plants(twoFindings()...)})
	stet := append(h.withStet(fakes.StetScenario{}), "PEAL_MAX_ADDRESS_ROUNDS=1", "PEAL_TICKET_ID=pt-fail")
	// Attempt 1 is blocked by its findings: one retry used.
	if _, err := h.run(stet...); !isFindingsRemaining(err) {
		t.Fatalf("run 1: %v", err)
	}
	summary := filepath.Join(h.knowledge(), "tickets", "pt-fail", tickets.CloseSummaryFile)
	before, err := os.ReadFile(summary)
	if err != nil || !strings.Contains(string(before), "**BLOCKED**") {
		t.Fatalf("close summary after the block: %q, %v", before, err)
	}
	for run, phase := range []string{"execute", "plan"} {
		h.scenario(map[string][]fakes.Outcome{phase: {fail}})
		if _, err := h.run(stet...); err == nil || isFindingsRemaining(err) {
			t.Fatalf("run %d: %v", run+2, err)
		}
		st := retryState(t, h, "pt-fail")
		a := st.Attempts[len(st.Attempts)-1]
		if len(st.Attempts) != run+2 || a.Status != tickets.AttemptError || a.Trigger == "" || a.CompletedAt == "" {
			t.Fatalf("run %d: attempt %+v", run+2, a)
		}
		if st.RetryCount != 1 || st.Status != tickets.TicketActive {
			t.Fatalf("run %d: retry count %d, status %s; the failure must change neither", run+2, st.RetryCount, st.Status)
		}
		if after, _ := os.ReadFile(summary); string(after) != string(before) {
			t.Fatalf("run %d rewrote the close summary:\n%s", run+2, after)
		}
	}
}

// TestReadOnlyFoldersStopBeforeAnyCall: a state folder or a store peal
// cannot write to is found before the first agent call (here a plan's
// normalization), not after the agent has worked.
func TestReadOnlyFoldersStopBeforeAnyCall(t *testing.T) {
	t.Parallel()
	prose := "# Plan\nJust prose to normalize.\n"
	t.Run("state folder", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, prose)
		// An earlier run left its lock file: the lock alone would not
		// notice that nothing new can be written.
		os.MkdirAll(h.stateDir, 0o755)
		os.WriteFile(filepath.Join(h.stateDir, state.LockName), nil, 0o644)
		safefstest.ReadOnly(t, h.stateDir)
		_, err := h.run("PEAL_NORMALIZE_PLAN=true")
		if err == nil || !strings.Contains(err.Error(), "state folder "+h.stateDir+" cannot be written to") {
			t.Fatalf("err %v", err)
		}
		if len(h.calls()) != 0 {
			t.Fatalf("agent called: %s", h.keys())
		}
	})
	t.Run("store", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, prose)
		store := filepath.Join(h.tmp, "store")
		os.MkdirAll(filepath.Join(store, "tickets"), 0o755)
		safefstest.ReadOnly(t, filepath.Join(store, "tickets"))
		_, err := h.run("PEAL_NORMALIZE_PLAN=true", "PEAL_KNOWLEDGE_DIR="+store)
		if err == nil || !strings.Contains(err.Error(), "retry-state store "+store+" cannot be written to") {
			t.Fatalf("err %v", err)
		}
		if len(h.calls()) != 0 {
			t.Fatalf("agent called: %s", h.keys())
		}
	})
}

// TestFIFOStateFileStopsTheRun: a named pipe at state.json is refused at
// once instead of blocking the run.
func TestFIFOStateFileStopsTheRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, twoTasks)
	os.MkdirAll(h.stateDir, 0o755)
	if err := syscall.Mkfifo(filepath.Join(h.stateDir, state.FileName), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := h.run()
	if err == nil || !strings.Contains(err.Error(), "is a named pipe (FIFO), not a regular file") || len(h.calls()) != 0 {
		t.Fatalf("err %v, calls %q", err, h.keys())
	}
}

// TestSummaryAfterReruns: tasks_completed lists the tasks the run itself
// completed, tasks_already_completed those earlier runs had: after a re-run
// that finishes the plan, and after one with nothing left to do.
func TestSummaryAfterReruns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, threeTasks)
	h.scenario(map[string][]fakes.Outcome{"execute:2": {{Exit: 1, Stderr: "broke"}, {}}})
	if _, err := h.run(); err == nil {
		t.Fatal("the first run did not fail at task 2")
	}
	check := func(run string, completed, already []int) {
		t.Helper()
		sum, found := h.summary()
		if !found || !slices.Equal(sum.TasksCompleted, completed) || !slices.Equal(sum.TasksAlreadyCompleted, already) || sum.ExitCode != 0 {
			t.Fatalf("%s: summary %+v, want tasks_completed %v and tasks_already_completed %v", run, sum, completed, already)
		}
	}
	out, err := h.run()
	if err != nil || out.ExitCode != ExitOK || !slices.Equal(out.Completed, []int{2, 3}) || !slices.Equal(out.AlreadyCompleted, []int{1}) {
		t.Fatalf("re-run: %+v, %v", out, err)
	}
	check("re-run", []int{2, 3}, []int{1})
	out, err = h.run()
	if err != nil || out.ExitCode != ExitOK || len(out.Completed) != 0 || !slices.Equal(out.AlreadyCompleted, []int{1, 2, 3}) {
		t.Fatalf("run with nothing to do: %+v, %v", out, err)
	}
	check("run with nothing to do", []int{}, []int{1, 2, 3})
	data, err := os.ReadFile(filepath.Join(h.stateDir, "run_summary.json"))
	if err != nil || !strings.Contains(string(data), `"tasks_completed": []`) {
		t.Fatalf("summary %s: an empty list is written as []", data)
	}
	if got := h.keys(); got != "plan:1 execute:1 plan:2 execute:2 plan:2 execute:2 plan:3 execute:3" {
		t.Fatalf("calls %q", got)
	}
}

// TestPlansDoNotShareTickets: x/plan.md and y/plan.md used to share the
// tickets plan-1, plan-2…, so one plan's failures counted against the
// other's tasks.
func TestPlansDoNotShareTickets(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "")
	x, y := filepath.Join(h.tmp, "x", "plan.md"), filepath.Join(h.tmp, "y", "plan.md")
	for _, p := range []string{x, y} {
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("## Task 1\nA\n"), 0o644)
	}
	h.scenario(map[string][]fakes.Outcome{"execute": {fail}})
	if _, err := h.run("PEAL_PLAN_PATH=" + x); err == nil {
		t.Fatal("the failing run succeeded")
	}
	h.scenario(nil)
	if _, err := h.run("PEAL_PLAN_PATH=" + y); err != nil {
		t.Fatal(err)
	}
	cx, cy := h.config("PEAL_PLAN_PATH="+x), h.config("PEAL_PLAN_PATH="+y)
	if cx.TicketPrefix == cy.TicketPrefix {
		t.Fatalf("both plans use the prefix %q", cx.TicketPrefix)
	}
	if a := lastAttempt(t, h, cx.TicketPrefix+"-1"); a.AttemptNumber != 1 || a.Status != tickets.AttemptError {
		t.Errorf("x's ticket: %+v", a)
	}
	if a := lastAttempt(t, h, cy.TicketPrefix+"-1"); a.AttemptNumber != 1 || a.Trigger != tickets.TriggerInitial || a.Status != tickets.AttemptClosed {
		t.Errorf("y's ticket: %+v", a)
	}
	for _, c := range h.calls() {
		if id := c.Env["PEAL_TICKET_ID"]; id != cx.TicketPrefix+"-1" && id != cy.TicketPrefix+"-1" {
			t.Errorf("%s saw PEAL_TICKET_ID=%q", c.Key, id)
		}
	}
}

// TestPealStateFileResumes: a state.json written by Peal, with the relative
// paths of its command line and members peal does not use, resumes when
// peal is run with the same arguments from the same folder, and keeps them.
func TestPealStateFileResumes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, twoTasks)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	relPlan, _ := filepath.Rel(wd, h.plan)
	relRepo, _ := filepath.Rel(wd, h.repo)
	os.MkdirAll(h.stateDir, 0o755)
	peal, _ := json.MarshalIndent(map[string]any{
		"plan_path": relPlan, "repo_path": relRepo, "completed_task_indices": []int{1},
		"last_completed_ref": "abc123", "last_plan_by_task": map[string]string{"1": "plan text"},
	}, "", "  ")
	os.WriteFile(filepath.Join(h.stateDir, state.FileName), peal, 0o644)
	if _, err := h.run(); err != nil {
		t.Fatal(err)
	}
	if got := h.keys(); got != "plan:2 execute:2" {
		t.Fatalf("calls %q", got)
	}
	var doc map[string]any
	data, _ := os.ReadFile(filepath.Join(h.stateDir, state.FileName))
	json.Unmarshal(data, &doc)
	if doc["plan_path"] != relPlan || doc["repo_path"] != relRepo || doc["last_completed_ref"] != "abc123" || doc["last_plan_by_task"] == nil {
		t.Fatalf("state.json lost Peal's members:\n%s", data)
	}
	if st := h.state(); !slices.Equal(st.CompletedTaskIndices, []int{1, 2}) {
		t.Fatalf("state %+v", st)
	}
}

// TestSecondRunOnTheRepositoryStopsAtOnce: a run of another plan, with a
// state folder of its own, on a repository another run is using stops at
// once, before any call, with one line naming the other run; the first
// run ends as if alone, and the repository is free again after it.
func TestSecondRunOnTheRepositoryStopsAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, twoTasks)
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hold := func(s *settings) {
		s.taskStart = func(task plan.Task) { once.Do(func() { close(held); <-release }) }
	}
	a := startCfg(h, h.config(), hold)
	select {
	case <-held:
	case <-time.After(60 * time.Second):
		t.Fatal("run A never started its first task")
	}
	// The same plan with a state folder of its own: refused, without a
	// word of removing the folder the running run uses.
	fresh := filepath.Join(h.tmp, "fresh-state")
	cfgFresh, err := config.Load(config.Inputs{Env: append(h.configEnv(), "PEAL_STATE_DIR="+fresh)})
	if err == nil {
		err = cfgFresh.Validate()
	}
	if want := fmt.Sprintf("holds none: a peal run is using that folder now (pid %d, started ", os.Getpid()); err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "remove") {
		t.Errorf("a fresh state folder while a run uses the plan's: %v", err)
	}
	other := filepath.Join(h.tmp, "other.md")
	os.WriteFile(other, []byte("## Task 1\nZ\n"), 0o644)
	otherState := filepath.Join(h.tmp, "other-state")
	cfgB := h.config("PEAL_PLAN_PATH="+other, "PEAL_STATE_DIR="+otherState)
	_, err = h.runCfg(cfgB)
	close(release)
	want := fmt.Sprintf("repository %s is in use by another peal run (pid %d, plan %s, state folder %s, started ", h.repo, os.Getpid(), h.plan, h.stateDir)
	if !errors.Is(err, state.ErrRepoInUse) || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("run B: %v\nwant %s…", err, want)
	}
	if _, err := a.wait(t); err != nil {
		t.Fatalf("run A: %v", err)
	}
	if got := h.keys(); got != "plan:1 execute:1 plan:2 execute:2" {
		t.Fatalf("calls %q: run B called the agent", got)
	}
	if _, err := h.runCfg(cfgB); err != nil {
		t.Fatalf("run B after run A: %v", err)
	}
}
