package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzStateFile: any state.json either resumes or is set aside with a plain
// reason; none makes a run fail or panic.
func FuzzStateFile(f *testing.F) {
	f.Add(`{"plan_path":"p.md","repo_path":".","completed_task_indices":[1,2],"other_plans":[{"plan_path":"/a","repo_path":"/r","completed_task_indices":[]}]}`)
	f.Add(`{"plan_path":"/p","repo_path":"/r","completed_task_indices":[0],"last_plan_by_task":{"0":"x"}}`)
	f.Add(`{"plan_path":"/p","repo_path":"/r","completed_task_indices":[],"other_plans":[1,{}]}`)
	f.Fuzz(func(t *testing.T, data string) {
		base := t.TempDir()
		p := Plan{Path: filepath.Join(base, "p.md"), Repo: base, Base: base}
		dir := filepath.Join(base, "state")
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, FileName), []byte(data), 0o644)
		s, warnings, err := Open(dir, p, at(0))
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer s.Close()
		for _, w := range warnings {
			plainLine(t, "warning", w)
		}
		if err := s.Complete(7); err != nil {
			t.Fatal(err)
		}
		s.Close()
		s2, warnings, err := Open(dir, p, at(0))
		if err != nil || len(warnings) > 0 && len(warnings) != countOddEntries(warnings) {
			t.Fatalf("reopen: %v %q", err, warnings)
		}
		defer s2.Close()
		if !s2.Completed(7) {
			t.Fatalf("progress lost: %+v", s2.Snapshot())
		}
	})
}

// countOddEntries counts the warnings about other_plans entries that are kept
// as they are: the only warnings a file peal wrote may give again.
func countOddEntries(warnings []string) int {
	n := 0
	for _, w := range warnings {
		if strings.Contains(w, "of other_plans is not understood") {
			n++
		}
	}
	return n
}
