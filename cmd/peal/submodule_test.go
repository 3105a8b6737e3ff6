package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
)

// submoduleRepo gives the sandbox's repository a submodule lib, which has a
// submodule inner of its own, both checked out, and changes the user has
// not committed in them: lib/l.txt and lib/inner/i.txt changed, and
// lib/build/out.txt, a file lib's .gitignore ignores.
func submoduleRepo(t *testing.T, s *sandbox) {
	t.Helper()
	src := func(name string, files map[string]string) string {
		dir := filepath.Join(s.dir, "src", name)
		testgit.Init(t, dir)
		for f, text := range files {
			os.WriteFile(filepath.Join(dir, f), []byte(text), 0o644)
			testgit.Git(t, dir, "add", f)
		}
		testgit.Git(t, dir, "commit", "-q", "-m", name)
		return dir
	}
	inner := src("inner", map[string]string{"i.txt": "inner\n"})
	lib := src("lib", map[string]string{"l.txt": "lib\n", ".gitignore": "build/\n"})
	testgit.Git(t, lib, "-c", "protocol.file.allow=always", "submodule", "add", "-q", inner, "inner")
	testgit.Git(t, lib, "commit", "-q", "-m", "inner")
	os.WriteFile(filepath.Join(s.repo, "README.md"), []byte("project\n"), 0o644)
	testgit.Git(t, s.repo, "add", "README.md")
	testgit.Git(t, s.repo, "commit", "-q", "-m", "root")
	testgit.Git(t, s.repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "lib")
	testgit.Git(t, s.repo, "-c", "protocol.file.allow=always", "submodule", "update", "-q", "--init", "--recursive")
	testgit.Git(t, s.repo, "commit", "-q", "-m", "lib")
	os.WriteFile(filepath.Join(s.repo, "lib", "l.txt"), []byte("lib\nthe user's\n"), 0o644)
	os.WriteFile(filepath.Join(s.repo, "lib", "inner", "i.txt"), []byte("inner\nthe user's\n"), 0o644)
	os.MkdirAll(filepath.Join(s.repo, "lib", "build"), 0o755)
	os.WriteFile(filepath.Join(s.repo, "lib", "build", "out.txt"), []byte("out\n"), 0o644)
}

// claudeEnv is the sandbox's environment with the fake agent as Claude
// Code, which runs the commands of its scenario as its tool calls.
func claudeEnv(t *testing.T, s *sandbox, extra ...string) []string {
	t.Helper()
	claude := filepath.Join(s.dir, "bin", "claude")
	os.MkdirAll(filepath.Dir(claude), 0o755)
	if err := os.Symlink(bins["fakeagent"], claude); err != nil {
		t.Fatal(err)
	}
	return s.env(append([]string{"PEAL_AGENT_KIND=claude", "PEAL_AGENT_CMD=" + claude, "ANTHROPIC_API_KEY=sk-test-mock"}, extra...)...)
}

// TestSubmodulesAsTheUserHasThem: a task finds the submodules as the user
// has them (checked out, with what they hold uncommitted and what git
// ignores there), and its changes in them reach the work tree's checkouts,
// uncommitted there, whether it works in the work tree (confine = off) or
// in the run's worktree; the next task, and the next run, find them; the
// work beside them is committed or not as ever, and no commit of the
// user's moves. The suite runs it under both.
func TestSubmodulesAsTheUserHasThem(t *testing.T) {
	t.Parallel()
	for _, commits := range []bool{false, true} {
		t.Run(map[bool]string{false: "uncommitted", true: "commit_after_phase2"}[commits], func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t, "## Task 1\nWork in lib\n## Task 2\nMore\n")
			submoduleRepo(t, s)
			heads := func() []string {
				return []string{testgit.Git(t, s.repo, "rev-parse", "HEAD"), testgit.Git(t, filepath.Join(s.repo, "lib"), "rev-parse", "HEAD"),
					testgit.Git(t, filepath.Join(s.repo, "lib", "inner"), "rev-parse", "HEAD")}
			}
			before := heads()
			seen := filepath.Join(s.agentDir, "seen")
			s.scenario(map[string][]fakes.Outcome{"execute:1": {{WriteFiles: map[string]string{"top.txt": "top\n"}, Commands: [][]string{{"sh", "-c",
				`cat lib/l.txt lib/inner/i.txt lib/build/out.txt > "$1" && echo task >> lib/l.txt && echo new > lib/new.txt && ` +
					`echo task >> lib/inner/i.txt && echo made > lib/build/made.txt`, "sh", seen}}}},
				// Task 2 finds task 1's work, and adds to it.
				"execute:2": {{Commands: [][]string{{"sh", "-c", `grep -q task lib/l.txt && echo two >> lib/l.txt`}}}}})
			env := append(claudeEnv(t, s, "PEAL_COMMIT_AFTER_PHASE2="+map[bool]string{false: "false", true: "true"}[commits]), testgit.Env...)
			r := s.peal(env, "run")
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if got := fileIn(t, s.agentDir, "seen"); got != "lib\nthe user's\ninner\nthe user's\nout\n" {
				t.Fatalf("the task found in the submodules %q", got)
			}
			for name, want := range map[string]string{"lib/l.txt": "lib\nthe user's\ntask\ntwo\n", "lib/new.txt": "new\n",
				"lib/inner/i.txt": "inner\nthe user's\ntask\n", "lib/build/out.txt": "out\n", "lib/build/made.txt": "made\n", "top.txt": "top\n"} {
				if got := fileIn(t, s.repo, name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
			after := heads()
			if !commits && !slices.Equal(after, before) || commits && !slices.Equal(after[1:], before[1:]) {
				t.Errorf("HEADs moved from %q to %q", before, after)
			}
			if commits {
				if files := testgit.Git(t, s.repo, "show", "--name-only", "--format=%s", "HEAD"); files != "peal: task 1 - fake plan output for task 1\n\ntop.txt" {
					t.Errorf("the tasks' commits: %q", files)
				}
			}
			want := map[bool]string{false: "M lib\n?? top.txt", true: "M lib"}[commits] // " M lib", trimmed
			if got := testgit.Git(t, s.repo, "status", "--porcelain"); got != want {
				t.Errorf("the work tree's status %q, want %q", got, want)
			}
			if got := testgit.Git(t, filepath.Join(s.repo, "lib"), "status", "--porcelain"); got != "M inner\n M l.txt\n?? new.txt" {
				t.Errorf("lib's status %q", got)
			}
			if got := testgit.Git(t, filepath.Join(s.repo, "lib", "inner"), "status", "--porcelain"); got != "M i.txt" {
				t.Errorf("inner's status %q", got)
			}
			if kept := testgit.Git(t, filepath.Join(s.repo, "lib"), "branch", "--list", "peal-kept/*"); kept != "" {
				t.Errorf("kept in lib: %q", kept)
			}
			// The next run (in the run's worktree an earlier run left,
			// when confined) finds it all too.
			os.WriteFile(s.plan, []byte("## Task 1\nWork in lib\n## Task 2\nMore\n## Task 3\nInner\n"), 0o644)
			s.scenario(map[string][]fakes.Outcome{"execute:3": {{Commands: [][]string{{"sh", "-c", `grep -q two lib/l.txt && echo three >> lib/inner/i.txt`}}}}})
			if r := s.peal(env, "run"); r.code != 0 {
				t.Fatalf("the next run: exit %d: %s", r.code, r.stderr)
			}
			if got := fileIn(t, s.repo, "lib/inner/i.txt"); got != "inner\nthe user's\ntask\nthree\n" {
				t.Errorf("the next run: lib/inner/i.txt = %q", got)
			}
		})
	}
}

// TestSubmoduleWorkKept: a confined task whose work in a submodule the work
// tree cannot take (it made a repository of its own there) fails in one
// line naming it and the branches its work is kept on: the submodule's
// files on a branch of the submodule's repository, the rest on one of the
// repository's; the user's files and commits are as they were.
func TestSubmoduleWorkKept(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	s := newSandbox(t, "## Task 1\nWork in lib\n")
	submoduleRepo(t, s)
	s.scenario(map[string][]fakes.Outcome{"execute:1": {{WriteFiles: map[string]string{"top.txt": "top\n"}, Commands: [][]string{{"sh", "-c",
		`echo task >> lib/l.txt && git init -q lib/evil && echo e > lib/evil/e.txt`}}}}})
	r := s.peal(append(claudeEnv(t, s, "PEAL_CONFINE=on"), testgit.Env...), "run")
	last := lastLine(r.stderr)
	if r.code != 1 || !strings.Contains(last, "a git repository that a call made (lib/evil/, with its own .git)") ||
		!strings.Contains(last, "the run's work is kept on branch peal-kept/task-1-") || !strings.Contains(last, "of the submodule lib") {
		t.Fatalf("exit %d, last line %q", r.code, last)
	}
	lib := filepath.Join(s.repo, "lib")
	kept := strings.TrimSpace(strings.TrimPrefix(testgit.Git(t, lib, "branch", "--list", "peal-kept/*"), "*"))
	if kept == "" || !strings.Contains(last, "branch "+kept+" of the submodule lib") {
		t.Fatalf("kept in lib: %q; last line %q", kept, last)
	}
	if got := testgit.Git(t, lib, "show", kept+":l.txt"); got != "lib\nthe user's\ntask" {
		t.Errorf("the kept l.txt: %q", got)
	}
	if got := testgit.Git(t, lib, "show", kept+":evil/e.txt"); got != "e" {
		t.Errorf("the kept evil/e.txt: %q", got)
	}
	if got := fileIn(t, s.repo, "lib/l.txt"); got != "lib\nthe user's\n" {
		t.Errorf("the user's lib/l.txt: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(lib, "evil")); err == nil {
		t.Error("the call's repository reached the work tree")
	}
}

// TestSubmoduleMovedByTheUser: the user committed in a submodule and did
// not record its new commit in the repository; a task's commit takes it, as
// git add -A in the work tree does, whether the task worked there or in the
// run's worktree. The suite runs it under both.
func TestSubmoduleMovedByTheUser(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nWork\n")
	submoduleRepo(t, s)
	lib := filepath.Join(s.repo, "lib")
	testgit.Git(t, lib, "commit", "-q", "-a", "-m", "the user's")
	moved := testgit.Git(t, lib, "rev-parse", "HEAD")
	s.scenario(map[string][]fakes.Outcome{"execute:1": {{WriteFiles: map[string]string{"top.txt": "top\n"}}}})
	r := s.peal(append(claudeEnv(t, s, "PEAL_COMMIT_AFTER_PHASE2=true"), testgit.Env...), "run")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if files := testgit.Git(t, s.repo, "show", "--name-only", "--format=", "HEAD"); files != "lib\ntop.txt" {
		t.Errorf("the task's commit holds %q", files)
	}
	if got := testgit.Git(t, s.repo, "rev-parse", "HEAD:lib"); got != moved {
		t.Errorf("the task's commit records lib at %s, want %s", got, moved)
	}
	if got := testgit.Git(t, lib, "rev-parse", "HEAD"); got != moved {
		t.Errorf("lib moved to %s", got)
	}
}

// TestSubmodulesInAParallelBlock: a task's own worktree would hold the
// submodules empty, so a parallel block on a repository with submodules
// checked out works where they are (the work tree, or the run's worktree
// when confined), says so, and both tasks' work in the submodule comes back.
func TestSubmodulesInAParallelBlock(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1 (parallel)\nOne\n## Task 2 (parallel)\nTwo\n")
	submoduleRepo(t, s)
	// A clean work tree, as a block's own worktrees need.
	testgit.Git(t, filepath.Join(s.repo, "lib"), "checkout", "-q", ".")
	testgit.Git(t, filepath.Join(s.repo, "lib", "inner"), "checkout", "-q", ".")
	s.scenario(map[string][]fakes.Outcome{
		"execute:1": {{Commands: [][]string{{"sh", "-c", `echo one > lib/one.txt`}}}},
		"execute:2": {{Commands: [][]string{{"sh", "-c", `echo two > lib/inner/two.txt`}}}}})
	env := append(claudeEnv(t, s, "PEAL_MAX_PARALLEL=2"), testgit.Env...)
	r := s.peal(env, "run")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "the work tree has submodules checked out (lib)") {
		t.Errorf("no line said why the block shares a tree:\n%s", r.stderr)
	}
	for name, want := range map[string]string{"lib/one.txt": "one\n", "lib/inner/two.txt": "two\n"} {
		if got := fileIn(t, s.repo, name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}
