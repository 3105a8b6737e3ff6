package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"peal/internal/gitrepo"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
	"peal/phase"
	"peal/state"
	"peal/tickets"
	"peal/worktree"
)

// isolatedHarness is a harness whose repository has a first commit holding
// base.txt, as a block in worktrees needs.
func isolatedHarness(t *testing.T, plan string) *harness {
	t.Helper()
	h := newHarness(t, plan)
	if err := os.WriteFile(filepath.Join(h.repo, "base.txt"), []byte("base\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testgit.Git(t, h.repo, "add", "base.txt")
	testgit.Git(t, h.repo, "commit", "-q", "-m", "root")
	return h
}

func writes(files ...string) fakes.Outcome {
	w := map[string]string{}
	for i := 0; i+1 < len(files); i += 2 {
		w[files[i]] = files[i+1]
	}
	return fakes.Outcome{WriteFiles: w}
}

// leftovers are what a block may leave behind in the harness's repository.
func leftovers(t *testing.T, h *harness) []string {
	t.Helper()
	return testgit.WorktreeLeftovers(t, h.repo, h.stateDir)
}

func keptBranches(t *testing.T, h *harness) []string {
	return strings.Fields(testgit.Git(t, h.repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/"+worktree.KeptPrefix))
}

func fileIn(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// firstParents are the subjects of the work tree's history along its first
// parents, oldest first: the root, then one merge commit per merged task.
func firstParents(t *testing.T, h *harness) string {
	return strings.Join(strings.Split(testgit.Git(t, h.repo, "log", "--first-parent", "--reverse", "--format=%s"), "\n"), "|")
}

// TestWorktreeBlockBothLand: two tasks that change different files each work
// in a worktree of their own (every call's folder, the workspace argument
// included) and both land in the work tree, merged in plan order; nothing
// is left behind.
func TestWorktreeBlockBothLand(t *testing.T) {
	t.Parallel()
	h := isolatedHarness(t, parallelPlan("pp"))
	h.scenario(map[string][]fakes.Outcome{"execute:1": {writes("one.txt", "1")}, "execute:2": {writes("two.txt", "2")}})
	obs := &detailsSeen{}
	out, err := h.runCfg(h.config("PEAL_MAX_PARALLEL=2"), WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	scope := state.CallScope(h.stateDir)
	// The live line of every call of a task names its worktree and branch.
	if got, want := obs.seen(), fmt.Sprintf("execute:1 worktree task-1 on peal-%[1]s/task-1|execute:2 worktree task-2 on peal-%[1]s/task-2|"+
		"plan:1 worktree task-1 on peal-%[1]s/task-1|plan:2 worktree task-2 on peal-%[1]s/task-2", scope); got != want {
		t.Fatalf("details %q, want %q", got, want)
	}
	if !slices.Equal(out.Completed, []int{1, 2}) || !slices.Equal(h.state().CompletedTaskIndices, []int{1, 2}) {
		t.Fatalf("outcome %+v, state %+v", out, h.state())
	}
	if fileIn(t, h.repo, "one.txt") != "1" || fileIn(t, h.repo, "two.txt") != "2" {
		t.Fatal("the work of a task is missing from the work tree")
	}
	if got := testgit.Git(t, h.repo, "status", "--porcelain"); got != "" {
		t.Fatalf("work tree not clean: %q", got)
	}
	if got, want := firstParents(t, h), fmt.Sprintf("root|peal: merge task 1 (peal-%s/task-1)|peal: merge task 2 (peal-%s/task-2)", scope, scope); got != want {
		t.Fatalf("history %q, want %q", got, want)
	}
	for _, c := range h.calls() {
		want := filepath.Join(h.stateDir, worktree.Folder, "task-"+c.Task)
		if c.Cwd != want {
			t.Errorf("%s ran in %s, want %s", c.Key, c.Cwd, want)
		}
		if i := slices.Index(c.Argv, "--workspace"); i < 0 || c.Argv[i+1] != want {
			t.Errorf("%s has workspace %v, want %s", c.Key, c.Argv, want)
		}
	}
	if left := leftovers(t, h); len(left) > 0 {
		t.Fatalf("left behind: %q", left)
	}
	sum, _ := h.summary()
	for i, pt := range sum.ParallelTasks {
		if pt.Task != i+1 || !pt.Merged || pt.Branch != fmt.Sprintf("peal-%s/task-%d", scope, i+1) || pt.Worktree != filepath.Join(h.stateDir, worktree.Folder, fmt.Sprintf("task-%d", i+1)) {
			t.Fatalf("summary parallel tasks %+v", sum.ParallelTasks)
		}
	}
	if len(sum.ParallelTasks) != 2 {
		t.Fatalf("summary parallel tasks %+v", sum.ParallelTasks)
	}
}

// TestWorktreeMergeInPlanOrder: task 2 ends before task 1 has even finished
// its execute; task 1 is still merged first.
func TestWorktreeMergeInPlanOrder(t *testing.T) {
	t.Parallel()
	h := isolatedHarness(t, parallelPlan("pp"))
	gate := gatePipe(t)
	h.scenario(map[string][]fakes.Outcome{
		"execute:1": {{WriteFiles: map[string]string{"one.txt": "1"}, WaitFile: gate}},
		"execute:2": {writes("two.txt", "2")},
	})
	r := startRun(h, "PEAL_MAX_PARALLEL=2")
	r.events.wait(t, "task 2 ended", 1, func(rec logRecord) bool {
		return rec.msg == "task ended in its worktree, its work waits to be merged" && rec.attrs["task"] == "2"
	})
	openGate(t, gate)
	if _, err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	scope := state.CallScope(h.stateDir)
	if got, want := firstParents(t, h), fmt.Sprintf("root|peal: merge task 1 (peal-%s/task-1)|peal: merge task 2 (peal-%s/task-2)", scope, scope); got != want {
		t.Fatalf("history %q, want %q", got, want)
	}
	if left := leftovers(t, h); len(left) > 0 {
		t.Fatalf("left behind: %q", left)
	}
}

// TestWorktreeConflict: two tasks change the same line. The second's merge
// conflicts: it is undone (the tree stays clean), the branch is kept and
// named, and under retry the task runs again, alone, in the work tree on top
// of the first task's work; under fail it fails.
func TestWorktreeConflict(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"retry", "fail"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			h := isolatedHarness(t, parallelPlan("pp"))
			h.scenario(map[string][]fakes.Outcome{
				"execute:1": {writes("base.txt", "one\n")},
				"execute:2": {writes("base.txt", "two\n"), writes("base.txt", "one\ntwo\n")},
			})
			cfg := h.config("PEAL_MAX_PARALLEL=2", "PEAL_COMMIT_AFTER_PHASE2=true", "PEAL_PARALLEL_CONFLICT="+policy, "PEAL_CONTINUE_WITH_REMAINING_TASKS=true")
			out, err := h.runCfg(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := testgit.Git(t, h.repo, "status", "--porcelain"); got != "" {
				t.Fatalf("work tree not clean: %q", got)
			}
			if _, err := os.Stat(filepath.Join(h.repo, ".git", "MERGE_HEAD")); err == nil {
				t.Fatal("a merge is left in progress")
			}
			kept := keptBranches(t, h)
			if len(kept) != 1 || !strings.HasPrefix(kept[0], worktree.KeptPrefix+"task-2-") {
				t.Fatalf("kept branches %q", kept)
			}
			if got := testgit.Git(t, h.repo, "show", kept[0]+":base.txt"); got != "two" {
				t.Fatalf("the kept branch holds %q", got)
			}
			sum, _ := h.summary()
			if len(sum.ParallelTasks) != 2 || !slices.Equal(sum.ParallelTasks[1].Files, []string{"base.txt"}) || sum.ParallelTasks[1].Branch != kept[0] || sum.ParallelTasks[1].Merged {
				t.Fatalf("summary parallel tasks %+v\n%s", sum.ParallelTasks, h.log.String())
			}
			if !strings.Contains(h.log.String(), "conflicts in base.txt") {
				t.Fatalf("the conflict is not named in the log:\n%s", h.log.String())
			}
			var executes2 []string
			for _, c := range h.calls() {
				if c.Key == "execute:2" {
					executes2 = append(executes2, c.Cwd)
				}
			}
			attempts := retryState(t, h, ticketOf(cfg, 2)).Attempts
			switch policy {
			case "retry":
				if !slices.Equal(out.Completed, []int{1, 2}) || fileIn(t, h.repo, "base.txt") != "one\ntwo\n" {
					t.Fatalf("outcome %+v, base.txt %q", out, fileIn(t, h.repo, "base.txt"))
				}
				if want := []string{filepath.Join(h.stateDir, worktree.Folder, "task-2"), h.workDir()}; !slices.Equal(executes2, want) {
					t.Fatalf("task 2's executes ran in %q, want %q", executes2, want)
				}
				if len(attempts) != 2 || attempts[0].Status != tickets.AttemptError || attempts[1].Status != tickets.AttemptClosed {
					t.Fatalf("task 2's attempts %+v", attempts)
				}
			case "fail":
				if !slices.Equal(out.Completed, []int{1}) || !slices.Equal(out.Failed, []int{2}) || fileIn(t, h.repo, "base.txt") != "one\n" {
					t.Fatalf("outcome %+v", out)
				}
				if len(executes2) != 1 || len(attempts) != 1 || attempts[0].Status != tickets.AttemptError {
					t.Fatalf("task 2's executes %q, attempts %+v", executes2, attempts)
				}
			}
			if !slices.Equal(h.state().CompletedTaskIndices, out.Completed) {
				t.Fatalf("state %+v", h.state())
			}
			if left := leftovers(t, h); len(left) > 0 {
				t.Fatalf("left behind: %q", left)
			}
		})
	}
}

// TestWorktreeSetupAndCopy: worktree_copy brings an ignored and an untracked
// file of the work tree into each worktree (without committing either), and
// worktree_setup_command runs there before the first call; a setup command
// that fails fails its task with the command's output.
func TestWorktreeSetupAndCopy(t *testing.T) {
	t.Parallel()
	h := isolatedHarness(t, parallelPlan("pp"))
	os.WriteFile(filepath.Join(h.repo, ".gitignore"), []byte(".env\nsetup-ran\nconf/\n"), 0o644)
	testgit.Git(t, h.repo, "add", ".gitignore")
	testgit.Git(t, h.repo, "commit", "-q", "-m", "ignore .env")
	os.WriteFile(filepath.Join(h.repo, ".env"), []byte("SECRET=1\n"), 0o644)
	os.MkdirAll(filepath.Join(h.repo, "conf"), 0o755)
	os.WriteFile(filepath.Join(h.repo, "conf", "local.ini"), []byte("x=1\n"), 0o644)
	// The fake agent copies what it finds into files that are the task's work.
	h.scenario(map[string][]fakes.Outcome{
		"execute:1": {{Commands: [][]string{{"cp", ".env", "seen-env-1"}, {"cp", "setup-ran", "seen-setup-1"}, {"cp", "conf/local.ini", "seen-ini-1"}}}},
		"execute:2": {{Commands: [][]string{{"cp", ".env", "seen-env-2"}, {"cp", "setup-ran", "seen-setup-2"}}}},
	})
	out, err := h.run("PEAL_MAX_PARALLEL=2", "PEAL_WORKTREE_COPY=.env,conf", "PEAL_WORKTREE_SETUP_COMMAND=touch setup-ran")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.Completed, []int{1, 2}) {
		t.Fatalf("outcome %+v", out)
	}
	for _, f := range []string{"seen-env-1", "seen-env-2", "seen-setup-1", "seen-setup-2", "seen-ini-1"} {
		if _, err := os.Stat(filepath.Join(h.repo, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	tracked := testgit.Git(t, h.repo, "ls-files")
	if strings.Contains(tracked, ".env") || strings.Contains(tracked, "conf/local.ini") {
		t.Fatalf("a copied file was committed: %q", tracked)
	}

	t.Run("setup fails", func(t *testing.T) {
		h := isolatedHarness(t, parallelPlan("pp"))
		log := bothFailUnstarted(t, h, "PEAL_WORKTREE_SETUP_COMMAND=ls no-such-file")
		if !strings.Contains(log, `worktree_setup_command \"ls no-such-file\" failed in`) || !strings.Contains(log, "no-such-file") {
			t.Fatalf("log:\n%s", log)
		}
	})
	t.Run("setup fails printing on stdout only", func(t *testing.T) {
		// diff prints the difference on stdout and exits 1.
		h := isolatedHarness(t, parallelPlan("pp"))
		log := bothFailUnstarted(t, h, "PEAL_WORKTREE_SETUP_COMMAND=diff base.txt /dev/null")
		want := fmt.Sprintf(`task=1 err="worktree_setup_command \"diff base.txt /dev/null\" failed in %s: setup call exited with status 1: < base"`, filepath.Join(h.stateDir, worktree.Folder, "task-1"))
		if !strings.Contains(log, want) {
			t.Fatalf("no %q in the log:\n%s", want, log)
		}
	})
	t.Run("setup times out", func(t *testing.T) {
		h := isolatedHarness(t, parallelPlan("pp"))
		log := bothFailUnstarted(t, h, "PEAL_PHASE_TIMEOUT_SEC=1", "PEAL_WORKTREE_SETUP_COMMAND=sleep 30")
		for _, task := range []int{1, 2} {
			want := fmt.Sprintf(`task=%d err="worktree_setup_command \"sleep 30\" failed in %s: setup call timed out after 1 s"`, task, filepath.Join(h.stateDir, worktree.Folder, fmt.Sprintf("task-%d", task)))
			if !strings.Contains(log, want) {
				t.Fatalf("no %q in the log:\n%s", want, log)
			}
		}
	})
	t.Run("a missing path fails", func(t *testing.T) {
		h := isolatedHarness(t, parallelPlan("pp"))
		log := bothFailUnstarted(t, h, "PEAL_WORKTREE_COPY=nothere/file")
		if want := "worktree_copy nothere/file: " + filepath.Join(h.repo, "nothere") + " does not exist in the work tree"; !strings.Contains(log, want) {
			t.Fatalf("no %q in the log:\n%s", want, log)
		}
	})
	t.Run("a link is refused", func(t *testing.T) {
		// The link is the path's last component, or a folder on the way.
		for _, copy := range []string{"link", "linkdir/file"} {
			h := isolatedHarness(t, parallelPlan("pp"))
			os.WriteFile(filepath.Join(h.repo, ".gitignore"), []byte("link\nlinkdir\n"), 0o644)
			testgit.Git(t, h.repo, "add", ".gitignore")
			testgit.Git(t, h.repo, "commit", "-q", "-m", "ignore links")
			os.Symlink("/etc/passwd", filepath.Join(h.repo, "link"))
			outside := t.TempDir()
			os.WriteFile(filepath.Join(outside, "file"), []byte("secret"), 0o644)
			os.Symlink(outside, filepath.Join(h.repo, "linkdir"))
			log := bothFailUnstarted(t, h, "PEAL_WORKTREE_COPY="+copy)
			want := filepath.Join(h.repo, strings.Split(copy, "/")[0]) + " is a symbolic link: only files and folders are copied"
			if !strings.Contains(log, want) {
				t.Fatalf("%s: no %q in the log:\n%s", copy, want, log)
			}
		}
	})
}

// bothFailUnstarted runs the two-task block of h, which env keeps from
// starting: both tasks fail without an agent call and leave nothing behind.
// It returns the run's log.
func bothFailUnstarted(t *testing.T, h *harness, env ...string) string {
	t.Helper()
	out, err := h.run(append([]string{"PEAL_MAX_PARALLEL=2", "PEAL_CONTINUE_WITH_REMAINING_TASKS=true"}, env...)...)
	if err != nil || !slices.Equal(out.Failed, []int{1, 2}) {
		t.Fatalf("%v: err %v, outcome %+v", env, err, out)
	}
	if calls := h.calls(); len(calls) != 0 {
		t.Fatalf("%v: agent calls %+v", env, calls)
	}
	if left := leftovers(t, h); len(left) > 0 {
		t.Fatalf("%v: left behind: %q", env, left)
	}
	return h.log.String()
}

// TestWorktreeInterrupted: a signal mid-block stops the agents; a task that
// was merged stays merged and completed, a task that completed but waited
// for an earlier one to be merged keeps its work on a kept branch, the rest
// is removed, and a re-run runs what was not merged.
func TestWorktreeInterrupted(t *testing.T) {
	t.Parallel()
	h := isolatedHarness(t, parallelPlan("ppp"))
	ready := readyPipe(t)
	h.scenario(map[string][]fakes.Outcome{
		"execute:1": {writes("one.txt", "1")},
		"execute:2": {{WriteFiles: map[string]string{ready: "x", "two.txt": "2"}, Hang: true}},
		"execute:3": {writes("three.txt", "3")},
	})
	r := startRun(h, "PEAL_MAX_PARALLEL=3")
	waitReady(t, ready)
	r.events.wait(t, "task 1 merged", 1, func(rec logRecord) bool {
		return rec.msg == "task merged into the work tree" && rec.attrs["task"] == "1"
	})
	r.events.wait(t, "task 3 ended", 1, func(rec logRecord) bool {
		return rec.msg == "task ended in its worktree, its work waits to be merged" && rec.attrs["task"] == "3"
	})
	r.cancel(errors.New("SIGINT"))
	if _, err := r.wait(t); !isInterrupted(err) {
		t.Fatalf("err = %v", err)
	}
	if !slices.Equal(h.state().CompletedTaskIndices, []int{1}) {
		t.Fatalf("state %+v", h.state())
	}
	if got := testgit.Git(t, h.repo, "status", "--porcelain"); got != "" {
		t.Fatalf("work tree not clean: %q", got)
	}
	if left := leftovers(t, h); len(left) > 0 {
		t.Fatalf("left behind: %q", left)
	}
	// Task 2, cut off, and task 3, not merged: their work is kept.
	kept := keptBranches(t, h)
	if len(kept) != 2 || !strings.HasPrefix(kept[0], worktree.KeptPrefix+"task-2-") || !strings.HasPrefix(kept[1], worktree.KeptPrefix+"task-3-") {
		t.Fatalf("kept branches %q", kept)
	}
	if got := testgit.Git(t, h.repo, "show", kept[0]+":two.txt"); got != "2" {
		t.Fatalf("task 2's work on its kept branch: %q", got)
	}

	h.scenario(nil)
	before := len(h.calls())
	out, err := h.run("PEAL_MAX_PARALLEL=3")
	if err != nil || !slices.Equal(out.Completed, []int{2, 3}) || !slices.Equal(h.state().CompletedTaskIndices, []int{1, 2, 3}) {
		t.Fatalf("re-run: err %v, outcome %+v", err, out)
	}
	again := fakes.Keys(h.calls()[before:])
	slices.Sort(again)
	if !slices.Equal(again, []string{"execute:2", "execute:3", "plan:2", "plan:3"}) {
		t.Fatalf("re-run calls %q", again)
	}
	if left := leftovers(t, h); len(left) > 0 {
		t.Fatalf("left behind after the re-run: %q", left)
	}
}

// TestWorktreeLeftoversOfAKilledRun: what a run killed in a block left (a
// worktree with its branch, stet's folder beside it, a merge half done) is
// removed by the next run, which runs the tasks again.
func TestWorktreeLeftoversOfAKilledRun(t *testing.T) {
	t.Parallel()
	h := isolatedHarness(t, parallelPlan("pp"))
	scope := state.CallScope(h.stateDir)
	root := filepath.Join(h.stateDir, worktree.Folder)
	// Task 1 was being merged, task 2 still ran, when the run died.
	for task, content := range map[int]string{1: "one\n", 2: "two\n"} {
		wt := leaveTaskWorktree(t, h, task)
		os.WriteFile(filepath.Join(wt, "base.txt"), []byte(content), 0o644)
		testgit.Git(t, wt, "commit", "-q", "-am", "work")
		os.MkdirAll(filepath.Join(wt+".review", "stet"), 0o755)
	}
	os.WriteFile(filepath.Join(h.repo, "base.txt"), []byte("main\n"), 0o644)
	testgit.Git(t, h.repo, "commit", "-q", "-am", "main moved")
	cmd := []string{"merge", "--no-ff", "-m", "half", fmt.Sprintf("peal-%s/task-1", scope)}
	if err := gitFails(h, cmd...); err == nil {
		t.Fatal("the set-up merge should conflict")
	}
	os.WriteFile(filepath.Join(root, "merging"), []byte("x\n"), 0o644)

	h.scenario(map[string][]fakes.Outcome{"execute:1": {writes("one.txt", "1")}, "execute:2": {writes("two.txt", "2")}})
	out, err := h.run("PEAL_MAX_PARALLEL=2")
	if err != nil || !slices.Equal(out.Completed, []int{1, 2}) {
		t.Fatalf("err %v, outcome %+v\n%s", err, out, h.log.String())
	}
	if fileIn(t, h.repo, "base.txt") != "main\n" || fileIn(t, h.repo, "one.txt") != "1" {
		t.Fatal("the work tree does not hold the re-run's work on the main line")
	}
	if left := leftovers(t, h); len(left) > 0 {
		t.Fatalf("left behind: %q", left)
	}
	if !strings.Contains(h.log.String(), "undoing the merge of a task an earlier run left half done") {
		t.Fatalf("log:\n%s", h.log.String())
	}
}

// TestWorktreeLeftoversSweptDespiteASignal: a signal that comes while a run
// sweeps what a killed run left does not cut the sweep short: the worktrees
// and branches are gone when the interrupted run returns, before any agent
// call.
func TestWorktreeLeftoversSweptDespiteASignal(t *testing.T) {
	t.Parallel()
	h := isolatedHarness(t, parallelPlan("pp"))
	leaveTaskWorktree(t, h, 1)
	leaveTaskWorktree(t, h, 2)
	// A third branch whose worktree is already gone, as a run killed after
	// removing a finished task's worktree leaves it.
	testgit.Git(t, h.repo, "branch", h.trees().Of(3).Branch)
	if len(leftovers(t, h)) == 0 {
		t.Fatal("the set-up left nothing to sweep")
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("a signal"))
	_, err := h.runCtx(ctx, h.config("PEAL_MAX_PARALLEL=2"))
	if !isInterrupted(err) {
		t.Fatalf("err %v, want an interruption\n%s", err, h.log.String())
	}
	if calls := h.calls(); len(calls) != 0 {
		t.Fatalf("agent calls %q", fakes.Keys(calls))
	}
	if left := leftovers(t, h); len(left) > 0 {
		t.Fatalf("left behind: %q\n%s", left, h.log.String())
	}
}

// trees are the worktrees of the runs of h, as a run makes them (checking
// out the folders sparse, or the whole tree).
func (h *harness) trees(sparse ...string) *worktree.Set {
	caller := phase.Caller{Dir: h.repo, Limits: phase.Limits{Timeout: time.Minute, KillGrace: time.Second}, Env: testgit.Env}
	log := slog.New(slog.DiscardHandler)
	return worktree.New(gitrepo.New(caller, log, time.Minute, h.repo), log, h.stateDir, state.CallScope(h.stateDir), sparse)
}

// leaveTaskWorktree makes the worktree of task, on its branch, where a run
// of h makes it, as a run killed in a block leaves it; it returns its path.
func leaveTaskWorktree(t *testing.T, h *harness, task int) string {
	t.Helper()
	tt := h.trees().Of(task)
	os.MkdirAll(filepath.Dir(tt.Path), 0o755)
	testgit.Git(t, h.repo, "worktree", "add", "-q", "-b", tt.Branch, tt.Path)
	return tt.Path
}

// gitFails runs git in the harness's repository and returns its error
// instead of failing the test.
func gitFails(h *harness, args ...string) error {
	_, err := gitrepo.Plain(h.repo, testgit.Env...).Command(args...).Run(context.Background())
	return err
}

// TestWorktreeFallsBackToShared: a tree with uncommitted changes cannot be
// split into worktrees: the block runs in the shared tree and says why.
// (Confined tasks work in the run's worktree, made from HEAD, which has
// none: TestConfinedRunDirtyTree.)
func TestWorktreeFallsBackToShared(t *testing.T) {
	t.Parallel()
	h := isolatedHarness(t, parallelPlan("pp"))
	os.WriteFile(filepath.Join(h.repo, "dirty.txt"), []byte("x"), 0o644)
	if _, err := h.run("PEAL_MAX_PARALLEL=2", "PEAL_CONFINE=off"); err != nil {
		t.Fatal(err)
	}
	for _, c := range h.calls() {
		if c.Cwd != h.repo {
			t.Fatalf("%s ran in %s", c.Key, c.Cwd)
		}
	}
	if !strings.Contains(h.log.String(), "the work tree has uncommitted changes (dirty.txt)") {
		t.Fatalf("log:\n%s", h.log.String())
	}
}

// TestWorktreeReviewPerTask: with stet, each task of a block is reviewed on
// its own, in its worktree, with stet's state and worktrees in the task's
// own review folder; the triage and address rounds of one task's finding
// are that task's alone, their calls run in its worktree, and both tasks'
// commits land.
func TestWorktreeReviewPerTask(t *testing.T) {
	t.Parallel()
	for _, triage := range []bool{false, true} {
		t.Run(fmt.Sprintf("triage %v", triage), func(t *testing.T) {
			t.Parallel()
			h := isolatedHarness(t, parallelPlan("pp"))
			env := h.withStet(fakes.StetScenario{})
			h.scenario(map[string][]fakes.Outcome{
				"execute:1": plants(twoFindings()[:1]...),
				"execute:2": {writes("two.txt", "2")},
				"triage":    {{Stdout: "We need to fix F001."}},
				"address":   {{StetFix: -1}},
			})
			out, err := h.run(append(env, "PEAL_MAX_PARALLEL=2", fmt.Sprintf("PEAL_STET_DISABLE_LLM_TRIAGE=%v", !triage))...)
			if err != nil || !slices.Equal(out.Completed, []int{1, 2}) {
				t.Fatalf("err %v, outcome %+v", err, out)
			}
			perTask := map[string][]string{}
			for _, c := range h.stetCalls() {
				task := c.Env["PEAL_TASK_INDEX"]
				if task == "" {
					continue // the run's own check of a session left open
				}
				wt := filepath.Join(h.stateDir, worktree.Folder, "task-"+task)
				if c.Cwd != wt || c.Env["STET_STATE_DIR"] != filepath.Join(wt+".review", "stet") || c.Env["STET_WORKTREE_ROOT"] != filepath.Join(wt+".review", "worktrees") {
					t.Errorf("stet %s of task %s ran in %s with %v", c.Cmd, task, c.Cwd, c.Env)
				}
				perTask[task] = append(perTask[task], c.Cmd)
			}
			if got := strings.Join(perTask["1"], " "); got != "start run run run run finish" {
				t.Errorf("task 1's stet commands %q", got)
			}
			if got := strings.Join(perTask["2"], " "); got != "start run run finish" {
				t.Errorf("task 2's stet commands %q", got)
			}
			wantKeys := "address:1"
			if triage {
				wantKeys = "triage:1 address:1"
			}
			var phase3 []string
			for _, c := range h.calls() {
				if k := c.Key; strings.HasPrefix(k, "triage:") || strings.HasPrefix(k, "address:") {
					phase3 = append(phase3, k)
				}
				want := filepath.Join(h.stateDir, worktree.Folder, "task-"+c.Task)
				if c.Cwd != want {
					t.Errorf("%s ran in %s, want %s", c.Key, c.Cwd, want)
				}
				if i := slices.Index(c.Argv, "--workspace"); i < 0 || c.Argv[i+1] != want {
					t.Errorf("%s has workspace %v, want %s", c.Key, c.Argv, want)
				}
			}
			if got := strings.Join(phase3, " "); got != wantKeys {
				t.Fatalf("triage and address calls %q, want %q (all calls %q)", got, wantKeys, h.keys())
			}
			commits := strings.Join(strings.Split(testgit.Git(t, h.repo, "log", "--reverse", "--topo-order", "--format=%s", "--no-merges"), "\n"), "|")
			if commits != "root|peal: task 1 - fake plan output for task 1|peal: task 1 - address round 1|peal: task 2 - fake plan output for task 2" {
				t.Fatalf("commits %q", commits)
			}
			if left := leftovers(t, h); len(left) > 0 {
				t.Fatalf("left behind: %q", left)
			}
		})
	}
}

// detailsSeen is an Observer that keeps what the live line would show of
// each agent call: phase:task and its detail.
type detailsSeen struct {
	mu    sync.Mutex
	lines []string
}

func (o *detailsSeen) PlanLoaded(int) {}
func (o *detailsSeen) CallStarted(info phase.CallInfo) func() {
	if info.Attempt.Role == "" {
		return nil
	}
	d := ""
	if info.Detail != nil {
		d = info.Detail()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lines = append(o.lines, fmt.Sprintf("%s:%d %s", info.Phase, info.Task, d))
	return nil
}

func (o *detailsSeen) seen() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(slices.Sorted(slices.Values(o.lines)), "|")
}

// TestWorktreeBlockRecorded: the run record holds every call of the tasks
// that ran in worktrees, each with its end, and each task's start and end.
func TestWorktreeBlockRecorded(t *testing.T) {
	t.Parallel()
	h := isolatedHarness(t, parallelPlan("pp"))
	if _, err := h.run("PEAL_MAX_PARALLEL=2"); err != nil {
		t.Fatal(err)
	}
	events, _, err := state.ReadRecord(filepath.Join(h.stateDir, state.RecordName))
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	taskOf := map[string]int{} // call id -> task
	for _, ev := range events {
		if ev.Ev == state.EvCallStart && ev.Task != nil {
			taskOf[ev.Call] = *ev.Task
		}
		task := taskOf[ev.Call]
		if ev.Task != nil {
			task = *ev.Task
		}
		if task > 0 {
			counts[fmt.Sprintf("%s:%d", ev.Ev, task)]++
		}
	}
	for _, task := range []int{1, 2} {
		for ev, want := range map[string]int{state.EvTaskStart: 1, state.EvTaskEnd: 1, state.EvCallStart: 2, state.EvCallEnd: 2, state.EvAttempt: 2} {
			if got := counts[fmt.Sprintf("%s:%d", ev, task)]; got != want {
				t.Errorf("task %d: %d %s events, want %d (all: %v)", task, got, ev, want, counts)
			}
		}
	}
}

// TestWorktreeMergeFails: a merge that fails for a reason other than a
// conflict or a signal (here the record of the merge cannot be written)
// fails its task with that reason, and the task's work is kept on a branch.
func TestWorktreeMergeFails(t *testing.T) {
	t.Parallel()
	h := isolatedHarness(t, parallelPlan("pp"))
	// The agent of task 1 puts a folder where the merge writes its record
	// (unconfined: a confined call cannot write the state folder).
	record := filepath.Join(h.stateDir, worktree.Folder, "merging")
	h.scenario(map[string][]fakes.Outcome{
		"execute:1": {{WriteFiles: map[string]string{"one.txt": "1"}, Commands: [][]string{{"mkdir", "-p", record}}}},
		"execute:2": {writes("two.txt", "2")},
	})
	out, err := h.run("PEAL_MAX_PARALLEL=2", "PEAL_CONTINUE_WITH_REMAINING_TASKS=true", "PEAL_CONFINE=off")
	if err != nil || !slices.Equal(out.Failed, []int{1, 2}) || len(out.Completed) != 0 {
		t.Fatalf("err %v, outcome %+v", err, out)
	}
	log := h.log.String()
	if strings.Contains(log, "interrupted") {
		t.Fatalf("a failed merge reads as an interruption:\n%s", log)
	}
	for _, task := range []int{1, 2} {
		attempts := retryState(t, h, h.ticket(task)).Attempts
		if len(attempts) != 1 || attempts[0].Status != tickets.AttemptError {
			t.Fatalf("task %d's attempts %+v", task, attempts)
		}
		want := fmt.Sprintf(`msg="task failed, continuing with the remaining tasks" task=%d err="the merge note %s is a folder: remove it"`, task, record)
		if !strings.Contains(log, want) {
			t.Fatalf("task %d's failure does not name its cause (%s):\n%s", task, want, log)
		}
	}
	if kept := keptBranches(t, h); len(kept) != 2 {
		t.Fatalf("kept branches %q", kept)
	}
}
