package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
)

// A block of sparse worktrees with a linked folder, killed (SIGKILL) while
// two tasks run: peal status shows the worktrees the killed run left with
// their sparse set, and the re-run removes them (their links removed, the
// linked folder untouched), runs the rest and leaves nothing behind.
func TestWorktreeSparseLinkedKillThenRerun(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, parallelPlan3)
	for _, f := range []string{"app/main.txt", "lib/util.txt", "docs/readme.txt", ".gitignore"} {
		os.MkdirAll(filepath.Join(s.repo, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(s.repo, f), []byte("node_modules/\n"), 0o644)
	}
	testgit.Git(t, s.repo, "add", "-A")
	testgit.Git(t, s.repo, "commit", "-q", "-m", "root")
	os.MkdirAll(filepath.Join(s.repo, "node_modules", "pkg"), 0o755)
	os.WriteFile(filepath.Join(s.repo, "node_modules", "pkg", "index.js"), []byte("x\n"), 0o644)
	r2, r3 := fifo(t, s.agentDir, "ready2"), fifo(t, s.agentDir, "ready3")
	s.scenario(map[string][]fakes.Outcome{
		"execute:1": {{WriteFiles: map[string]string{"app/one.txt": "1"}}},
		"execute:2": {{WriteFiles: map[string]string{r2: "x", "app/two.txt": "2"}, Hang: true}, {WriteFiles: map[string]string{"app/two.txt": "2"}}},
		"execute:3": {{WriteFiles: map[string]string{r3: "x", "lib/three.txt": "3"}, Hang: true}, {WriteFiles: map[string]string{"lib/three.txt": "3"}}},
	})
	env := s.env(append([]string{"PEAL_MAX_PARALLEL=2", "PEAL_WORKTREE_SPARSE_PATHS=app,lib", "PEAL_WORKTREE_LINK=node_modules"}, testgit.Env...)...)
	cmd, done := startPeal(t, s, env, nil)
	for _, p := range []string{r2, r3} {
		if _, err := os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	waitExited(t, cmd, done, 30*time.Second)
	if left := worktreeLeftovers(t, s); len(left) == 0 {
		t.Fatal("a killed run left no worktree: the re-run proves nothing")
	}
	for _, task := range []string{"2", "3"} {
		if _, err := os.Stat(filepath.Join(s.stateDir, "worktrees", "task-"+task, "docs")); err == nil {
			t.Fatalf("task %s's worktree holds docs, outside its set", task)
		}
	}
	st := s.peal(env, "status")
	for _, want := range []string{
		"  each checks out only app, lib, and the top-level files (worktree_sparse_paths)",
		"  each links node_modules to the work tree's (worktree_link)",
		"  task 2: in " + filepath.Join(s.stateDir, "worktrees", "task-2") + " on branch peal-",
		"/task-2 now, checking out only app, lib (a running run's",
	} {
		if !strings.Contains(st.stdout, want) {
			t.Fatalf("status lacks %q:\n%s", want, st.stdout)
		}
	}

	res := s.peal(env, "run")
	if res.code != 0 || !slices.Equal(s.completed(), []int{1, 2, 3}) {
		t.Fatalf("re-run: exit %d, state %v: %s", res.code, s.completed(), res.stderr)
	}
	if left := worktreeLeftovers(t, s); len(left) > 0 {
		t.Fatalf("left behind after the re-run: %q", left)
	}
	if data, err := os.ReadFile(filepath.Join(s.repo, "node_modules", "pkg", "index.js")); err != nil || string(data) != "x\n" {
		t.Fatalf("the linked folder: %q, %v", data, err)
	}
	for _, f := range []string{"app/one.txt", "app/two.txt", "lib/three.txt", "docs/readme.txt"} {
		if _, err := os.Stat(filepath.Join(s.repo, f)); err != nil {
			t.Errorf("%s is not in the work tree: %v", f, err)
		}
	}
	if st := testgit.Git(t, s.repo, "status", "--porcelain"); st != "" {
		t.Fatalf("work tree not clean: %q", st)
	}
	agentsGone(t, s)
}
