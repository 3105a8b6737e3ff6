package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"peal/internal/procs"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
	"peal/internal/text"
	"peal/review"
	"peal/state"
	"peal/tickets"
	"peal/worktree"
)

// statusCheck fails, with statusFailure as its last line, while status.txt
// says broken, as a test suite fails on a broken build.
const (
	statusCheck   = `if grep -q broken status.txt 2>/dev/null; then echo "=== RUN TestStatus"; echo "--- FAIL: TestStatus (status.txt is broken)"; exit 1; fi`
	statusFailure = "--- FAIL: TestStatus (status.txt is broken)"
	lintCheck     = `echo "lint, vet: ok"`
)

var (
	breaks = writes("status.txt", "broken\n")
	// fixesWhenShown repairs status.txt only when its prompt quotes the
	// failing check's output.
	fixesWhenShown = fakes.Outcome{WhenPrompt: &fakes.PromptWrites{Contains: statusFailure, WriteFiles: map[string]string{"status.txt": "fixed\n"}}}
)

// checksEnv is the variable that sets the checks, one per line.
func checksEnv(cmds ...string) string { return "PEAL_CHECK_COMMANDS=" + strings.Join(cmds, "\n") }

// checkEvents are the run record's check lines, as "stage[round]:task
// command-index outcome" strings, in order.
func (h *harness) checkEvents(cmds ...string) []string {
	h.t.Helper()
	events, _, err := state.ReadRecord(filepath.Join(h.stateDir, state.RecordName))
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, ev := range events {
		if ev.Ev != state.EvCheck {
			continue
		}
		outcome := "pass"
		switch {
		case ev.Interrupted:
			outcome = "interrupted"
		case ev.TimedOut:
			outcome = "timeout"
		case ev.ExitCode == nil || *ev.ExitCode != 0:
			outcome = "fail"
		}
		stage := ev.Stage
		if ev.Round > 0 {
			stage += strconv.Itoa(ev.Round)
		}
		out = append(out, fmt.Sprintf("%s:%d #%d %s", stage, *ev.Task, slices.Index(cmds, ev.Command)+1, outcome))
	}
	return out
}

// prompt is what the agent was asked in its n-th call of key (from 1).
func (h *harness) prompt(key string, n int) string {
	h.t.Helper()
	for _, c := range h.calls() {
		if c.Key != key {
			continue
		}
		if n--; n == 0 {
			if c.Stdin != "" {
				return c.Stdin
			}
			return c.Argv[len(c.Argv)-1]
		}
	}
	h.t.Fatalf("no call %d of %s", n, key)
	return ""
}

// TestChecksDriveTheAddressLoop: without stet, the project's checks alone
// make Phase 3. A check that the execute broke goes to the agent, its
// command, result and output quoted; the agent fixes it from that output;
// the checks run once after the execute and once after the round, and the
// task completes.
func TestChecksDriveTheAddressLoop(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	h.scenario(map[string][]fakes.Outcome{"execute": {breaks}, "address": {fixesWhenShown}})
	out, err := h.run(checksEnv(statusCheck, lintCheck))
	if err != nil {
		t.Fatalf("%v\n%s", err, h.log.String())
	}
	if got := h.keys(); got != "plan:1 execute:1 address:1" {
		t.Fatalf("calls %q", got)
	}
	if out.ExitCode != ExitOK || !slices.Equal(out.Completed, []int{1}) || len(out.ChecksFailing) != 0 || len(out.ChecksFailed) != 0 {
		t.Fatalf("outcome %+v", out)
	}
	if got, want := h.checkEvents(statusCheck, lintCheck), []string{
		"start:-1 #1 pass", "start:-1 #2 pass", "execute:1 #1 fail", "execute:1 #2 pass", "address1:1 #1 pass", "address1:1 #2 pass",
	}; !slices.Equal(got, want) {
		t.Fatalf("checks %q\nwant   %q", got, want)
	}
	prompt := h.prompt("address:1", 1)
	for _, want := range []string{"---CHECK---\ncommand: " + statusCheck + "\nresult: exited with status 1\noutput:\n=== RUN TestStatus\n" + statusFailure + "\n---CHECK---"} {
		if !strings.Contains(prompt, want) {
			t.Fatalf("the address prompt lacks %q:\n%s", want, prompt)
		}
	}
	if strings.Contains(prompt, "---STET---") || strings.Contains(prompt, lintCheck) {
		t.Fatalf("the address prompt holds a review or a passing check:\n%s", prompt)
	}
	if fileIn(t, h.repo, "status.txt") != "fixed\n" {
		t.Fatal("the fix is not in the tree")
	}
	if a := lastAttempt(t, h, h.ticket(1)); a.Status != tickets.AttemptClosed {
		t.Fatalf("attempt %+v", a)
	}
}

// TestCheckEnvironment: a check runs through sh -c in the task's tree with
// the variables of an agent call of the task.
func TestCheckEnvironment(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 2\nA\n")
	envCheck := `echo "$PWD|$PEAL_PHASE|$PEAL_TASK_INDEX|$PEAL_TICKET_ID|${PEAL_CALL_ID:+call}" >> env.log`
	if _, err := h.run(checksEnv(envCheck)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(fileIn(t, h.repo, "env.log")), "\n")
	want := []string{h.workDir() + "|check|||call", fmt.Sprintf("%s|check|2|%s|call", h.workDir(), h.ticket(2))}
	if !slices.Equal(lines, want) {
		t.Fatalf("env.log %q, want %q", lines, want)
	}
}

// TestCheckThatNeverPasses: a check that still fails after the last round
// is what on_findings_remaining decides, as findings are: fail names the
// command and its last line, and the ticket's attempt ends blocked with
// the check in its close summary; warn completes the task, exit 2; defer
// leaves it for the next run; plateau_rounds ends the loop early.
func TestCheckThatNeverPasses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		env       []string
		wantCalls string
		wantErr   bool
		check     func(t *testing.T, h *harness, out Outcome)
	}{
		{"fail", []string{"PEAL_MAX_ADDRESS_ROUNDS=2"}, "plan:1 execute:1 address:1 address:1", true, nil},
		{"warn", []string{"PEAL_MAX_ADDRESS_ROUNDS=1", "PEAL_ON_FINDINGS_REMAINING=warn"}, "plan:1 execute:1 address:1", false,
			func(t *testing.T, h *harness, out Outcome) {
				if !slices.Equal(out.WithFindings, []int{1}) || !slices.Equal(h.state().CompletedTaskIndices, []int{1}) {
					t.Fatalf("outcome %+v, state %+v", out, h.state())
				}
			}},
		{"defer", []string{"PEAL_MAX_ADDRESS_ROUNDS=1", "PEAL_ON_FINDINGS_REMAINING=defer"}, "plan:1 execute:1 address:1", false,
			func(t *testing.T, h *harness, out Outcome) {
				if !slices.Equal(out.Deferred, []int{1}) || len(h.state().CompletedTaskIndices) != 0 {
					t.Fatalf("outcome %+v, state %+v", out, h.state())
				}
			}},
		{"plateau", []string{"PEAL_MAX_ADDRESS_ROUNDS=5", "PEAL_PLATEAU_ROUNDS=2", "PEAL_ON_FINDINGS_REMAINING=warn"}, "plan:1 execute:1 address:1 address:1", false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "## Task 1\nA\n")
			h.scenario(map[string][]fakes.Outcome{"execute": {breaks}})
			out, err := h.run(append(tc.env, checksEnv(statusCheck))...)
			if got := h.keys(); got != tc.wantCalls {
				t.Fatalf("calls %q, want %q", got, tc.wantCalls)
			}
			a := lastAttempt(t, h, h.ticket(1))
			summary, rerr := os.ReadFile(filepath.Join(h.knowledge(), "tickets", h.ticket(1), "close-summary.md"))
			if a.Status != tickets.AttemptBlocked || rerr != nil || !strings.Contains(string(summary), "**BLOCKED**") ||
				!strings.Contains(string(summary), "## Failed Checks\n- `"+statusCheck+"` exited with status 1: "+statusFailure+"\n") {
				t.Fatalf("attempt %+v, close summary (%v):\n%s", a, rerr, summary)
			}
			if tc.wantErr {
				var fe *review.FindingsRemainingError
				if !errors.As(err, &fe) || len(fe.Checks) != 1 ||
					!strings.Contains(err.Error(), "checks still fail after 2 address round(s)") ||
					!strings.Contains(err.Error(), "`"+text.Snippet(statusCheck, 80)+"` exited with status 1: "+statusFailure) ||
					strings.Contains(err.Error(), "finding(s) remain") {
					t.Fatalf("err = %v", err)
				}
				if len(h.state().CompletedTaskIndices) != 0 {
					t.Fatal("a task whose checks fail is saved as completed")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// A deferred task's work is kept on a branch and the work tree
			// put back: the final tree passes; under warn its work stays.
			failing := []string{statusCheck}
			if tc.name == "defer" {
				failing = []string{}
			}
			if out.ExitCode != ExitWithIssues || !slices.Equal(out.ChecksFailed, []int{1}) || !slices.Equal(out.ChecksFailing, failing) {
				t.Fatalf("outcome %+v", out)
			}
			if sum, ok := h.summary(); !ok || !slices.Equal(sum.TasksChecksFailed, []int{1}) || !slices.Equal(sum.ChecksFailing, failing) {
				t.Fatalf("summary %+v", sum)
			}
			if tc.check != nil {
				tc.check(t, h, out)
			}
		})
	}
}

// TestRedStart: checks that fail on the starting tree are said in one line
// before the first agent call and charged to no task: no address round for
// them. A task that makes them pass clears them and the run ends with exit
// 0; while they still fail, it ends with exit 2.
func TestRedStart(t *testing.T) {
	t.Parallel()
	for _, fixed := range []bool{true, false} {
		t.Run(fmt.Sprintf("fixed=%v", fixed), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, twoTasks)
			os.WriteFile(filepath.Join(h.repo, "status.txt"), []byte("broken\n"), 0o644)
			rules := map[string][]fakes.Outcome{"execute:1": {writes("one.txt", "1")}}
			if fixed {
				rules["execute:2"] = []fakes.Outcome{writes("status.txt", "fixed\n")}
			}
			h.scenario(rules)
			out, err := h.run(checksEnv(statusCheck))
			if err != nil {
				t.Fatal(err)
			}
			if got := h.keys(); got != "plan:1 execute:1 plan:2 execute:2" {
				t.Fatalf("calls %q: a check that failed before the tasks was charged to one", got)
			}
			log := h.log.String()
			red := strings.Index(log, "checks fail on the starting tree, before any task")
			if red < 0 || red > strings.Index(log, `msg="starting call" phase=plan`) || !strings.Contains(log[red:], statusFailure) {
				t.Fatalf("the red start is not said before the first agent call:\n%s", log)
			}
			if fixed {
				if out.ExitCode != ExitOK || len(out.ChecksFailing) != 0 {
					t.Fatalf("outcome %+v", out)
				}
				return
			}
			if out.ExitCode != ExitWithIssues || !slices.Equal(out.ChecksFailing, []string{statusCheck}) || len(out.ChecksFailed) != 0 ||
				!slices.Equal(out.Completed, []int{1, 2}) {
				t.Fatalf("outcome %+v", out)
			}
		})
	}
}

// TestRerunStartsWhereTheTaskBegan: a task that failed has its broken
// work kept on a branch and the work tree put back as it was before it, the
// note of its unfinished work with it; the re-run finds the checks passing
// on the starting tree and runs the task again from there.
func TestRerunStartsWhereTheTaskBegan(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	h.scenario(map[string][]fakes.Outcome{"execute": {breaks}, "address": {fail}})
	if _, err := h.run(checksEnv(statusCheck)); err == nil {
		t.Fatal("the first run should fail")
	}
	if _, err := os.Stat(filepath.Join(h.stateDir, state.ChecksNoteName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the note of the unfinished task outlived the work tree's putting back: %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.repo, "status.txt")); !errors.Is(err, os.ErrNotExist) || len(keptBranches(t, h)) != 1 {
		t.Fatalf("kept %q, status.txt: %v", keptBranches(t, h), err)
	}
	first := len(h.calls())
	h.scenario(map[string][]fakes.Outcome{"execute": {breaks}, "address": {fixesWhenShown}})
	out, err := h.run(checksEnv(statusCheck))
	if err != nil || out.ExitCode != ExitOK || !slices.Equal(out.Completed, []int{1}) {
		t.Fatalf("err %v, outcome %+v\n%s", err, out, h.log.String())
	}
	if got := strings.Join(fakes.Keys(h.calls()[first:]), " "); got != "plan:1 execute:1 address:1" {
		t.Fatalf("re-run calls %q", got)
	}
	if strings.Contains(h.log.String(), "which holds the unfinished work of task 1") {
		t.Fatalf("the re-run finds unfinished work in the tree:\n%s", h.log.String())
	}
}

// TestChecksAfterAFailedTask: under continue_with_remaining_tasks a task
// that failed has its work kept on a branch, and the work tree is put back
// as it was before it: the checks say what they said then, without
// running again, and the next task is not charged with what the failed one
// broke.
func TestChecksAfterAFailedTask(t *testing.T) {
	t.Parallel()
	h := newHarness(t, twoTasks)
	h.scenario(map[string][]fakes.Outcome{"execute:1": {breaks}, "address:1": {fail}, "execute:2": {writes("two.txt", "2")}})
	out, err := h.run(checksEnv(statusCheck), "PEAL_CONTINUE_WITH_REMAINING_TASKS=true")
	if err != nil || !slices.Equal(out.Failed, []int{1}) || !slices.Equal(out.Completed, []int{2}) || out.ExitCode != ExitWithIssues {
		t.Fatalf("err %v, outcome %+v", err, out)
	}
	if got := h.keys(); got != "plan:1 execute:1 address:1 plan:2 execute:2" {
		t.Fatalf("calls %q", got)
	}
	if got, want := h.checkEvents(statusCheck), []string{"start:-1 #1 pass", "execute:1 #1 fail", "execute:2 #1 pass"}; !slices.Equal(got, want) {
		t.Fatalf("checks %q\nwant   %q", got, want)
	}
	if len(out.ChecksFailing) != 0 || len(keptBranches(t, h)) != 1 {
		t.Fatalf("outcome %+v, kept %q", out, keptBranches(t, h))
	}
}

// TestCheckTimesOut: a check that hangs is stopped at check_timeout_sec,
// with what it started, and goes to the agent named as timed out.
func TestCheckTimesOut(t *testing.T) {
	t.Parallel()
	// check_timeout_sec bounds a check; unset, phase_timeout_sec does.
	for _, limit := range []string{"PEAL_CHECK_TIMEOUT_SEC=1", "PEAL_PHASE_TIMEOUT_SEC=1"} {
		t.Run(limit, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "## Task 1\nA\n")
			hangCheck := `if grep -q hang mode.txt 2>/dev/null; then echo waiting for the server; sleep 60 & echo ` + fakes.LastJobID + ` > sleep.pid; wait; fi`
			h.scenario(map[string][]fakes.Outcome{
				"execute": {writes("mode.txt", "hang\n")},
				"address": {{WhenPrompt: &fakes.PromptWrites{Contains: "result: timed out after 1 s\noutput:\nwaiting for the server", WriteFiles: map[string]string{"mode.txt": "ok\n"}}}},
			})
			out, err := h.run(checksEnv(hangCheck), limit)
			if err != nil || !slices.Equal(out.Completed, []int{1}) {
				t.Fatalf("err %v, outcome %+v\n%s", err, out, h.log.String())
			}
			if got, want := h.checkEvents(hangCheck), []string{"start:-1 #1 pass", "execute:1 #1 timeout", "address1:1 #1 pass"}; !slices.Equal(got, want) {
				t.Fatalf("checks %q", got)
			}
			id, err := procs.ParseID(fileIn(t, h.repo, "sleep.pid"))
			if err != nil || id.Alive() {
				t.Fatalf("what the check started (%v, %v) outlived its timeout", id, err)
			}
		})
	}
}

// TestSignalDuringACheck: a signal while a check runs stops it and what it
// started; the task is not completed, its attempt stays in progress, and
// the run ends as interrupted.
func TestSignalDuringACheck(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	running := readyPipe(t)
	slow := fmt.Sprintf(`if [ -f go.txt ]; then sleep 60 & echo `+fakes.LastJobID+` > sleep.pid; echo > %q; wait; fi`, running)
	h.scenario(map[string][]fakes.Outcome{"execute": {writes("go.txt", "1")}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		waitReady(t, running)
		cancel()
	}()
	_, err := h.runCtx(ctx, h.config(checksEnv(slow)))
	if !isInterrupted(err) {
		t.Fatalf("err = %v", err)
	}
	// The interrupted task's work (the check's note with it) is kept on a
	// branch.
	kept := keptBranches(t, h)
	if len(kept) != 1 {
		t.Fatalf("kept %q", kept)
	}
	id, err := procs.ParseID(testgit.Git(t, h.repo, "show", kept[0]+":sleep.pid"))
	if err != nil || id.Alive() {
		t.Fatalf("what the check started (%v, %v) outlived the signal", id, err)
	}
	if len(h.state().CompletedTaskIndices) != 0 {
		t.Fatal("an interrupted task is saved as completed")
	}
	if a := lastAttempt(t, h, h.ticket(1)); a.Status != tickets.AttemptInProgress {
		t.Fatalf("attempt %+v", a)
	}
	if got := h.checkEvents(slow); !slices.Equal(got, []string{"start:-1 #1 pass", "execute:1 #1 interrupted"}) {
		t.Fatalf("checks %q", got)
	}
}

// TestChecksWithStet: with stet, the round's review and the checks both
// run, and the agent gets the findings and the failing check in one
// address call; triage never sets a failing check aside.
func TestChecksWithStet(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	env := h.withStet(fakes.StetScenario{})
	finding := fakes.Finding{ID: "F001", File: "a.go", Severity: "warning", Message: "unused variable"}
	h.scenario(map[string][]fakes.Outcome{
		"execute": {{Plant: []fakes.Finding{finding}, WriteFiles: map[string]string{"status.txt": "broken\n"}}},
		"triage":  {{Stdout: "Nothing to address."}},
		"address": {{StetFix: -1, WhenPrompt: fixesWhenShown.WhenPrompt}},
	})
	out, err := h.run(append(env, checksEnv(statusCheck))...)
	if err != nil || !slices.Equal(out.Completed, []int{1}) {
		t.Fatalf("err %v, outcome %+v\n%s", err, out, h.log.String())
	}
	// Triage dismissed the finding; the failing check still went to the
	// agent, alone.
	if got := h.keys(); got != "plan:1 execute:1 triage:1 address:1" {
		t.Fatalf("calls %q", got)
	}
	if p := h.prompt("address:1", 1); strings.Contains(p, "---STET---") || !strings.Contains(p, statusFailure) {
		t.Fatalf("address prompt:\n%s", p)
	}
	if got := h.checkEvents(statusCheck); !slices.Equal(got, []string{"start:-1 #1 pass", "execute:1 #1 fail", "address1:1 #1 pass"}) {
		t.Fatalf("checks %q", got)
	}

	// Without a triage that dismisses, both go to the agent in one call.
	h2 := newHarness(t, "## Task 1\nA\n")
	env = h2.withStet(fakes.StetScenario{})
	h2.scenario(map[string][]fakes.Outcome{
		"execute": {{Plant: []fakes.Finding{finding}, WriteFiles: map[string]string{"status.txt": "broken\n"}}},
		"triage":  {{Stdout: "F001 needs a fix."}},
		"address": {{StetFix: -1, WhenPrompt: fixesWhenShown.WhenPrompt}},
	})
	if out, err := h2.run(append(env, checksEnv(statusCheck))...); err != nil || !slices.Equal(out.Completed, []int{1}) {
		t.Fatalf("err %v, outcome %+v", err, out)
	}
	if got := h2.keys(); got != "plan:1 execute:1 triage:1 address:1" {
		t.Fatalf("calls %q", got)
	}
	if p := h2.prompt("address:1", 1); !strings.Contains(p, "---STET---") || !strings.Contains(p, "unused variable") || !strings.Contains(p, "---CHECK---") || !strings.Contains(p, statusFailure) {
		t.Fatalf("address prompt:\n%s", p)
	}

	// Dismiss patterns that match the check's command and output set the
	// finding aside, never the check.
	h3 := newHarness(t, "## Task 1\nA\n")
	env = h3.withStet(fakes.StetScenario{})
	h3.scenario(map[string][]fakes.Outcome{
		"execute": {{Plant: []fakes.Finding{finding}, WriteFiles: map[string]string{"status.txt": "broken\n"}}},
		"address": {fixesWhenShown},
	})
	env = append(env, checksEnv(statusCheck), "PEAL_STET_DISABLE_LLM_TRIAGE=true", "PEAL_STET_DISMISS_PATTERNS=status.txt|out_of_scope,a.go|out_of_scope,TestStatus|false_positive")
	if out, err := h3.run(env...); err != nil || !slices.Equal(out.Completed, []int{1}) {
		t.Fatalf("err %v, outcome %+v", err, out)
	}
	if p := h3.prompt("address:1", 1); strings.Contains(p, "---STET---") || !strings.Contains(p, statusFailure) {
		t.Fatalf("address prompt:\n%s", p)
	}
}

// apiCheck fails when caller.txt calls another version of the API than
// api.txt holds: two tasks that each pass alone (one moves the API, one
// adds a caller of the old one) fail together.
const apiCheck = `if [ -f caller.txt ] && [ "$(cat caller.txt)" != "calls $(cat api.txt)" ]; then echo "--- FAIL: TestCaller: caller.txt $(cat caller.txt), api.txt $(cat api.txt)"; exit 1; fi`

// TestMergedTreeFailsTheChecks: two tasks of a parallel block pass their
// checks alone, each in its worktree, but the tree fails them once both are
// merged: the second merge is undone and its work kept, and the task runs
// again alone on the merged work, where its checks and address loop see the
// combination, and completes. The run never completes a task whose merged
// tree fails, and ends on a tree that passes.
func TestMergedTreeFailsTheChecks(t *testing.T) {
	t.Parallel()
	h := isolatedHarness(t, parallelPlan("pp"))
	os.WriteFile(filepath.Join(h.repo, "api.txt"), []byte("v1"), 0o644)
	testgit.Git(t, h.repo, "add", "api.txt")
	testgit.Git(t, h.repo, "commit", "-q", "-m", "api v1")
	h.scenario(map[string][]fakes.Outcome{
		"execute:1": {writes("api.txt", "v2")},
		"execute:2": {writes("caller.txt", "calls v1")},
		"address:2": {{WhenPrompt: &fakes.PromptWrites{Contains: "--- FAIL: TestCaller: caller.txt calls v1, api.txt v2", WriteFiles: map[string]string{"caller.txt": "calls v2"}}}},
	})
	out, err := h.run("PEAL_MAX_PARALLEL=2", checksEnv(apiCheck))
	if err != nil || out.ExitCode != ExitOK || !slices.Equal(out.Completed, []int{1, 2}) {
		t.Fatalf("err %v, outcome %+v\n%s", err, out, h.log.String())
	}
	if fileIn(t, h.repo, "api.txt") != "v2" || fileIn(t, h.repo, "caller.txt") != "calls v2" {
		t.Fatal("the work tree does not hold both tasks' work, fixed")
	}
	if err := exec.Command("sh", "-c", "cd "+h.repo+" && "+apiCheck).Run(); err != nil {
		t.Fatalf("the final tree fails the check: %v", err)
	}
	kept := keptBranches(t, h)
	if len(kept) != 1 || !strings.HasPrefix(kept[0], worktree.KeptPrefix+"task-2-") {
		t.Fatalf("kept branches %q", kept)
	}
	var task2 []string
	for _, c := range h.calls() {
		if c.Task == "2" {
			task2 = append(task2, c.Phase)
		}
	}
	if got := strings.Join(task2, " "); got != "plan execute plan execute address" {
		t.Fatalf("task 2's calls %q", got)
	}
	if got, want := h.checkEvents(apiCheck), []string{
		"start:-1 #1 pass", "execute:1 #1 pass", "execute:2 #1 pass", "merge:1 #1 pass", "merge:2 #1 fail",
		"execute:2 #1 fail", "address1:2 #1 pass",
	}; !sameChecks(got, want) {
		t.Fatalf("checks %q\nwant   %q", got, want)
	}
	events, _, _ := state.ReadRecord(filepath.Join(h.stateDir, state.RecordName))
	var merges []string
	for _, ev := range events {
		if ev.Ev == state.EvMerge {
			merges = append(merges, fmt.Sprintf("%d %s %s %v", *ev.Task, ev.Result, ev.Kept, ev.Checks))
		}
	}
	if want := []string{"1 merged  []", fmt.Sprintf("2 checks_failed %s [%s]", kept[0], apiCheck)}; !slices.Equal(merges, want) {
		t.Fatalf("merges %q\nwant   %q", merges, want)
	}
	sum, _ := h.summary()
	if len(sum.ParallelTasks) != 2 || !slices.Equal(sum.ParallelTasks[1].Checks, []string{apiCheck}) || sum.ParallelTasks[1].Merged {
		t.Fatalf("summary's parallel tasks %+v", sum.ParallelTasks)
	}
	if _, err := os.Stat(filepath.Join(h.stateDir, worktree.Folder, "merging")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the merging record outlived the block: %v", err)
	}
	if left := leftovers(t, h); len(left) > 0 {
		t.Fatalf("left behind: %q", left)
	}
}

// sameChecks compares check events where the tasks of a parallel block may
// run in any order: the order within each task (and of the merges) counts.
func sameChecks(got, want []string) bool {
	by := func(list []string) map[string][]string {
		m := map[string][]string{}
		for _, e := range list {
			stage, rest, _ := strings.Cut(e, ":")
			task, _, _ := strings.Cut(rest, " ")
			key := task
			if stage == "merge" {
				key = "merge"
			}
			m[key] = append(m[key], e)
		}
		return m
	}
	g, w := by(got), by(want)
	if len(got) != len(want) || len(g) != len(w) {
		return false
	}
	for k, list := range w {
		if !slices.Equal(g[k], list) {
			return false
		}
	}
	return true
}

// TestCheckOnTheLiveLine: a running check is a call the live line shows,
// its task, which check of how many, its command and when it runs.
func TestCheckOnTheLiveLine(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	var obs observedCalls
	h.extra = append(h.extra, WithObserver(&obs))
	if _, err := h.run(checksEnv("go version", lintCheck)); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, c := range obs.calls {
		if c.Phase == "check" {
			lines = append(lines, fmt.Sprintf("%d %s", c.Task, c.Detail()))
		}
	}
	want := []string{"-1 1/2 go version on the starting tree", "-1 2/2 " + lintCheck + " on the starting tree",
		"1 1/2 go version after execute", "1 2/2 " + lintCheck + " after execute"}
	if !slices.Equal(lines, want) {
		t.Fatalf("live lines %q\nwant %q", lines, want)
	}
}

// TestCheckOutputInAgentLogs: with agent_log_dir, the whole output of each
// check is kept in a file of its own, which the run record names.
func TestCheckOutputInAgentLogs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	logs := filepath.Join(h.tmp, "logs")
	long := `i=0; while [ $i -lt 500 ]; do echo "line $i"; i=$((i+1)); done; echo to-stderr >&2; exit 3`
	h.scenario(map[string][]fakes.Outcome{"address": {ok}})
	if _, err := h.run(checksEnv(long), "PEAL_AGENT_LOG_DIR="+logs, "PEAL_MAX_ADDRESS_ROUNDS=0", "PEAL_ON_FINDINGS_REMAINING=warn"); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(logs, "*-task-1-check-call-*-attempt-1.output.log"))
	if len(files) != 1 {
		t.Fatalf("check logs %q", files)
	}
	data, _ := os.ReadFile(files[0])
	if !strings.HasPrefix(string(data), "line 0\n") || !strings.HasSuffix(string(data), "line 499\nto-stderr\n") {
		t.Fatalf("the log does not hold the whole output: %d bytes", len(data))
	}
	events, _, _ := state.ReadRecord(filepath.Join(h.stateDir, state.RecordName))
	named := false
	for _, ev := range events {
		named = named || ev.Ev == state.EvCallStart && ev.Phase == "check" && ev.StdoutLog == files[0]
	}
	if !named {
		t.Fatal("the run record does not name the check's log")
	}
}

// TestUncheckedMergeOfAKilledRun: a run killed while the merged tree's
// checks ran left the task's work merged but the task not completed; the
// next run undoes that merge (keeping the work on a branch) and runs the
// task again, so that no unchecked work stays in the tree as if done.
func TestUncheckedMergeOfAKilledRun(t *testing.T) {
	t.Parallel()
	h := isolatedHarness(t, parallelPlan("pp"))
	scope := state.CallScope(h.stateDir)
	before := strings.TrimSpace(testgit.Git(t, h.repo, "rev-parse", "HEAD"))
	wt := leaveTaskWorktree(t, h, 1)
	os.WriteFile(filepath.Join(wt, "one.txt"), []byte("left unchecked\n"), 0o644)
	testgit.Git(t, wt, "add", "one.txt")
	testgit.Git(t, wt, "commit", "-q", "-m", "work")
	testgit.Git(t, h.repo, "merge", "--no-ff", "-q", "-m", "peal: merge task 1", fmt.Sprintf("peal-%s/task-1", scope))
	record := fmt.Sprintf(`{"task":1,"branch":"peal-%s/task-1","before":%q}`, scope, before)
	os.WriteFile(filepath.Join(h.stateDir, worktree.Folder, "merging"), []byte(record), 0o644)

	h.scenario(map[string][]fakes.Outcome{"execute:1": {writes("one.txt", "1")}, "execute:2": {writes("two.txt", "2")}})
	out, err := h.run("PEAL_MAX_PARALLEL=2", checksEnv(lintCheck))
	if err != nil || !slices.Equal(out.Completed, []int{1, 2}) {
		t.Fatalf("err %v, outcome %+v\n%s", err, out, h.log.String())
	}
	if fileIn(t, h.repo, "one.txt") != "1" {
		t.Fatal("the unchecked merge was not undone before the task ran again")
	}
	kept := keptBranches(t, h)
	if len(kept) != 1 || !strings.HasPrefix(kept[0], worktree.KeptPrefix+"task-1-") ||
		strings.TrimSpace(testgit.Git(t, h.repo, "show", kept[0]+":one.txt")) != "left unchecked" {
		t.Fatalf("the unchecked work is not kept: %q", kept)
	}
	if !strings.Contains(h.log.String(), "undoing the merge of a task an earlier run left before its checks had passed") {
		t.Fatalf("log:\n%s", h.log.String())
	}
	if left := leftovers(t, h); len(left) > 0 {
		t.Fatalf("left behind: %q", left)
	}
}

// TestAddressRoundInAWorktreeIsMerged: a task of a parallel block whose
// check fails after its execute is fixed in an address round in its
// worktree; that fix is committed on its branch (without stet and without
// commit_after_phase2) and merged with the rest of its work, so the merged
// tree passes at once.
func TestAddressRoundInAWorktreeIsMerged(t *testing.T) {
	t.Parallel()
	h := isolatedHarness(t, parallelPlan("pp"))
	h.scenario(map[string][]fakes.Outcome{
		"execute:1": {breaks},
		"address:1": {fixesWhenShown},
		"execute:2": {writes("two.txt", "2")},
	})
	out, err := h.run("PEAL_MAX_PARALLEL=2", checksEnv(statusCheck))
	if err != nil || out.ExitCode != ExitOK || !slices.Equal(out.Completed, []int{1, 2}) {
		t.Fatalf("err %v, outcome %+v\n%s", err, out, h.log.String())
	}
	if fileIn(t, h.repo, "status.txt") != "fixed\n" || len(keptBranches(t, h)) != 0 {
		t.Fatalf("the fix of the address round was not merged: status.txt %q, kept %q", fileIn(t, h.repo, "status.txt"), keptBranches(t, h))
	}
	if got := h.checkEvents(statusCheck); !sameChecks(got, []string{"start:-1 #1 pass", "execute:1 #1 fail", "address1:1 #1 pass", "execute:2 #1 pass", "merge:1 #1 pass", "merge:2 #1 pass"}) {
		t.Fatalf("checks %q", got)
	}
}

// TestStaleNoteOfACompletedTask: a note of an unfinished task whose task is
// recorded as completed (a run ended between the two) is dropped, and the
// next task that starts is noted until the work tree is put back as it was
// before it (it failed): then no work of it is left unfinished there.
func TestStaleNoteOfACompletedTask(t *testing.T) {
	t.Parallel()
	h := newHarness(t, twoTasks)
	writeState(t, h, []int{1})
	os.MkdirAll(h.stateDir, 0o755)
	os.WriteFile(filepath.Join(h.stateDir, state.ChecksNoteName), []byte(`{"task":1,"failing_before":[]}`), 0o644)
	h.scenario(map[string][]fakes.Outcome{"execute:2": {breaks}, "address:2": {fail}})
	if _, err := h.run(checksEnv(statusCheck)); err == nil {
		t.Fatal("task 2 should fail")
	}
	if strings.Contains(h.log.String(), "holds the unfinished work of task 1") {
		t.Fatalf("the stale note was taken for unfinished work:\n%s", h.log.String())
	}
	if _, err := os.Stat(filepath.Join(h.stateDir, state.ChecksNoteName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the note outlived the putting back of task 2's work: %v", err)
	}
}

// TestTicketModeBlockedByChecks: with one ticket for the whole run, a task
// left with a failing check (warn) blocks the run's ticket, whose close
// summary names the check.
func TestTicketModeBlockedByChecks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, twoTasks)
	h.scenario(map[string][]fakes.Outcome{"execute:1": {breaks}})
	out, err := h.run(checksEnv(statusCheck), "PEAL_TICKET_ID=pt-run", "PEAL_MAX_ADDRESS_ROUNDS=1", "PEAL_ON_FINDINGS_REMAINING=warn")
	if err != nil || !slices.Equal(out.WithFindings, []int{1}) || !slices.Equal(out.Completed, []int{2}) {
		t.Fatalf("err %v, outcome %+v", err, out)
	}
	if a := lastAttempt(t, h, "pt-run"); a.Status != tickets.AttemptBlocked {
		t.Fatalf("attempt %+v", a)
	}
	summary, _ := os.ReadFile(filepath.Join(h.knowledge(), "tickets", "pt-run", "close-summary.md"))
	if !strings.Contains(string(summary), "## Failed Checks\n- `"+statusCheck+"` exited with status 1: "+statusFailure) {
		t.Fatalf("close summary:\n%s", summary)
	}
}

// TestChecksInASparseWorktree: in a sparse worktree a check that needs a
// file outside the set fails before the task starts; the task is not
// charged with it (no address round), and the merged tree's checks, on the
// whole tree, decide its merge.
func TestChecksInASparseWorktree(t *testing.T) {
	t.Parallel()
	h := sparseHarness(t, parallelPlan("pp"))
	needsB := `test -f b/f.txt || { echo "FAIL: b/f.txt is missing"; exit 1; }`
	h.scenario(map[string][]fakes.Outcome{"execute:1": {writes("a/one.txt", "1")}, "execute:2": {writes("a/two.txt", "2")}})
	out, err := h.run("PEAL_MAX_PARALLEL=2", "PEAL_WORKTREE_SPARSE_PATHS=a", checksEnv(needsB))
	if err != nil || out.ExitCode != ExitOK || !slices.Equal(out.Completed, []int{1, 2}) {
		t.Fatalf("err %v, outcome %+v\n%s", err, out, h.log.String())
	}
	if got := h.keys(); strings.Contains(got, "address") {
		t.Fatalf("calls %q: a check that fails for want of the files outside the set was charged", got)
	}
	if got, want := h.checkEvents(needsB), []string{
		"start:-1 #1 pass", "before:1 #1 fail", "execute:1 #1 fail", "before:2 #1 fail", "execute:2 #1 fail", "merge:1 #1 pass", "merge:2 #1 pass",
	}; !sameChecks(got, want) {
		t.Fatalf("checks %q\nwant   %q", got, want)
	}
}
