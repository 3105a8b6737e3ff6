package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"peal/config"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
	"peal/runner"
	"peal/state"
	"peal/tickets"
)

// ticket is the id of task i's ticket under the default ticket prefix.
func (s *sandbox) ticket(i int) string {
	return fmt.Sprintf("%s-%d", config.DefaultTicketPrefix(s.plan, s.repo), i)
}

// TestStatus puts each task of a plan in another status and reads them back.
func TestStatus(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nA\n## Task 2\nB\n## Task 3\nC\n## Task 4\nD\n## Task 5\nE\n")
	stetDir := filepath.Join(s.dir, "stet")
	os.MkdirAll(stetDir, 0o755)
	fakes.WriteStetScenario(stetDir, fakes.StetScenario{})
	// Task 3 is left with findings.
	s.scenario(map[string][]fakes.Outcome{"execute:2": {{Exit: 1}}, "execute:3": {{Plant: []fakes.Finding{{ID: "F001", File: "a.go", Severity: "warning", Message: "m"}}}}})
	env := s.env("FAKE_STET_DIR="+stetDir, "PEAL_STET_PATH="+bins["fakestet"], "PEAL_ESCALATION_ENABLED=true", "PEAL_ESCALATION_MAX_RETRIES=2")
	env = append(env, testgit.Env...)
	s.git(env, "commit", "-q", "--allow-empty", "-m", "root")

	if r := s.peal(env, "run", "--task", "1"); r.code != 0 {
		t.Fatalf("task 1: %d %s", r.code, r.stderr)
	}
	if r := s.peal(env, "run", "--task", "2"); r.code != 1 {
		t.Fatalf("task 2: %d %s", r.code, r.stderr)
	}
	// Task 3 is left with findings and deferred.
	if r := s.peal(append(env, "PEAL_ON_FINDINGS_REMAINING=defer", "PEAL_MAX_ADDRESS_ROUNDS=1"), "run", "--task", "3"); r.code != 2 {
		t.Fatalf("task 3: %d %s", r.code, r.stderr)
	}
	// Task 4's ticket used up its retries.
	store := tickets.NewStore(filepath.Join(s.stateDir, "knowledge"))
	defer store.Close()
	tk, err := store.Open(s.ticket(4), time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		tk.Begin(time.Now(), nil)
		tk.Complete(time.Now(), tickets.AttemptBlocked, nil)
	}
	tk.Close()

	r := s.peal(env, "status", "--json")
	if r.code != 0 {
		t.Fatalf("status: %d %s", r.code, r.stderr)
	}
	var report struct {
		Tasks []struct {
			Index             int    `json:"index"`
			Status            string `json:"status"`
			Ticket            string `json:"ticket"`
			Attempts          int    `json:"attempts"`
			RetryCount        int    `json:"retry_count"`
			LastAttemptStatus string `json:"last_attempt_status"`
		} `json:"tasks"`
		LastRun *struct {
			ExitCode      int   `json:"exit_code"`
			TasksDeferred []int `json:"tasks_deferred"`
		} `json:"last_run"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &report); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	want := []struct {
		status, last string
		attempts, rc int
	}{{"completed", "closed", 1, 0}, {"failed", "error", 1, 0}, {"deferred", "blocked", 1, 1}, {"skipped", "blocked", 2, 2}, {"pending", "", 0, 0}}
	for i, w := range want {
		got := report.Tasks[i]
		if got.Index != i+1 || got.Status != w.status || got.LastAttemptStatus != w.last || got.Attempts != w.attempts || got.RetryCount != w.rc || got.Ticket != s.ticket(i+1) {
			t.Errorf("task %d: %+v, want %+v", i+1, got, w)
		}
	}
	if report.LastRun == nil || report.LastRun.ExitCode != 2 || !slices.Equal(report.LastRun.TasksDeferred, []int{3}) {
		t.Fatalf("last run %+v", report.LastRun)
	}
	r = s.peal(env, "status")
	if r.code != 0 || !strings.Contains(r.stdout, "skipped") || !lastRunLine.MatchString(r.stdout) {
		t.Fatalf("table: %s", r.stdout)
	}
}

// lastRunLine is what status says of the last run of TestStatus (task 3
// alone, deferred): what happened, no empty list.
var lastRunLine = regexp.MustCompile(`\nlast run: exit 2 at \S+: task 3 deferred\n`)

// TestSummariesNameWhatHappened: the line a run ends with and status's
// last run name the tasks of each outcome there was, and no other.
func TestSummariesNameWhatHappened(t *testing.T) {
	t.Parallel()
	s := &state.RunSummary{TasksCompleted: []int{3}, TasksAlreadyCompleted: []int{1, 2}, TasksFailed: []int{4, 5}}
	if got, want := lastRunText(s), "task 3 completed; tasks 4, 5 failed (tasks 1, 2 completed before it)"; got != want {
		t.Errorf("last run %q, want %q", got, want)
	}
	if got, want := lastRunText(&state.RunSummary{TasksAlreadyCompleted: []int{1}}), "nothing to do (task 1 completed before it)"; got != want {
		t.Errorf("last run %q, want %q", got, want)
	}
	code, line := ending(context.Background(), &config.Config{RunSummaryPath: "/s/run_summary.json"},
		runner.Outcome{ExitCode: runner.ExitWithIssues, Failed: []int{2}, Deferred: []int{4, 5}, ChecksFailing: []string{"go vet ./..."}}, nil)
	if want := "finished with issues: task 2 failed; tasks 4, 5 deferred; the final tree fails the checks `go vet ./...` (summary: /s/run_summary.json)"; code != 2 || line != want {
		t.Errorf("ending %d %q, want %q", code, line, want)
	}
}

// TestStatusDuringARun: while a run goes on, status says so (and calls
// the summary of the run before it by that name); once it was killed, that
// it stopped without ending; after a run that failed hard, how it ended.
func TestStatusDuringARun(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, plan3)
	env := s.env()
	if r := s.peal(env, "run", "--task", "1"); r.code != 0 {
		t.Fatalf("first run: exit %d\n%s", r.code, r.stderr)
	}
	ready := filepath.Join(s.agentDir, "ready") // where a confined call may write
	if err := syscall.Mkfifo(ready, 0o644); err != nil {
		t.Fatal(err)
	}
	s.scenario(map[string][]fakes.Outcome{"execute:2": {{WriteFiles: map[string]string{ready: "x"}, Hang: true}}})
	cmd := exec.Command(bins["peal"], "run")
	cmd.Dir, cmd.Env = s.dir, env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(ready); err != nil { // blocks until task 2's execute runs
		t.Fatal(err)
	}
	r := s.peal(env, "status")
	now := regexp.MustCompile(fmt.Sprintf("\nnow: a run is going on \\(pid %d, started at \\S+\\): `peal report` tells it so far\nrun before it: exit 0 at \\S+: task 1 completed\n$", cmd.Process.Pid))
	if r.code != 0 || !now.MatchString(r.stdout) || strings.Contains(r.stdout, "no run summary") {
		t.Fatalf("status during the run: exit %d\n%s", r.code, r.stdout)
	}
	cmd.Process.Kill()
	cmd.Wait()
	calls, _ := fakes.ReadCalls(s.agentDir)
	starts := fakes.Starts(calls)
	starts[len(starts)-1].ID().Kill() // the orphaned agent
	r = s.peal(env, "status")
	if !regexp.MustCompile("\nlast run: started at \\S+, stopped without ending \\(killed, or the machine stopped\\) after \\S+; its completed tasks are saved, and `peal report` names the calls it cut off\n$").MatchString(r.stdout) {
		t.Fatalf("status after the kill:\n%s", r.stdout)
	}
	s.scenario(map[string][]fakes.Outcome{"plan:2": {fail}})
	if r := s.peal(env, "run"); r.code != 1 {
		t.Fatalf("failing run: exit %d\n%s", r.code, r.stderr)
	}
	r = s.peal(env, "status")
	if !regexp.MustCompile("\nlast run: exit 1 at \\S+: error: task 2: plan failed after 1 attempt: plan call exited with status 1: agent broke\n$").MatchString(r.stdout) {
		t.Fatalf("status after a run that failed hard:\n%s", r.stdout)
	}
}

// TestStatusListsWhatWasKept: `peal status` lists what peal keeps for the
// user in the repository (here the work of a task that failed, on a branch,
// with the commands to look at it and take it), also once the state folder
// is removed to start over, and no longer once the user deleted the
// branch.
func TestStatusListsWhatWasKept(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nA\n")
	env := append(s.env(), testgit.Env...)
	s.git(env, "commit", "-q", "--allow-empty", "-m", "root")
	s.scenario(map[string][]fakes.Outcome{"execute:1": {{WriteFiles: map[string]string{"half.txt": "half\n"}, Exit: 1}}})
	if r := s.peal(env, "run"); r.code != 1 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	branch := strings.TrimSpace(s.git(env, "for-each-ref", "--format=%(refname:short)", "refs/heads/peal-kept/"))
	if !strings.HasPrefix(branch, "peal-kept/task-1-") {
		t.Fatalf("kept %q", branch)
	}
	want := "kept for you (in the repository: removing the state folder keeps them):\n  task 1's work is kept on branch " + branch + ", not on your branch"
	for _, when := range []string{"after the run", "after the state folder was removed"} {
		r := s.peal(env, "status")
		if r.code != 0 || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "take it with git merge "+branch) {
			t.Fatalf("%s: exit %d:\n%s%s", when, r.code, r.stdout, r.stderr)
		}
		os.RemoveAll(s.stateDir)
	}
	s.git(env, "branch", "-q", "-D", branch)
	if r := s.peal(env, "status"); r.code != 0 || strings.Contains(r.stdout, "kept for you") {
		t.Fatalf("a deleted branch is still listed: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}
