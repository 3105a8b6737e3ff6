package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemo runs the demo as the README's Quick start shows it, with -keep:
// the run, its calls and its report as the demo prints them, then the
// peal status and peal report commands it prints for the kept folder,
// from another folder: they find the run's state from its repository.
func TestDemo(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds three programs")
	}
	var lines []string
	for _, block := range readmeBlocks(t, "Quick start") {
		for _, line := range block {
			if strings.HasPrefix(line, "go run ./testdata/demo") {
				lines = append(lines, strings.TrimSpace(strings.Split(line, "#")[0]))
			}
		}
	}
	if strings.Join(lines, "\n") != "go run ./testdata/demo\ngo run ./testdata/demo -keep" {
		t.Fatalf("the README's demo lines changed: %q", lines)
	}
	cmd := exec.Command("go", "run", "./testdata/demo", "-keep")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.CombinedOutput()
	text := string(out)
	kept := ""
	if i := strings.Index(text, "\n  rm -rf "); i >= 0 {
		kept = strings.TrimSpace(strings.SplitN(text[i+len("\n  rm -rf "):], "\n", 2)[0])
		defer os.RemoveAll(kept)
	}
	if err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out)
	}
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
		"== kept the scratch folder " + kept + "; look at the run with\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if kept == "" || !strings.HasPrefix(kept, os.TempDir()) {
		t.Fatalf("no kept folder named:\n%s", text)
	}
	// The commands it prints for the kept folder, run from another folder.
	var printed []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "  "+filepath.Join(kept, "bin", "peal")+" ") {
			printed = append(printed, strings.TrimSpace(line))
		}
	}
	if len(printed) != 2 {
		t.Fatalf("printed commands %q", printed)
	}
	for _, line := range printed {
		args := strings.Fields(line)
		c := exec.Command(args[0], args[1:]...)
		c.Dir = t.TempDir()
		c.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + c.Dir}
		out, err := c.Output()
		if err != nil || !strings.Contains(string(out), "completed") {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	}
}
