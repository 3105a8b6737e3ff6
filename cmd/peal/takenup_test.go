package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
)

// TestKilledConfinedRunTakenUp: a confined run that does not commit is
// killed (SIGKILL) while task 2 works in the run's worktree, after task 1's
// work came back to the work tree. The next run keeps task 2's half-done
// work on a branch (a task that did not complete never brings its work to
// the user's), runs task 2 again from the tree task 1 left, and the work
// tree ends with both tasks' work, uncommitted, task 1's brought once, and
// nothing of the run's worktree left.
func TestKilledConfinedRunTakenUp(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	s := newEscapeSandbox(t, "## Task 1\nOne\n## Task 2\nTwo\n")
	ready := filepath.Join(s.agentDir, "ready") // where a confined call may write
	if err := syscall.Mkfifo(ready, 0o644); err != nil {
		t.Fatal(err)
	}
	s.scenario(map[string][]fakes.Outcome{
		"execute:1": {{WriteFiles: map[string]string{"one.txt": "1\n"}}},
		"execute:2": {
			// The tool call first, then the signal: the test kills the
			// run once it has half.txt.
			{Commands: [][]string{{"sh", "-c", "printf 'half\\n' > half.txt"}}, WriteFiles: map[string]string{ready: "x"}, Hang: true},
			{WriteFiles: map[string]string{"two.txt": "2\n"}},
		},
	})
	env := s.env("on")
	cmd := exec.Command(bins["peal"], "run")
	cmd.Dir, cmd.Env = s.dir, env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(ready); err != nil { // task 2's execute runs
		t.Fatal(err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	calls, _ := fakes.ReadCalls(s.agentDir)
	starts := fakes.Starts(calls)
	starts[len(starts)-1].ID().Kill()
	if got := fileIn(t, s.repo, "one.txt"); got != "1\n" {
		t.Fatalf("task 1's work did not reach the work tree before the kill: %q", got)
	}

	r := s.peal(env, "run")
	if r.code != 0 || !strings.Contains(r.stderr, "an earlier run died while a task worked in the run's worktree, before the task completed") {
		t.Fatalf("exit %d:\n%s", r.code, r.stderr)
	}
	kept := strings.Fields(s.git(nil, "for-each-ref", "--format=%(refname:short)", "refs/heads/peal-kept/"))
	if len(kept) != 1 || !strings.HasPrefix(kept[0], "peal-kept/task-2-") || s.git(nil, "show", kept[0]+":half.txt") != "half\n" ||
		!strings.Contains(r.stderr, "task 2's work is kept on branch "+kept[0]) {
		t.Fatalf("kept %q:\n%s", kept, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(s.repo, "half.txt")); err == nil {
		t.Fatal("the killed task's half-done work reached the work tree")
	}
	uncommittedWork(t, s, map[string]string{"one.txt": "1\n", "two.txt": "2\n"}, "?? one.txt\n?? two.txt")
	if left := testgit.WorktreeLeftovers(t, s.repo, s.stateDir); len(left) > 0 {
		t.Errorf("left behind: %q", left)
	}
}

// fileIn is the text of the file name in dir, "" when it cannot be read.
func fileIn(t *testing.T, dir, name string) string {
	t.Helper()
	data, _ := os.ReadFile(filepath.Join(dir, name))
	return string(data)
}

// TestConfinedRunThatDoesNotCommitResumes: a confined run that does not
// commit stops after task 1 (task 2 failed); its work is in the work tree,
// uncommitted, as an unconfined run leaves it. The next run's worktree
// holds it, so that task 2 sees task 1's work (as it would in the work tree
// itself), and only task 2's work comes back.
func TestConfinedRunThatDoesNotCommitResumes(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	s := newEscapeSandbox(t, "## Task 1\nOne\n## Task 2\nTwo\n")
	s.scenario(map[string][]fakes.Outcome{
		"execute:1": {{WriteFiles: map[string]string{"one.txt": "1\n", "README.md": "changed by task 1\n"}}},
		"execute:2": {
			{Stderr: "something broke", Exit: 1},
			{Commands: [][]string{{"cp", "one.txt", "seen-one.txt"}}, WriteFiles: map[string]string{"two.txt": "2\n"}},
		},
	})
	env := append(s.env("on"), "PEAL_PHASE_RETRY_COUNT=0")
	if r := s.peal(env, "run"); r.code == 0 {
		t.Fatalf("the first run did not fail:\n%s", r.stderr)
	}
	if got := fileIn(t, s.repo, "one.txt"); got != "1\n" {
		t.Fatalf("task 1's work is not in the work tree after the first run: %q", got)
	}
	r := s.peal(env, "run")
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "which does not have them") {
		t.Errorf("the second run warns that its worktree lacks the work tree's changes:\n%s", r.stderr)
	}
	uncommittedWork(t, s, map[string]string{"one.txt": "1\n", "README.md": "changed by task 1\n", "seen-one.txt": "1\n", "two.txt": "2\n"},
		"M README.md\n?? one.txt\n?? seen-one.txt\n?? two.txt")
}

// uncommittedWork checks the end of a plan of two tasks, run twice (task
// 2 twice), that does not commit: the work tree holds files, uncommitted
// (git status says status), no commit was made and no branch of peal's is
// left.
func uncommittedWork(t *testing.T, s *escapeSandbox, files map[string]string, status string) {
	t.Helper()
	if got := s.keys(); got != "plan:1 execute:1 plan:2 execute:2 plan:2 execute:2" {
		t.Errorf("calls %q", got)
	}
	for name, want := range files {
		if got := fileIn(t, s.repo, name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if log, got := testgit.Git(t, s.repo, "log", "--format=%s"), testgit.Git(t, s.repo, "status", "--porcelain"); log != "root" || got != status {
		t.Errorf("log %q, status %q, want %q", log, got, status)
	}
	// The run's worktree stays for the next run, on its branch; what was
	// kept for the user stays too.
	for _, b := range strings.Fields(testgit.Git(t, s.repo, "branch", "--format=%(refname:short)")) {
		if strings.HasPrefix(b, "peal") && !strings.HasSuffix(b, "/home") && !strings.HasPrefix(b, "peal-kept/") {
			t.Errorf("branch left: %q", b)
		}
	}
}

// TestRefusedWorkNamesItsBranch: when the work tree refuses a confined
// run's work (the person changed the same file meanwhile), the line the
// run ends with names the branch that keeps the work, as it is named when
// the run is over: the run's own branch is gone by then.
func TestRefusedWorkNamesItsBranch(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	s := newEscapeSandbox(t, "## Task 1\nOne\n")
	ready, gate := filepath.Join(s.agentDir, "ready"), filepath.Join(s.agentDir, "gate")
	for _, f := range []string{ready, gate} {
		if err := syscall.Mkfifo(f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s.scenario(map[string][]fakes.Outcome{"execute:1": {{WriteFiles: map[string]string{ready: "x", "a.txt": "agent\n"}, WaitFile: gate}}})
	cmd := exec.Command(bins["peal"], "run")
	cmd.Dir, cmd.Env = s.dir, s.env("on")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(ready); err != nil { // the execute runs
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(s.repo, "a.txt"), []byte("mine\n"), 0o644)
	os.WriteFile(gate, []byte("go"), 0o644)
	err := cmd.Wait()
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	last := lines[len(lines)-1]
	branches := strings.Fields(strings.ReplaceAll(s.git(nil, "branch", "--list", "peal-*"), "*", ""))
	if err == nil || len(branches) != 1 || !strings.HasPrefix(branches[0], "peal-kept/") ||
		!strings.HasSuffix(last, "; the run's work is kept on branch "+branches[0]) || strings.Contains(last, "/home:") {
		t.Fatalf("%v; branches %q; last line %q", err, branches, last)
	}
	if got := fileIn(t, s.repo, "a.txt"); got != "mine\n" {
		t.Fatalf("the work tree's own change is gone: %q", got)
	}
}
