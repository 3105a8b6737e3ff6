package runner

import (
	"os"
	"testing"
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
