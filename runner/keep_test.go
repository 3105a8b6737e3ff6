package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
)

// keepModes are the confine settings the tests of what a run keeps of the
// user's run under: auto (on this kernel, the tasks in the run's
// worktree) and off (in the work tree itself).
var keepModes = []string{"auto", "off"}

// userRepo gives h a first commit of two files and returns the branch the
// user is on.
func userRepo(t *testing.T, h *harness) string {
	t.Helper()
	os.MkdirAll(filepath.Join(h.repo, "src"), 0o755)
	os.WriteFile(filepath.Join(h.repo, "keep.txt"), []byte("mine\n"), 0o644)
	os.WriteFile(filepath.Join(h.repo, "src", "a.go"), []byte("package src\n"), 0o644)
	testgit.Git(t, h.repo, "add", ".")
	testgit.Git(t, h.repo, "commit", "-q", "-m", "root")
	return testgit.Git(t, h.repo, "symbolic-ref", "--short", "HEAD")
}

// TestFailedTaskNeverOnTheUsersBranch: a task whose agent deletes every
// file (rm -rf ./*), reviewed by stet and checked, fails after its address
// round: its commits never reach the branch the user started on. The
// branch and the files are as before the task, and its work is kept on a
// branch that one line names with the commands to look at it and take it,
// said again at the end of the run.
func TestFailedTaskNeverOnTheUsersBranch(t *testing.T) {
	t.Parallel()
	for _, mode := range keepModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, twoTasks)
			h.confine = mode
			branch := userRepo(t, h)
			env := h.withStet(fakes.StetScenario{})
			h.scenario(map[string][]fakes.Outcome{"execute:1": {{Commands: [][]string{{"sh", "-c", "rm -rf ./*"}}}}})
			_, err := h.run(append(env, checksEnv("test -f keep.txt"), "PEAL_MAX_ADDRESS_ROUNDS=1")...)
			var te *TaskError
			if !errors.As(err, &te) || te.Index != 1 || !isFindingsRemaining(err) {
				t.Fatalf("err = %v", err)
			}
			if log, status := testgit.Git(t, h.repo, "log", "--format=%s", branch), testgit.Git(t, h.repo, "status", "--porcelain"); log != "root" || status != "" {
				t.Fatalf("the user's branch: log %q, status %q", log, status)
			}
			if fileIn(t, h.repo, "keep.txt") != "mine\n" || fileIn(t, h.repo, "src/a.go") != "package src\n" {
				t.Fatal("the user's files are not back")
			}
			kept := keptBranches(t, h)
			if len(kept) != 1 || !strings.HasPrefix(kept[0], "peal-kept/task-1-") {
				t.Fatalf("kept %q", kept)
			}
			if got := testgit.Git(t, h.repo, "log", "--format=%s", branch+".."+kept[0]); !strings.Contains(got, "peal: task 1 - fake plan output for task 1") {
				t.Fatalf("the kept branch holds %q", got)
			}
			if files := testgit.Git(t, h.repo, "ls-tree", "-r", "--name-only", kept[0]); files != "" {
				t.Fatalf("the kept branch holds the deletion, not %q", files)
			}
			look, take := "git log -p "+branch+".."+kept[0], "git merge "+kept[0]
			if !strings.Contains(err.Error(), "its work is kept on branch "+kept[0]) || !strings.Contains(err.Error(), look) || !strings.Contains(err.Error(), take) {
				t.Fatalf("the error does not name the branch: %v", err)
			}
			line := "task 1's work is kept on branch " + kept[0] + ", not on your branch"
			if log := h.log.String(); strings.Count(log, line) != 2 || !strings.Contains(log, "kept for you: "+line) || !strings.Contains(log, "take it with "+take) {
				t.Fatalf("the log does not say where the work is, and again at the end:\n%s", log)
			}
		})
	}
}

// TestBlockedTaskUnderEachSetting: a task left with a failing check after
// its last round (blocked) keeps its commits off the user's branch unless
// on_findings_remaining = warn completes it: fail fails it, defer leaves
// it for the next run, and either keeps its work on a branch and puts the
// work tree back; continue_with_remaining_tasks then lets the next task
// start from the tree as it was before the blocked one.
func TestBlockedTaskUnderEachSetting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  []string
		// lands: the blocked task's work stays on the user's branch.
		lands    bool
		wantErr  bool
		deferred bool
	}{
		{name: "fail", env: []string{"PEAL_ON_FINDINGS_REMAINING=fail"}, wantErr: true},
		{name: "fail, continue", env: []string{"PEAL_ON_FINDINGS_REMAINING=fail", "PEAL_CONTINUE_WITH_REMAINING_TASKS=true"}},
		{name: "warn", env: []string{"PEAL_ON_FINDINGS_REMAINING=warn"}, lands: true},
		{name: "defer", env: []string{"PEAL_ON_FINDINGS_REMAINING=defer"}, deferred: true},
	} {
		for _, mode := range keepModes {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				h := newHarness(t, twoTasks)
				h.confine = mode
				branch := userRepo(t, h)
				h.scenario(map[string][]fakes.Outcome{"execute:1": {breaks}, "execute:2": {writes("two.txt", "2\n")}})
				out, err := h.run(append(tc.env, checksEnv(statusCheck), "PEAL_COMMIT_AFTER_PHASE2=true", "PEAL_MAX_ADDRESS_ROUNDS=1")...)
				if tc.wantErr != (err != nil) || (err != nil && !isFindingsRemaining(err)) {
					t.Fatalf("err = %v", err)
				}
				log := testgit.Git(t, h.repo, "log", "--format=%s", branch)
				kept := keptBranches(t, h)
				switch {
				case tc.lands:
					if !strings.Contains(log, "peal: task 1") || fileIn(t, h.repo, "status.txt") != "broken\n" || len(kept) != 0 || !slices.Equal(out.WithFindings, []int{1}) {
						t.Fatalf("warn: log %q, kept %q, outcome %+v", log, kept, out)
					}
				default:
					if strings.Contains(log, "peal: task 1") || len(kept) != 1 || testgit.Git(t, h.repo, "show", kept[0]+":status.txt") != "broken" {
						t.Fatalf("log %q, kept %q", log, kept)
					}
					if _, err := os.Stat(filepath.Join(h.repo, "status.txt")); !errors.Is(err, os.ErrNotExist) {
						t.Fatalf("the blocked task's file is in the work tree: %v", err)
					}
				}
				if tc.deferred && (!slices.Equal(out.Deferred, []int{1}) || !slices.Equal(h.state().DeferredTaskIndices, []int{1})) {
					t.Fatalf("outcome %+v, state %+v", out, h.state())
				}
				if !tc.wantErr && (!slices.Contains(out.Completed, 2) || !strings.HasPrefix(log, "peal: task 2")) {
					t.Fatalf("task 2: outcome %+v, log %q", out, log)
				}
				if status := testgit.Git(t, h.repo, "status", "--porcelain"); status != "" {
					t.Fatalf("status %q", status)
				}
			})
		}
	}
}

// TestCutOffTaskPutBack: a task cut off by a signal after its execute was
// committed keeps that commit off the user's branch: it is on a kept
// branch, and the work tree is as before the task.
func TestCutOffTaskPutBack(t *testing.T) {
	t.Parallel()
	for _, mode := range keepModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "## Task 1\nA\n")
			h.confine = mode
			branch := userRepo(t, h)
			ready := readyPipe(t)
			h.scenario(map[string][]fakes.Outcome{"execute": {breaks}, "address": {{WriteFiles: map[string]string{ready: "x"}, Hang: true}}})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				waitReady(t, ready)
				cancel()
			}()
			_, err := h.runCtx(ctx, h.config(checksEnv(statusCheck), "PEAL_COMMIT_AFTER_PHASE2=true"))
			if !isInterrupted(err) {
				t.Fatalf("err = %v", err)
			}
			kept := keptBranches(t, h)
			if log := testgit.Git(t, h.repo, "log", "--format=%s", branch); log != "root" || len(kept) != 1 ||
				testgit.Git(t, h.repo, "log", "-1", "--format=%s", kept[0]) != "peal: task 1 - fake plan output for task 1" {
				t.Fatalf("log %q, kept %q", log, kept)
			}
			if status := testgit.Git(t, h.repo, "status", "--porcelain"); status != "" {
				t.Fatalf("status %q", status)
			}
		})
	}
}

// TestKilledTaskPutBackByTheNextRun: a run killed (SIGKILL) while a task
// worked in the work tree leaves its commits on the user's branch and its
// files there, with its note of the work tree before the task; the next
// run keeps that work on a branch, puts the work tree back, and runs the
// task again.
func TestKilledTaskPutBackByTheNextRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	h.confine = "off"
	branch := userRepo(t, h)
	os.WriteFile(filepath.Join(h.repo, "mine.txt"), []byte("uncommitted\n"), 0o644)
	// What the killed run did: its note, then its task's commit and files.
	if _, err := h.trees().Mark(context.Background(), []int{1}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(h.repo, "keep.txt"), []byte("the task's\n"), 0o644)
	testgit.Git(t, h.repo, "commit", "-q", "-am", "peal: task 1 - half done")
	os.WriteFile(filepath.Join(h.repo, "half.txt"), []byte("half\n"), 0o644)
	os.Remove(filepath.Join(h.repo, "mine.txt"))

	h.scenario(map[string][]fakes.Outcome{"execute": {writes("one.txt", "1\n")}})
	out, err := h.run()
	if err != nil || !slices.Equal(out.Completed, []int{1}) {
		t.Fatalf("err %v, outcome %+v", err, out)
	}
	kept := keptBranches(t, h)
	if len(kept) != 1 || testgit.Git(t, h.repo, "show", kept[0]+":half.txt") != "half" || testgit.Git(t, h.repo, "show", kept[0]+":keep.txt") != "the task's" {
		t.Fatalf("kept %q", kept)
	}
	if log := testgit.Git(t, h.repo, "log", "--format=%s", branch); log != "root" {
		t.Fatalf("the user's branch: %q", log)
	}
	for name, want := range map[string]string{"keep.txt": "mine\n", "mine.txt": "uncommitted\n", "one.txt": "1\n"} {
		if got := fileIn(t, h.repo, name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(h.repo, "half.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("half.txt: %v", err)
	}
}
