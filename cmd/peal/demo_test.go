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
		"plan:1  execute:1  execute:1  plan:2  execute:2  triage:2  address:2", // one retried execute, one address round
		"dismiss S001 false_positive",
		`"exit_code": 0`,
		"peal: task 2 - Add a README section on Greet.",
		// The report: the retried execute and the address round.
		"| 1 | completed | stet 4, plan 1, execute 2 (ordinary) | 0 |",
		"| 2 | completed | stet 7, plan 1, execute 1, triage 1, address 1 | 1 |",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
}
