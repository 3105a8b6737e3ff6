package gitrepo

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"peal/phase"
)

func TestGitExcludes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		own  []string
		want []string
	}{
		{"outside the repository", []string{"/work/state", "/elsewhere/knowledge"}, nil},
		{"inside", []string{"/repo/.peal", "/repo/.tf/knowledge"}, []string{":(top,exclude).peal", ":(top,exclude).tf/knowledge"}},
		{"the repository itself, its parent, a sibling", []string{"/repo", "/", "/repo2/state", ""}, nil},
	}
	for _, tc := range cases {
		g := New(phase.Caller{}, nil, 0, "/repo", tc.own...)
		want := append([]string{":(top,exclude).review", ":(top,exclude).peal"}, tc.want...)
		if !slices.Equal(g.exclude(), want) {
			t.Errorf("%s: %q, want %q", tc.name, g.exclude(), want)
		}
	}
	// `git add -A` stages the whole work tree: a folder of peal's in the
	// work tree but outside repo_path is excluded too, from the top.
	top := t.TempDir()
	os.MkdirAll(filepath.Join(top, ".git"), 0o755)
	os.MkdirAll(filepath.Join(top, "sub", "repo"), 0o755)
	g := New(phase.Caller{}, nil, 0, filepath.Join(top, "sub", "repo"), filepath.Join(top, "state"))
	if ex := g.exclude(); ex[len(ex)-1] != ":(top,exclude)state" {
		t.Errorf("a state folder beside the repository in the work tree: %q", ex)
	}
}

func TestCommitSubject(t *testing.T) {
	t.Parallel()
	if got := commitSubject([]int{2}); got != "task 2" {
		t.Fatal(got)
	}
	if got := commitSubject([]int{2, 3, 5}); got != "tasks 2, 3, 5" {
		t.Fatal(got)
	}
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"\n  first line that is long\nsecond", 10, "first l..."},
		{"first line", 10, "first line"},
		{"  éàü  ", 3, "éàü"},
		{"éàüö", 3, "..."},
		{" \n\t\n", 80, ""},
		// An agent's output can hold any byte: control characters and
		// terminal codes are no part of a subject.
		{"\x00\x00 plan:\x00 add\tthe \x1b[1mlimiter\x1b[0m\r\nmore", 80, "plan: add the limiter"},
		{"\x00\n\x07\nsecond", 80, "second"},
	} {
		if got := firstLine(c.in, c.n); got != c.want {
			t.Errorf("firstLine(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// TestCommitOfAnyFirstLine: a plan whose first line holds NUL bytes and
// terminal codes still gives a commit, its subject cleaned.
func TestCommitOfAnyFirstLine(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	git := testGit(t, repo)
	git("init", "-q")
	os.WriteFile(filepath.Join(repo, "a.txt"), []byte("a\n"), 0o644)
	caller := phase.Caller{Dir: repo, Env: testEnv, Limits: phase.Limits{Timeout: time.Minute, KillGrace: time.Second}}
	g := New(caller, slog.New(slog.DiscardHandler), time.Minute, repo, t.TempDir())
	committed, err := g.Commit(context.Background(), []int{1}, "\x00Plan:\x00 add a.txt\x1b[31m!\n")
	if err != nil || !committed {
		t.Fatalf("committed %v, %v", committed, err)
	}
	if got := git("log", "-1", "--format=%s"); got != "peal: task 1 - Plan: add a.txt!" {
		t.Fatalf("subject %q", got)
	}
}

// Reading the work tree's changes does not rewrite the index (git status
// would refresh it, taking the index's lock from an agent that runs git at
// the same time): the index of a repository whose file's timestamp changed is
// the same file afterwards.
func TestChangesLeaveTheIndexAlone(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	git := testGit(t, repo)
	git("init", "-q")
	file := filepath.Join(repo, "a.txt")
	if err := os.WriteFile(file, []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "a.txt")
	git("commit", "-q", "-m", "a")
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(file, later, later); err != nil { // same content, stale stat data in the index
		t.Fatal(err)
	}
	index := filepath.Join(repo, ".git", "index")
	before, err := os.Stat(index)
	if err != nil {
		t.Fatal(err)
	}
	caller := phase.Caller{Dir: repo, Env: testEnv, Limits: phase.Limits{Timeout: time.Minute, KillGrace: time.Second}}
	g := New(caller, slog.New(slog.DiscardHandler), time.Minute, repo, t.TempDir())
	changes, err := g.Changes(context.Background())
	if err != nil || len(changes) != 0 {
		t.Fatalf("changes %q, err %v", changes, err)
	}
	after, err := os.Stat(index)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Fatal("git status rewrote the index")
	}
}

// testEnv lets git commit in a scratch repository whatever the machine's
// configuration holds.
var testEnv = []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com"}

// testGit runs git in dir, failing the test when it fails.
func testGit(t *testing.T, dir string) func(args ...string) string {
	t.Helper()
	return func(args ...string) string {
		t.Helper()
		out, err := Plain(dir, testEnv...).Command(args...).Run(context.Background())
		if err != nil {
			t.Fatalf("%v", err)
		}
		return strings.TrimSpace(out)
	}
}

// Sparse worktrees need git 2.37 or later, as git version tells it.
func TestAtLeast(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{
		"git version 2.39.5\n": true, "git version 2.37.0": true, "git version 2.36.6": false, "git version 3.0.1": true,
		"git version 2.45.1.windows.1": true, "git version 1.9.5": false, "not git": false, "": false,
	} {
		if got := AtLeast(v, 2, 37); got != want {
			t.Errorf("%q: %v, want %v", v, got, want)
		}
	}
}

// The one command builder: standard input, a stream of the whole output,
// variables and a folder; a command that fails is an *Error with its exit
// status, the end of what it wrote on stderr and the line that explains it.
func TestCommand(t *testing.T) {
	t.Parallel()
	repo, other := t.TempDir(), t.TempDir()
	git := testGit(t, repo)
	git("init", "-q")
	testGit(t, other)("init", "-q")
	caller := phase.Caller{Dir: repo, Env: testEnv, Limits: phase.Limits{Timeout: time.Minute, KillGrace: time.Second}}
	g := New(caller, nil, time.Minute, repo)
	ctx := context.Background()

	blob, err := g.Command("hash-object", "-w", "--stdin").Stdin([]byte("hello\n")).Run(ctx)
	if err != nil || len(strings.TrimSpace(blob)) != 40 {
		t.Fatalf("hash-object of stdin: %q %v", blob, err)
	}
	if got := git("cat-file", "-p", strings.TrimSpace(blob)); got != "hello" {
		t.Fatalf("the blob holds %q", got)
	}
	var streamed strings.Builder
	if _, err := g.Command("cat-file", "-p", strings.TrimSpace(blob)).StreamTo(&streamed).Run(ctx); err != nil || streamed.String() != "hello\n" {
		t.Fatalf("streamed %q, %v", streamed.String(), err)
	}
	if out, err := g.Command("config", "--get", "peal.test").Env("GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=peal.test", "GIT_CONFIG_VALUE_0=yes").Run(ctx); err != nil || out != "yes\n" {
		t.Fatalf("config from the variables: %q, %v", out, err)
	}
	if out, err := g.Command("rev-parse", "--absolute-git-dir").Dir(other).Run(ctx); err != nil || strings.TrimSpace(out) != filepath.Join(other, ".git") {
		t.Fatalf("in another folder: %q, %v", out, err)
	}

	_, err = g.Command("rev-parse", "--verify", "no-such-branch").Run(ctx)
	var gerr *Error
	if !errors.As(err, &gerr) || gerr.ExitCode != 128 || gerr.TimedOut || !strings.Contains(gerr.Stderr, "fatal: Needed a single revision") {
		t.Fatalf("err %#v", err)
	}
	if want := "git rev-parse exited with status 128: fatal: Needed a single revision"; err.Error() != want {
		t.Fatalf("message %q, want %q", err.Error(), want)
	}
	if !Exited(err, 128) || Exited(err, 1) || Exited(errors.New("x"), 128) {
		t.Fatal("Exited does not read the exit status")
	}
	if _, err := Plain(repo).Command("no-such-command").Run(ctx); !errors.As(err, &gerr) || gerr.ExitCode != 1 || !strings.Contains(gerr.Line, "no-such-command") {
		t.Fatalf("a plain command that fails: %#v", err)
	}
}

// TestWatch: the watch refuses every command, for good, once a hook, the
// repository's configuration, a file it includes from the tree, a watched
// worktree's .git pointer or a .git on the way to the task's folder
// changed.
func TestWatch(t *testing.T) {
	t.Parallel()
	for _, change := range []string{"hook", "config", "pointer", "nested", "include", "none"} {
		repo := t.TempDir()
		git := testGit(t, repo)
		git("init", "-q")
		git("commit", "-q", "--allow-empty", "-m", "root")
		// The repository's configuration includes a file of the tree.
		os.WriteFile(filepath.Join(repo, ".gitconfig"), []byte("[core]\n\tquotePath = false\n"), 0o644)
		git("config", "include.path", "../.gitconfig")
		wt := filepath.Join(t.TempDir(), "wt")
		git("worktree", "add", "-q", "-b", "w", wt)
		os.MkdirAll(filepath.Join(wt, "sub"), 0o755)
		g := New(phase.Caller{Dir: repo, Env: testEnv, Limits: phase.Limits{Timeout: time.Minute, KillGrace: time.Second}}, nil, time.Minute, repo)
		w, err := NewWatch(context.Background(), g)
		if err != nil {
			t.Fatal(err)
		}
		g.Guard(w)
		w.Add(wt, filepath.Join(wt, "sub"))
		if _, err := g.Head(context.Background()); err != nil {
			t.Fatalf("%s: before any change: %v", change, err)
		}
		var path string
		switch change {
		case "hook":
			path = filepath.Join(repo, ".git", "hooks")
			os.MkdirAll(path, 0o755)
			os.WriteFile(filepath.Join(path, "post-commit"), []byte("#!/bin/sh\n"), 0o755)
		case "config":
			path = filepath.Join(repo, ".git", "config")
			f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString("[core]\n\thooksPath = /tmp\n")
			f.Close()
		case "pointer":
			path = filepath.Join(wt, ".git")
			os.WriteFile(path, []byte("gitdir: /tmp/planted\n"), 0o644)
		case "nested":
			path = filepath.Join(wt, "sub", ".git")
			os.MkdirAll(path, 0o755)
		case "include":
			path = filepath.Join(repo, ".gitconfig")
			os.WriteFile(path, []byte("[filter \"x\"]\n\tclean = /tmp/planted\n"), 0o644)
		}
		_, err = g.Head(context.Background())
		if change == "none" {
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err == nil || !strings.HasPrefix(err.Error(), path+" was ") || !strings.Contains(err.Error(), "peal runs no git and no stet after that") {
			t.Fatalf("%s: err %v", change, err)
		}
		w.Accept() // tripped: accepting changes nothing
		if w.Check() == nil {
			t.Fatalf("%s: the watch forgot its refusal", change)
		}
	}
}

// TestSnapshot: the tree of a work tree's uncommitted state (a changed
// file, a removed one, a new one; not an ignored one, nor peal's folder),
// checked out in a worktree at HEAD, makes the worktree hold what the work
// tree holds; the repository's index is left as it was.
func TestSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := t.TempDir()
	git := testGit(t, repo)
	git("init", "-q")
	write := func(dir, name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(repo, "kept.txt", "kept\n")
	write(repo, "changed.txt", "before\n")
	write(repo, "removed.txt", "removed\n")
	write(repo, ".gitignore", "ignored/\n")
	git("add", ".")
	git("commit", "-q", "-m", "root")
	write(repo, "changed.txt", "after\n")
	os.Remove(filepath.Join(repo, "removed.txt"))
	write(repo, "new.txt", "new\n")
	git("add", "new.txt") // staged in the repository's index
	write(repo, "untracked.txt", "untracked\n")
	os.MkdirAll(filepath.Join(repo, "ignored"), 0o755)
	write(repo, "ignored/x", "x\n")
	os.MkdirAll(filepath.Join(repo, ".peal"), 0o755)
	write(repo, ".peal/state.json", "{}\n")
	status := git("status", "--porcelain")

	caller := phase.Caller{Dir: repo, Env: testEnv, Limits: phase.Limits{Timeout: time.Minute, KillGrace: time.Second}}
	g := New(caller, slog.New(slog.DiscardHandler), time.Minute, repo)
	index := filepath.Join(t.TempDir(), "index")
	tree, err := g.Snapshot(ctx, index)
	if err != nil {
		t.Fatal(err)
	}
	if got := git("status", "--porcelain"); got != status {
		t.Errorf("the repository's status went from %q to %q", status, got)
	}
	if got, want := git("ls-tree", "-r", "--name-only", tree), ".gitignore\nchanged.txt\nkept.txt\nnew.txt\nuntracked.txt"; got != want {
		t.Errorf("the tree holds %q, want %q", got, want)
	}

	wt := filepath.Join(t.TempDir(), "wt")
	git("worktree", "add", "-q", "--detach", wt, "HEAD")
	if err := g.At(wt).CheckOutTree(ctx, tree); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"kept.txt": "kept\n", "changed.txt": "after\n", "new.txt": "new\n", "untracked.txt": "untracked\n", "removed.txt": ""} {
		got, _ := os.ReadFile(filepath.Join(wt, name))
		if string(got) != want {
			t.Errorf("the worktree's %s = %q, want %q", name, got, want)
		}
	}
	if got := testGit(t, wt)("status", "--porcelain"); got != "M  changed.txt\nA  new.txt\nD  removed.txt\nA  untracked.txt" {
		t.Errorf("the worktree's status: %q", got)
	}
}

// TestExplainNamesTheFile: a git command that stops on a fatal summary
// after an error is explained by both: the error names the file.
func TestExplainNamesTheFile(t *testing.T) {
	t.Parallel()
	for stderr, want := range map[string]string{
		"error: open(\"secret\"): Permission denied\nerror: unable to index file 'secret'\nfatal: adding files failed\n": `error: open("secret"): Permission denied; fatal: adding files failed`,
		"fatal: not a git repository (or any of the parent directories): .git\n":                                         "fatal: not a git repository (or any of the parent directories): .git",
		"error: pathspec 'x' did not match any file(s) known to git\n":                                                   "error: pathspec 'x' did not match any file(s) known to git",
	} {
		if got := explain(phase.Result{Stderr: stderr}); got != want {
			t.Errorf("%q: %q, want %q", stderr, got, want)
		}
	}
}
