package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemo runs the demo of the README end to end, so that it keeps working.
func TestDemo(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds three programs")
	}
	cmd := exec.Command("go", "run", "peal/testdata/demo")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{
		// One retried execute, one round for a failing check, one for a finding.
		"plan:1  execute:1  execute:1  address:1  plan:2  execute:2  triage:2  address:2",
		"dismiss S001 false_positive",
		`"exit_code": 0`,
		"peal: task 2 - Add a README section on Greet.",
		// The check's output, as the address round was shown it.
		"---CHECK---\ncommand: test ! -f greet.go",
		"result: exited with status 1\noutput:\n--- FAIL: TestGreet: Greet(\"Ann\") = \"Helo, Ann\", want \"Hello, Ann\"\n---CHECK---",
		// The report: the retried execute, the check fixed, the address rounds.
		"| 1 | completed | stet 6, plan 1, execute 2 (ordinary), address 1 | 1 | – | execute failed, round 1 passed |",
		"| 2 | completed | stet 7, plan 1, execute 1, triage 1, address 1 | 1 | – | execute passed, round 1 passed |",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
}
