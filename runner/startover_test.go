package runner

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"peal/internal/testkit/fakes"
	"peal/report"
)

// TestStartOverAfterRemovingTheStateFolder: removing the state folder
// starts the plan over, and the first run after it works, whatever the
// last run left registered in git (the run's worktree and its branch).
func TestStartOverAfterRemovingTheStateFolder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, twoTasks)
	if _, err := h.run(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(h.stateDir); err != nil {
		t.Fatal(err)
	}
	out, err := h.run()
	if err != nil {
		t.Fatalf("the first run after the state folder was removed: %v\n%s", err, h.log.String())
	}
	if got := h.keys(); got != "plan:1 execute:1 plan:2 execute:2 plan:1 execute:1 plan:2 execute:2" {
		t.Fatalf("calls %q", got)
	}
	if out.ExitCode != ExitOK {
		t.Fatalf("outcome %+v", out)
	}
}

// TestTasksKnownByText: a task is known by its text, not its number. After
// a plan ran, an inserted task runs (and the task it pushed down does not
// run again), a completed task whose text changed runs again, a removed or
// moved one runs nothing; `peal status` tells the change before the run,
// and the run's start says it in one line.
func TestTasksKnownByText(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, edited string
		calls        string
		completed    []int
		line         string
		status       []string
	}{
		{"inserted", "## Task 1\nwrite A\n## Task 2\nwrite NEW\n## Task 3\nwrite B\n", "plan:2 execute:2", []int{1, 2, 3},
			"the plan changed since its last run: task 2 new; renumbered 2→3 (each keeps its state and ticket)", []string{"completed", "pending", "completed"}},
		{"text changed", "## Task 1\nwrite A, then test it\n## Task 2\nwrite B\n", "plan:1 execute:1", []int{1, 2},
			"the plan changed since its last run: task 1 changed (it was done for the old text: it runs again)", []string{"pending", "completed"}},
		{"moved and appended", "## Task 1\nwrite B\n## Task 2\nwrite A\n## Task 12\nwrite C\n", "plan:12 execute:12", []int{1, 2, 12},
			"the plan changed since its last run: task 12 new; renumbered 2→1, 1→2 (each keeps its state and ticket)", []string{"completed", "completed", "pending"}},
		{"removed", "## Task 2\nwrite B\n", "", []int{2},
			"the plan changed since its last run: task 1 of the last run removed", []string{"completed"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "## Task 1\nwrite A\n## Task 2\nwrite B\n")
			if _, err := h.run(); err != nil {
				t.Fatal(err)
			}
			before := h.keys()
			if err := os.WriteFile(h.plan, []byte(tc.edited), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg := h.config()
			report, _, err := report.Status(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var statuses []string
			for _, ts := range report.Tasks {
				statuses = append(statuses, ts.Status)
			}
			if report.Changes != tc.line || !slices.Equal(statuses, tc.status) {
				t.Errorf("status before the run: %q %v\nwant %q %v", report.Changes, statuses, tc.line, tc.status)
			}
			out, err := h.runCfg(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(strings.TrimPrefix(h.keys(), before)); got != tc.calls {
				t.Errorf("calls of the second run %q, want %q", got, tc.calls)
			}
			if st := h.state(); !slices.Equal(st.CompletedTaskIndices, tc.completed) || out.ExitCode != ExitOK {
				t.Errorf("completed %v, want %v; exit %d", st.CompletedTaskIndices, tc.completed, out.ExitCode)
			}
			if !strings.Contains(h.log.String(), strconv.Quote(tc.line)) {
				t.Errorf("the run's start does not say %q", tc.line)
			}
		})
	}
}

// TestMovedPlanKeepsItsProgress: a plan file moved to another path in the
// same repository, with the same tasks, goes on where it was.
func TestMovedPlanKeepsItsProgress(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nwrite A\n## Task 2\nwrite B\n")
	h.scenario(map[string][]fakes.Outcome{"execute:2": {fail}})
	if _, err := h.run(); err == nil {
		t.Fatal("task 2 did not fail")
	}
	moved := filepath.Join(filepath.Dir(h.plan), "docs", "plan.md")
	if err := os.MkdirAll(filepath.Dir(moved), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(h.plan, moved); err != nil {
		t.Fatal(err)
	}
	h.scenario(nil)
	before := h.keys()
	out, err := h.run("PEAL_PLAN_PATH=" + moved)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(strings.TrimPrefix(h.keys(), before)); got != "plan:2 execute:2" || !slices.Equal(out.AlreadyCompleted, []int{1}) {
		t.Fatalf("calls after the move %q, outcome %+v", got, out)
	}
	if want := "the plan was at " + h.plan + " when its progress was kept: it goes on from there"; !strings.Contains(h.log.String(), want) {
		t.Errorf("the run's start does not say %q", want)
	}
}
