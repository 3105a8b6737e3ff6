package main

import (
	"encoding/json"
	"fmt"
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

const parallelPlan3 = "## Task 1 (parallel)\nA\n## Task 2 (parallel)\nB\n## Task 3 (parallel)\nC\n"

// committedSandbox is a sandbox whose repository has a first commit, as a
// block in worktrees needs.
func committedSandbox(t *testing.T, plan string) *sandbox {
	t.Helper()
	s := newSandbox(t, plan)
	testgit.Git(t, s.repo, "commit", "-q", "--allow-empty", "-m", "root")
	return s
}

// worktreeLeftovers are what a run left in the sandbox's repository.
func worktreeLeftovers(t *testing.T, s *sandbox) []string {
	t.Helper()
	return testgit.WorktreeLeftovers(t, s.repo, s.stateDir)
}

// A block in worktrees interrupted by a real signal: the agents stop, the
// task merged before the signal stays completed, no worktree or branch is
// left, and the re-run runs the rest.
func TestWorktreeBlockSignalThenRerun(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			s := committedSandbox(t, parallelPlan3)
			r2, r3 := fifo(t, s.agentDir, "ready2"), fifo(t, s.agentDir, "ready3")
			s.scenario(map[string][]fakes.Outcome{
				"execute:1": {{WriteFiles: map[string]string{"one.txt": "1"}}},
				"execute:2": {{WriteFiles: map[string]string{r2: "x", "two.txt": "2"}, Hang: true}, {WriteFiles: map[string]string{"two.txt": "2"}}},
				"execute:3": {{WriteFiles: map[string]string{r3: "x", "three.txt": "3"}, Hang: true}, {WriteFiles: map[string]string{"three.txt": "3"}}},
			})
			// Two at a time: task 3 takes task 1's slot, which is free once
			// task 1 is merged and saved.
			env := s.env(append([]string{"PEAL_MAX_PARALLEL=2"}, testgit.Env...)...)
			cmd, done := startPeal(t, s, env, nil)
			for _, p := range []string{r2, r3} {
				if _, err := os.ReadFile(p); err != nil {
					t.Fatal(err)
				}
			}
			cmd.Process.Signal(sig)
			waitExited(t, cmd, done, 30*time.Second)
			want := 130
			if sig == syscall.SIGKILL {
				want = -1
			}
			if code := cmd.ProcessState.ExitCode(); code != want {
				t.Fatalf("exit %d, want %d", code, want)
			}
			if !slices.Equal(s.completed(), []int{1}) {
				t.Fatalf("state %v", s.completed())
			}
			left := worktreeLeftovers(t, s)
			switch {
			case sig == syscall.SIGINT && len(left) > 0:
				t.Fatalf("left behind after %v: %q", sig, left)
			case sig == syscall.SIGKILL && len(left) == 0:
				t.Fatal("a killed run left no worktree: the re-run proves nothing")
			}
			if sig == syscall.SIGKILL {
				// peal status shows the worktrees the killed run left.
				st := s.peal(env, "status")
				for _, task := range []string{"2", "3"} {
					want := "  task " + task + ": in " + filepath.Join(s.stateDir, "worktrees", "task-"+task) + " on branch peal-"
					if !strings.Contains(st.stdout, want) {
						t.Fatalf("status lacks %q:\n%s", want, st.stdout)
					}
				}
			}

			res := s.peal(env, "run")
			if res.code != 0 {
				t.Fatalf("re-run: exit %d: %s", res.code, res.stderr)
			}
			if !slices.Equal(s.completed(), []int{1, 2, 3}) {
				t.Fatalf("state %v", s.completed())
			}
			if sig == syscall.SIGKILL && !strings.Contains(res.stderr, "removed the task worktrees and branches an earlier run left") {
				t.Fatalf("the re-run did not say what it removed: %s", res.stderr)
			}
			if left := worktreeLeftovers(t, s); len(left) > 0 {
				t.Fatalf("left behind after the re-run: %q", left)
			}
			// peal status tells that the re-run's tasks were merged.
			st := s.peal(env, "status")
			for _, task := range []string{"2", "3"} {
				if want := "  task " + task + ": merged into the work tree from branch peal-"; !strings.Contains(st.stdout, want) {
					t.Fatalf("status lacks %q:\n%s", want, st.stdout)
				}
			}
			for _, f := range []string{"one.txt", "two.txt", "three.txt"} {
				if _, err := os.Stat(filepath.Join(s.repo, f)); err != nil {
					t.Errorf("%s is not in the work tree: %v", f, err)
				}
			}
			if st := testgit.Git(t, s.repo, "status", "--porcelain"); st != "" {
				t.Fatalf("work tree not clean: %q", st)
			}
			agentsGone(t, s)
		})
	}
}

// Two tasks of a block change the same line: under parallel_conflict = fail
// the second fails with one line naming the file and its kept branch, and
// (a run that finished) the run summary and peal status show the conflict.
func TestWorktreeConflictReported(t *testing.T) {
	t.Parallel()
	for _, keepGoing := range []bool{false, true} {
		s := newSandbox(t, "## Task 1 (parallel)\nA\n## Task 2 (parallel)\nB\n")
		os.WriteFile(filepath.Join(s.repo, "f.txt"), []byte("base\n"), 0o644)
		testgit.Git(t, s.repo, "add", "f.txt")
		testgit.Git(t, s.repo, "commit", "-q", "-m", "root")
		s.scenario(map[string][]fakes.Outcome{
			"execute:1": {{WriteFiles: map[string]string{"f.txt": "one\n"}}},
			"execute:2": {{WriteFiles: map[string]string{"f.txt": "two\n"}}},
		})
		env := s.env(append([]string{"PEAL_MAX_PARALLEL=2", "PEAL_PARALLEL_CONFLICT=fail", fmt.Sprintf("PEAL_CONTINUE_WITH_REMAINING_TASKS=%v", keepGoing)}, testgit.Env...)...)
		r := s.peal(env, "run")
		if left := worktreeLeftovers(t, s); len(left) > 0 {
			t.Fatalf("left behind: %q", left)
		}
		if !keepGoing {
			line := lastLine(r.stderr)
			if r.code != 1 || !strings.HasPrefix(line, "peal: error: task 2: merging task 2 into the work tree conflicts in f.txt; the merge was undone and the task's work is kept on branch peal-kept/task-2-") {
				t.Fatalf("exit %d, last line %q", r.code, line)
			}
			continue
		}
		if r.code != 2 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		st := s.peal(env, "status")
		if want := "  task 2: its merge conflicted in f.txt; its work is kept on branch peal-kept/task-2-"; !strings.Contains(st.stdout, want) {
			t.Fatalf("status lacks %q:\n%s", want, st.stdout)
		}
		if want := "  task 1: merged into the work tree from branch peal-"; !strings.Contains(st.stdout, want) {
			t.Fatalf("status lacks %q:\n%s", want, st.stdout)
		}
	}
}

// A merge that git stops with no conflicting file (here a pre-merge-commit
// hook refuses the merge commit) is reported with what git said: in the
// run summary, in peal status, and in its --json.
func TestWorktreeMergeRefusedReported(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1 (parallel)\nA\n## Task 2 (parallel)\nB\n")
	os.WriteFile(filepath.Join(s.repo, "f.txt"), []byte("base\n"), 0o644)
	testgit.Git(t, s.repo, "add", "f.txt")
	testgit.Git(t, s.repo, "commit", "-q", "-m", "root")
	hook := filepath.Join(s.repo, ".git", "hooks", "pre-merge-commit")
	os.MkdirAll(filepath.Dir(hook), 0o755)
	if err := os.WriteFile(hook, []byte("#!/bin/sh\necho 'merges are frozen' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s.scenario(map[string][]fakes.Outcome{
		"execute:1": {{WriteFiles: map[string]string{"one.txt": "1\n"}}},
		"execute:2": {{WriteFiles: map[string]string{"two.txt": "2\n"}}},
	})
	env := s.env(append([]string{"PEAL_MAX_PARALLEL=2", "PEAL_PARALLEL_CONFLICT=fail", "PEAL_CONTINUE_WITH_REMAINING_TASKS=true"}, testgit.Env...)...)
	if r := s.peal(env, "run"); r.code != 2 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if left := worktreeLeftovers(t, s); len(left) > 0 {
		t.Fatalf("left behind: %q", left)
	}
	// peal runs the hook itself (confined), and names it.
	detail := "the repository's pre-merge-commit hook (" + hook + ") refused peal's merge: hook call exited with status 1: merges are frozen"
	st := s.peal(env, "status")
	for _, task := range []string{"1", "2"} {
		if want := "  task " + task + ": its merge failed (" + detail + "); its work is kept on branch peal-kept/task-" + task + "-"; !strings.Contains(st.stdout, want) {
			t.Fatalf("status lacks %q:\n%s", want, st.stdout)
		}
	}
	var report struct {
		Tasks []struct {
			Worktree struct {
				Conflict []string `json:"conflict_files"`
				Detail   string   `json:"conflict_detail"`
			} `json:"worktree"`
		} `json:"tasks"`
		LastRun struct {
			Parallel []struct {
				Conflict []string `json:"conflict_files"`
				Detail   string   `json:"conflict_detail"`
			} `json:"parallel_tasks"`
		} `json:"last_run"`
	}
	js := s.peal(env, "status", "--json").stdout
	if err := json.Unmarshal([]byte(js), &report); err != nil || len(report.Tasks) != 2 || len(report.LastRun.Parallel) != 2 {
		t.Fatalf("status --json %v:\n%s", err, js)
	}
	for i := range 2 {
		w, p := report.Tasks[i].Worktree, report.LastRun.Parallel[i]
		if w.Detail != detail || p.Detail != detail || w.Conflict != nil || p.Conflict != nil {
			t.Fatalf("task %d: worktree %+v, run summary %+v", i+1, w, p)
		}
	}
}

// Two tasks of a block that pass their check alone fail it merged: under
// parallel_conflict = fail the second fails with one line naming the check,
// and peal status says its merged tree failed the check.
func TestWorktreeChecksFailedMergeReported(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1 (parallel)\nA\n## Task 2 (parallel)\nB\n")
	testgit.Git(t, s.repo, "commit", "-q", "--allow-empty", "-m", "root")
	s.scenario(map[string][]fakes.Outcome{
		"execute:1": {{WriteFiles: map[string]string{"one.txt": "1\n"}}},
		"execute:2": {{WriteFiles: map[string]string{"two.txt": "2\n"}}},
	})
	check := `test ! -f one.txt || test ! -f two.txt || exit 1`
	env := s.env(append([]string{"PEAL_MAX_PARALLEL=2", "PEAL_PARALLEL_CONFLICT=fail", "PEAL_CONTINUE_WITH_REMAINING_TASKS=true", "PEAL_CHECK_COMMANDS=" + check}, testgit.Env...)...)
	if r := s.peal(env, "run"); r.code != 2 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if left := worktreeLeftovers(t, s); len(left) > 0 {
		t.Fatalf("left behind: %q", left)
	}
	st := s.peal(env, "status")
	if want := "  task 2: once merged, the work tree failed the checks `" + check + "`; the merge was undone and its work is kept on branch peal-kept/task-2-"; !strings.Contains(st.stdout, want) {
		t.Fatalf("status lacks %q:\n%s", want, st.stdout)
	}
	if _, err := os.Stat(filepath.Join(s.repo, "two.txt")); err == nil {
		t.Fatal("the undone merge left task 2's work in the work tree")
	}
}
