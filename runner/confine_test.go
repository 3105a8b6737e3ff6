package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"peal/confine"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
	"peal/plan"
	"peal/worktree"
)

// unenforced confines a run as a machine whose kernel confines no files
// would.
func unenforced() Option { return func(s *settings) { s.unenforced = true } }

// TestGuardRefusesWhatACallPlanted: where the kernel does not confine
// files, a hook planted by an agent call stops the run before peal's next
// git command (here the commit after the execute), with one line naming
// it, even under continue_with_remaining_tasks; a hook that was there
// before the run is honoured as always.
func TestGuardRefusesWhatACallPlanted(t *testing.T) {
	t.Parallel()
	for _, planted := range []bool{true, false} {
		h := newHarness(t, twoTasks)
		h.confine = "auto"
		hooks := filepath.Join(h.repo, ".git", "hooks")
		os.MkdirAll(hooks, 0o755)
		// A hook of the user's, there before the run: it runs at every commit.
		if err := os.WriteFile(filepath.Join(hooks, "post-commit"), []byte("#!/bin/sh\necho >> ran.log\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		testgit.Git(t, h.repo, "commit", "-q", "--allow-empty", "-m", "root")
		os.Remove(filepath.Join(h.repo, "ran.log"))
		out := writes("one.txt", "1")
		if planted {
			out = writes("one.txt", "1", ".git/hooks/post-merge", "#!/bin/sh\ntouch pwned\n")
		}
		h.scenario(map[string][]fakes.Outcome{"execute:1": {out}})
		got, err := h.runCfg(h.config("PEAL_COMMIT_AFTER_PHASE2=true", "PEAL_CONTINUE_WITH_REMAINING_TASKS=true"), unenforced())
		if !planted {
			if err != nil || !slices.Equal(got.Completed, []int{1, 2}) {
				t.Fatalf("no hook planted: err %v, outcome %+v", err, got)
			}
			if log, _ := os.ReadFile(filepath.Join(h.repo, "ran.log")); strings.Count(string(log), "\n") != 2 {
				t.Fatalf("the user's hook ran %q times, want at each of the two commits", log)
			}
			continue
		}
		want := filepath.Join(hooks) + " was changed since the run started (an agent call or a check can write it): peal runs no git and no stet after that"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err %v, want %q\n%s", err, want, h.log.String())
		}
		if keys := h.keys(); keys != "plan:1 execute:1" {
			t.Fatalf("the run went on after the refusal: %s", keys)
		}
		if _, err := os.Stat(filepath.Join(h.repo, "pwned")); err == nil {
			t.Fatal("the planted hook ran")
		}
	}
}

// confinedHarness is a harness whose runs are confined by the kernel (the
// test is skipped where it cannot confine files), on a repository with a
// first commit and an ignored node_modules.
func confinedHarness(t *testing.T, plan string) *harness {
	t.Helper()
	if !confine.Probe().Files {
		t.Skip("this kernel does not confine files")
	}
	h := newHarness(t, plan)
	h.confine = "on"
	os.WriteFile(filepath.Join(h.repo, ".gitignore"), []byte("node_modules/\n"), 0o644)
	testgit.Git(t, h.repo, "add", ".gitignore")
	testgit.Git(t, h.repo, "commit", "-q", "-m", "root")
	os.MkdirAll(filepath.Join(h.repo, "node_modules", "pkg"), 0o755)
	os.WriteFile(filepath.Join(h.repo, "node_modules", "pkg", "index.js"), []byte("module.exports = 1\n"), 0o644)
	return h
}

// TestConfinedRunWorksInItsWorktree: confined, the tasks work in the run's
// worktree, where they make top-level files and folders (which a confined
// call could not do at the top of the work tree, beside .git) and read and
// write what git ignores in the work tree (linked); their work comes back
// to the work tree as each completes: uncommitted without commits, as an
// unconfined run leaves it, or as the run's commits, fast-forward. Nothing
// of the run's worktree is left.
func TestConfinedRunWorksInItsWorktree(t *testing.T) {
	t.Parallel()
	for _, commits := range []bool{false, true} {
		h := confinedHarness(t, twoTasks)
		h.scenario(map[string][]fakes.Outcome{
			"execute:1": {writes("one.txt", "1", "src/new/two.go", "package new\n", "node_modules/pkg/added.js", "x\n")},
			"execute:2": {writes("three.txt", "3")},
		})
		out, err := h.run("PEAL_COMMIT_AFTER_PHASE2=" + fmt.Sprint(commits))
		if err != nil || !slices.Equal(out.Completed, []int{1, 2}) {
			t.Fatalf("commits %v: err %v, outcome %+v\n%s", commits, err, out, h.log.String())
		}
		for name, want := range map[string]string{"one.txt": "1", "src/new/two.go": "package new\n", "three.txt": "3", "node_modules/pkg/added.js": "x\n"} {
			if got := fileIn(t, h.repo, name); got != want {
				t.Errorf("commits %v: %s = %q, want %q", commits, name, got, want)
			}
		}
		for _, c := range h.calls() {
			if !strings.HasSuffix(c.Cwd, filepath.Join("worktrees", "home")) {
				t.Errorf("%s ran in %s, not in the run's worktree", c.Key, c.Cwd)
			}
		}
		log := testgit.Git(t, h.repo, "log", "--format=%s")
		status := testgit.Git(t, h.repo, "status", "--porcelain")
		if commits {
			if log != "peal: task 2 - fake plan output for task 2\npeal: task 1 - fake plan output for task 1\nroot" || status != "" {
				t.Errorf("with commits: log %q, status %q", log, status)
			}
		} else if log != "root" || status != "?? one.txt\n?? src/\n?? three.txt" {
			t.Errorf("without commits: log %q, status %q", log, status)
		}
		if left := leftovers(t, h); len(left) > 0 {
			t.Errorf("left behind: %q", left)
		}
	}
}

// TestConfinedRunDirtyTree: changes the work tree does not commit are in
// the run's worktree, as in the work tree itself: the task sees them, and,
// when the run commits, its commit takes them as one in the work tree
// would; without commits only the task's work comes back. The same under
// confine = on and off.
func TestConfinedRunDirtyTree(t *testing.T) {
	t.Parallel()
	for _, commits := range []bool{false, true} {
		for _, mode := range []string{"on", "off"} {
			h := confinedHarness(t, "## Task 1\nA\n")
			h.confine = mode
			os.WriteFile(filepath.Join(h.repo, "mine.txt"), []byte("mine\n"), 0o644)
			os.WriteFile(filepath.Join(h.repo, "README.md"), []byte("edited\n"), 0o644)
			h.scenario(map[string][]fakes.Outcome{"execute:1": {{
				Commands:   [][]string{{"sh", "-c", "cat mine.txt README.md > seen.txt 2>/dev/null"}},
				WriteFiles: map[string]string{"one.txt": "1"},
			}}})
			if _, err := h.run("PEAL_COMMIT_AFTER_PHASE2=" + fmt.Sprint(commits)); err != nil {
				t.Fatal(err)
			}
			if got := fileIn(t, h.repo, "seen.txt"); got != "mine\nedited\n" {
				t.Errorf("%s, commits %v: the task saw %q", mode, commits, got)
			}
			if fileIn(t, h.repo, "mine.txt") != "mine\n" || fileIn(t, h.repo, "README.md") != "edited\n" || fileIn(t, h.repo, "one.txt") != "1" {
				t.Errorf("%s, commits %v: the work tree lost the user's change or the task's work", mode, commits)
			}
			status, head := testgit.Git(t, h.repo, "status", "--porcelain"), testgit.Git(t, h.repo, "log", "--format=%s", "--name-only", "-1")
			wantStatus, wantHead := "?? README.md\n?? mine.txt\n?? one.txt\n?? seen.txt", "root\n\n.gitignore"
			if commits {
				wantStatus, wantHead = "", "peal: task 1 - fake plan output for task 1\n\nREADME.md\nmine.txt\none.txt\nseen.txt"
			}
			if strings.TrimSpace(status) != wantStatus || head != wantHead {
				t.Errorf("%s, commits %v: status %q, HEAD %q; want %q, %q", mode, commits, status, head, wantStatus, wantHead)
			}
		}
	}
}

// TestConfinedUnfinishedWork: the work a failed task left uncommitted is
// kept on a branch, as an unconfined run keeps it, and the work tree is as
// before the task, whether the run commits or not.
func TestConfinedUnfinishedWork(t *testing.T) {
	t.Parallel()
	for _, commits := range []bool{false, true} {
		for _, mode := range []string{"on", "off"} {
			h := confinedHarness(t, "## Task 1\nA\n")
			h.confine = mode
			h.scenario(map[string][]fakes.Outcome{"execute:1": {{WriteFiles: map[string]string{"half.txt": "half"}, Exit: 1}}})
			if _, err := h.run("PEAL_COMMIT_AFTER_PHASE2=" + fmt.Sprint(commits)); err == nil {
				t.Fatal("the task did not fail")
			}
			kept := keptBranches(t, h)
			if len(kept) != 1 || testgit.Git(t, h.repo, "show", kept[0]+":half.txt") != "half" || testgit.Git(t, h.repo, "status", "--porcelain") != "" ||
				testgit.Git(t, h.repo, "log", "--format=%s") != "root" {
				t.Errorf("%s, commits %v: kept %q, status %q", mode, commits, kept, testgit.Git(t, h.repo, "status", "--porcelain"))
			}
		}
	}
}

// TestConcurrentEditNamed: a file the person changes in the work tree while
// a confined task changes it too in the run's worktree: the work tree
// refuses the task's work, and the line names the file, the branch that
// keeps the work and the next steps; the person's change stays.
func TestConcurrentEditNamed(t *testing.T) {
	t.Parallel()
	h := confinedHarness(t, "## Task 1\nA\n")
	os.WriteFile(filepath.Join(h.repo, "notes.txt"), []byte("v1\n"), 0o644)
	testgit.Git(t, h.repo, "add", "notes.txt")
	testgit.Git(t, h.repo, "commit", "-q", "-m", "notes")
	h.scenario(map[string][]fakes.Outcome{"execute": {{WriteFiles: map[string]string{"notes.txt": "the task's\n"}}}})
	edit := withTaskStart(func(plan.Task) { os.WriteFile(filepath.Join(h.repo, "notes.txt"), []byte("the person's\n"), 0o644) })
	_, err := h.runCfg(h.config("PEAL_COMMIT_AFTER_PHASE2=true"), edit)
	var be *worktree.BringError
	if !errors.As(err, &be) || be.Path != "notes.txt" {
		t.Fatalf("run: %v", err)
	}
	msg := err.Error()
	_, kept, _ := strings.Cut(msg, "kept on branch ")
	kept, _, _ = strings.Cut(kept, ": ")
	want := "task 1: the work tree cannot take the change of notes.txt: it changed in the work tree while the run worked, and the run's work changes it too; the run's work is kept on branch " +
		kept + ": commit or stash your change of notes.txt, then take the run's work with git merge " + kept + " (or run peal again)"
	if msg != want || !strings.HasPrefix(kept, "peal-kept/") {
		t.Fatalf("line %q\nwant %q", msg, want)
	}
	if data, _ := os.ReadFile(filepath.Join(h.repo, "notes.txt")); string(data) != "the person's\n" {
		t.Fatalf("the person's change: %q", data)
	}
	if got := testgit.Git(t, h.repo, "show", kept+":notes.txt"); got != "the task's" {
		t.Fatalf("the kept branch holds %q", got)
	}
}
