package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"peal/config"
	"peal/internal/fakes"
	"peal/internal/testgit"
	"peal/state"
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
	store := state.NewTicketStore(filepath.Join(s.stateDir, "knowledge"))
	defer store.Close()
	tk, err := store.OpenTicket(s.ticket(4), time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		tk.Begin(time.Now(), nil)
		tk.Complete(time.Now(), state.AttemptBlocked, nil)
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
	if r.code != 0 || !strings.Contains(r.stdout, "skipped") || !strings.Contains(r.stdout, "last run: exit 2") {
		t.Fatalf("table: %s", r.stdout)
	}
}
