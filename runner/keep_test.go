package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"peal/confine"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
	"peal/report"
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

// refsOf are the repository's branches and tags but peal's, with HEAD's
// branch, as one string.
func refsOf(t *testing.T, h *harness) string {
	t.Helper()
	refs := testgit.Git(t, h.repo, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads", "refs/tags")
	var out []string
	for _, l := range strings.Split(refs, "\n") {
		if !strings.Contains(l, " refs/heads/peal-") {
			out = append(out, l)
		}
	}
	return testgit.Git(t, h.repo, "symbolic-ref", "HEAD") + "; " + strings.Join(out, "; ")
}

// TestHistoryIsOnlyAddedTo: a task whose agent moves the user's branch
// backwards, rewrites a commit that was there when it started, or moves,
// deletes or leaves another ref of the user's, fails with one line naming
// what moved; every ref is put back where it was, HEAD on its branch, and
// what the agent made is kept on a branch. Unconfined (off, and auto where
// the kernel confines no files) the agent's own git can do it; where the
// kernel confines files it cannot write the repository's refs at all.
func TestHistoryIsOnlyAddedTo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, cmd, says string
		keeps           bool // new commits, kept on a branch
	}{
		{"reset", "git reset -q --hard HEAD~2", "branch BRANCH moved from SHA to SHA, which does not hold it (a reset, an amended or rebased commit)", false},
		{"amend", "git commit -q --amend -m rewritten", "branch BRANCH moved from SHA to SHA, which does not hold it (a reset, an amended or rebased commit)", true},
		{"rebase", "GIT_COMMITTER_DATE=2001-01-01T00:00:00 git rebase -q --force-rebase --root", "branch BRANCH moved from SHA to SHA, which does not hold it (a reset, an amended or rebased commit)", true},
		{"update-ref", "git update-ref refs/heads/other HEAD~1", "branch other moved from SHA to SHA", false},
		{"tag", "git tag -f v1 HEAD~1", "tag v1 moved from SHA to SHA", false},
		{"branch deleted", "git branch -q -D other", "branch other was deleted", false},
		{"another branch", "git checkout -q other", "HEAD was moved from branch BRANCH to branch other", false},
	} {
		for _, mode := range []string{"off", "auto unenforced", "auto"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				h := newHarness(t, "## Task 1\nA\n")
				h.confine, _, _ = strings.Cut(mode, " ")
				branch := userRepo(t, h)
				for _, c := range []string{"two", "three"} {
					os.WriteFile(filepath.Join(h.repo, c+".txt"), []byte(c+"\n"), 0o644)
					testgit.Git(t, h.repo, "add", ".")
					testgit.Git(t, h.repo, "commit", "-q", "-m", c)
				}
				testgit.Git(t, h.repo, "branch", "other")
				testgit.Git(t, h.repo, "tag", "v1")
				before := refsOf(t, h)
				h.scenario(map[string][]fakes.Outcome{"execute:1": {{Commands: [][]string{{"sh", "-c", tc.cmd}}}}})
				var opts []Option
				if mode == "auto unenforced" {
					opts = append(opts, unenforced())
				}
				_, err := h.runCfg(h.config("PEAL_COMMIT_AFTER_PHASE2=true"), opts...)
				if after := refsOf(t, h); after != before {
					t.Fatalf("refs %s, want %s (err %v)", after, before, err)
				}
				if status := testgit.Git(t, h.repo, "status", "--porcelain"); status != "" {
					t.Fatalf("status %q", status)
				}
				if mode == "auto" && confine.Probe().Files {
					if err != nil {
						t.Fatalf("confined, the agent's git could not write the refs, and the task fails: %v", err)
					}
					return
				}
				var te *TaskError
				want := "rewrote the repository's history (" + strings.ReplaceAll(tc.says, "BRANCH", branch) + ")"
				if got := hashes.ReplaceAllString(fmtErr(err), "SHA"); !errors.As(err, &te) || !strings.Contains(got, want) || !strings.Contains(got, "put back where it was") {
					t.Fatalf("err %v, want %q", err, want)
				}
				kept := keptBranches(t, h)
				if tc.keeps != (len(kept) == 1) || (tc.keeps && !strings.Contains(err.Error(), "what the task made is kept on branch "+kept[0])) {
					t.Fatalf("kept %q: %v", kept, err)
				}
			})
		}
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestUsersFilesKeptWhenATaskRemovesThem: without a review or commits, a
// task removes the user's uncommitted edit of a tracked file, a staged
// file and an ignored .env, and replaces an untracked file. The task
// completes, and each of the user's versions is kept on a ref of its own
// in the repository, listed with the command that puts it back in the run
// summary, at the end of the run's log and by `peal status`, which still
// lists them once the state folder is removed to start over; each command
// puts its file back.
func TestUsersFilesKeptWhenATaskRemovesThem(t *testing.T) {
	t.Parallel()
	for _, mode := range keepModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "## Task 1\nA\n")
			h.confine = mode
			os.WriteFile(filepath.Join(h.repo, ".gitignore"), []byte(".env\n"), 0o644)
			os.WriteFile(filepath.Join(h.repo, "README.md"), []byte("committed\n"), 0o644)
			userRepo(t, h)
			mine := map[string]string{"README.md": "my edit\n", "staged.txt": "staged\n", "notes.txt": "my notes\n", ".env": "SECRET=1\n"}
			for name, text := range mine {
				os.WriteFile(filepath.Join(h.repo, name), []byte(text), 0o644)
			}
			testgit.Git(t, h.repo, "add", "staged.txt")
			h.scenario(map[string][]fakes.Outcome{"execute:1": {{Commands: [][]string{{"sh", "-c", "rm -f README.md staged.txt .env && echo theirs > notes.txt && echo theirs > keep.txt"}}}}})
			out, err := h.run()
			if err != nil || !slices.Equal(out.Completed, []int{1}) {
				t.Fatalf("err %v, outcome %+v", err, out)
			}
			sum, _ := h.summary()
			if len(sum.Kept) != 1 || sum.Kept[0].What != "files" || !strings.HasPrefix(sum.Kept[0].Ref, "refs/peal-kept/files/task-1-") {
				t.Fatalf("summary kept %+v", sum.Kept)
			}
			var paths []string
			for _, f := range sum.Kept[0].Files {
				paths = append(paths, f.Path)
			}
			if !slices.Equal(paths, []string{".env", "README.md", "notes.txt", "staged.txt"}) {
				t.Fatalf("kept %q", paths)
			}
			if !strings.Contains(h.log.String(), "kept for you: files of yours that task 1 removed or replaced are kept on "+sum.Kept[0].Ref+": .env (put it back: git restore --source=") {
				t.Fatalf("the end of the log does not list them:\n%s", h.log.String())
			}
			// Starting over: the state folder goes, what was kept stays.
			cfg := h.config()
			if err := os.RemoveAll(h.stateDir); err != nil {
				t.Fatal(err)
			}
			st, _, err := report.Status(cfg)
			if err != nil || len(st.Kept) != 1 || st.Kept[0].Ref != sum.Kept[0].Ref || len(st.Kept[0].Files) != 4 {
				t.Fatalf("status: err %v, kept %+v", err, st.Kept)
			}
			for _, f := range st.Kept[0].Files {
				testgit.Git(t, h.repo, strings.Fields(strings.TrimPrefix(f.Restore, "git "))...)
				if got := fileIn(t, h.repo, f.Path); got != mine[f.Path] {
					t.Errorf("%s after %s: %q, want %q", f.Path, f.Restore, got, mine[f.Path])
				}
			}
			if fileIn(t, h.repo, "keep.txt") != "theirs\n" {
				t.Error("the task's own work on a committed file is not the work tree's")
			}
		})
	}
}

// TestStagedVersionKept: a file the user staged and then changed again in
// the work tree holds two versions of theirs; a task whose work is
// committed (git add -A) takes the staged one's place in the index. The
// staged version is kept on a ref of its own, whose command puts it back
// in the index; the work tree's version stays, committed.
func TestStagedVersionKept(t *testing.T) {
	t.Parallel()
	for _, mode := range keepModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "## Task 1\nA\n")
			h.confine = mode
			userRepo(t, h)
			os.WriteFile(filepath.Join(h.repo, "keep.txt"), []byte("staged\n"), 0o644)
			testgit.Git(t, h.repo, "add", "keep.txt")
			os.WriteFile(filepath.Join(h.repo, "keep.txt"), []byte("edited after staging\n"), 0o644)
			h.scenario(map[string][]fakes.Outcome{"execute:1": {{WriteFiles: map[string]string{"work.txt": "work\n"}}}})
			out, err := h.run("PEAL_COMMIT_AFTER_PHASE2=true")
			if err != nil || !slices.Equal(out.Completed, []int{1}) {
				t.Fatalf("err %v, outcome %+v", err, out)
			}
			if got := testgit.Git(t, h.repo, "show", "HEAD:keep.txt"); got != "edited after staging" {
				t.Fatalf("the task's commit holds keep.txt = %q", got)
			}
			sum, _ := h.summary()
			if len(sum.Kept) != 1 || !strings.HasPrefix(sum.Kept[0].Ref, "refs/peal-kept/staged/task-1-") || len(sum.Kept[0].Files) != 1 {
				t.Fatalf("summary kept %+v", sum.Kept)
			}
			f := sum.Kept[0].Files[0]
			if f.Path != "keep.txt" || f.Restore != "git restore --source="+sum.Kept[0].Ref+" --staged -- keep.txt" {
				t.Fatalf("kept %+v", f)
			}
			testgit.Git(t, h.repo, strings.Fields(strings.TrimPrefix(f.Restore, "git "))...)
			if got := testgit.Git(t, h.repo, "show", ":keep.txt"); got != "staged" {
				t.Fatalf("the index after %s holds %q", f.Restore, got)
			}
		})
	}
}

// TestHistoryIsOnlyAddedToInABlock: a task of a parallel block, in its own
// worktree, whose agent moves a tag and deletes a branch of the user's
// (the repository's refs are every worktree's) fails with one line naming
// them, and they are put back; the block's other task, which ended before
// them, is merged.
func TestHistoryIsOnlyAddedToInABlock(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"off", "auto unenforced"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			h := isolatedHarness(t, parallelPlan("pp"))
			h.confine, _, _ = strings.Cut(mode, " ")
			os.WriteFile(filepath.Join(h.repo, "two.txt"), []byte("two\n"), 0o644)
			testgit.Git(t, h.repo, "add", ".")
			testgit.Git(t, h.repo, "commit", "-q", "-m", "two")
			testgit.Git(t, h.repo, "branch", "other")
			testgit.Git(t, h.repo, "tag", "v1")
			before := refsOf(t, h)
			gate := readyPipe(t)
			h.scenario(map[string][]fakes.Outcome{
				"plan:1":    {{WaitFile: gate}},
				"execute:1": {{Commands: [][]string{{"sh", "-c", "git tag -f v1 HEAD~1 && git branch -D other"}}}},
				"execute:2": {writes("b.txt", "b\n")},
			})
			var opts []Option
			if mode == "auto unenforced" {
				opts = append(opts, unenforced())
			}
			r := startCfg(h, h.config("PEAL_MAX_PARALLEL=2", "PEAL_CONTINUE_WITH_REMAINING_TASKS=true"), opts...)
			r.events.wait(t, "task 2 ended", 1, func(rec logRecord) bool {
				return rec.msg == "task ended in its worktree, its work waits to be merged" && rec.attrs["task"] == "2"
			})
			os.WriteFile(gate, []byte("go"), 0o644)
			out, err := r.wait(t)
			if err != nil || !slices.Equal(out.Failed, []int{1}) || !slices.Equal(out.Completed, []int{2}) {
				t.Fatalf("err %v, outcome %+v", err, out)
			}
			// Task 2's merge moved the user's branch forward; every other
			// ref is where it was.
			after := refsOf(t, h)
			if _, rest, _ := strings.Cut(after, "; "); !strings.Contains(before, rest[strings.Index(rest, " refs/heads/other"):]) {
				t.Fatalf("refs %s, want %s", after, before)
			}
			if fileIn(t, h.repo, "b.txt") != "b\n" {
				t.Fatal("task 2 was not merged")
			}
			if !strings.Contains(h.log.String(), "rewrote the repository's history (branch other was deleted; tag v1 moved from ") {
				t.Fatalf("the log does not name what moved:\n%s", h.log.String())
			}
		})
	}
}
