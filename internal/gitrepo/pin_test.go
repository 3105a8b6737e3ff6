package gitrepo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"peal/phase"
)

// plantedGit makes a git folder of an attacker's at dir/evil.git whose
// configuration runs a program (core.fsmonitor) that writes marker; it
// returns the folder.
func plantedGit(t *testing.T, dir, marker string) string {
	t.Helper()
	evil := filepath.Join(dir, "evil.git")
	testGit(t, dir)("init", "-q", "--bare", evil)
	prog := filepath.Join(dir, "planted.sh")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho ran >> "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.OpenFile(filepath.Join(evil, "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg.WriteString("[core]\n\tbare = false\n\tfsmonitor = " + prog + "\n")
	cfg.Close()
	return evil
}

// TestPinnedWorktree: a worktree's git, made from a pinned work tree's,
// names the worktree's git folder as the repository records it, whatever
// the worktree's .git file says now (an agent rewrote it to point at a git
// folder of its own, whose configuration runs a program) and whatever .git
// a folder on the way holds; its commands work on the worktree, and the
// planted program never runs. Before the Repo is pinned nothing is read.
func TestPinnedWorktree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := t.TempDir()
	git := testGit(t, repo)
	git("init", "-q")
	git("commit", "-q", "--allow-empty", "-m", "root")
	wt := filepath.Join(t.TempDir(), "wt")
	git("worktree", "add", "-q", "-b", "w", wt)
	os.MkdirAll(filepath.Join(wt, "sub"), 0o755)

	caller := phase.Caller{Dir: repo, Env: testEnv, Limits: phase.Limits{Timeout: time.Minute, KillGrace: time.Second}}
	main := New(caller, nil, time.Minute, repo)
	if d, _ := main.GitDir(); d != "" {
		t.Fatalf("resolved before any command: %q", d)
	}
	if err := main.Pin(ctx); err != nil {
		t.Fatal(err)
	}
	gitDir, common := main.GitDir()
	if gitDir != filepath.Join(repo, ".git") || common != gitDir || main.HooksDir() != filepath.Join(gitDir, "hooks") {
		t.Fatalf("folders %q %q, hooks %q", gitDir, common, main.HooksDir())
	}

	marker := filepath.Join(t.TempDir(), "marker")
	evil := plantedGit(t, t.TempDir(), marker)
	os.WriteFile(filepath.Join(wt, ".git"), []byte("gitdir: "+evil+"\n"), 0o644)
	// A .git folder of the agent's between the task's folder and the top.
	testGit(t, filepath.Join(wt, "sub"))("init", "-q")
	os.WriteFile(filepath.Join(wt, "sub", ".git", "config"), []byte("[core]\n\tfsmonitor = "+filepath.Join(filepath.Dir(evil), "planted.sh")+"\n"), 0o644)

	w := main.In(caller, wt, filepath.Join(wt, "sub"), false)
	if d, c := w.GitDir(); d != filepath.Join(gitDir, "worktrees", "wt") || c != gitDir {
		t.Fatalf("the worktree's folders: %q %q", d, c)
	}
	os.WriteFile(filepath.Join(wt, "work.txt"), []byte("work\n"), 0o644)
	if st, err := w.Status(ctx); err != nil || st.Head != git("rev-parse", "w") || len(st.Unstaged) != 1 || !slices.Equal(st.Embedded, []string{"sub/"}) {
		t.Fatalf("status %+v, %v", st, err)
	}
	// (An agent's repository in the tree is no work to commit.)
	os.RemoveAll(filepath.Join(wt, "sub", ".git"))
	if _, err := w.Commit(ctx, []int{1}, "work"); err != nil {
		t.Fatal(err)
	}
	if got := git("log", "-1", "--format=%s", "w"); got != "peal: task 1 - work" {
		t.Fatalf("the worktree's branch holds %q", got)
	}
	if files := git("show", "--name-only", "--format=", "w"); files != "work.txt" {
		t.Fatalf("committed %q", files)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("peal's git ran the program of a planted git folder")
	}
}

// hookLog makes hooks in repo's hooks folder for each of names: each
// appends its name and arguments to log; script, when set for a name,
// runs after.
func hookLog(t *testing.T, repo, log string, names []string, script map[string]string) {
	t.Helper()
	hooks := filepath.Join(repo, ".git", "hooks")
	os.MkdirAll(hooks, 0o755)
	for _, n := range names {
		body := "#!/bin/sh\necho \"" + n + " $*\" >> " + log + "\n" + script[n]
		if err := os.WriteFile(filepath.Join(hooks, n), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// confinedHooks records the hooks a Repo runs through Hooks.Confine.
type confinedHooks struct {
	mu    sync.Mutex
	runs  []string
	write [][]string
}

func (c *confinedHooks) confine(spec *phase.Spec, write []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs = append(c.runs, filepath.Base(spec.Argv[0]))
	c.write = append(c.write, write)
}

// TestHooksOfACommit: git runs no hook of peal's commands; peal runs those
// a commit triggers, in git's order, with git's arguments, each through
// Hooks.Confine, which may write the commit's room (its message, a copy
// of the index) and the repository's objects, refs and logs, never its
// hooks or configuration. What pre-commit staged and what the message
// hooks wrote (commit-msg through a file renamed over the message, as git
// interpret-trailers --in-place does) are in the commit. A refusing hook
// is a *HookError and no commit is made.
func TestHooksOfACommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := t.TempDir()
	git := testGit(t, repo)
	git("init", "-q")
	git("commit", "-q", "--allow-empty", "-m", "root")
	log := filepath.Join(t.TempDir(), "hooks.log")
	hookLog(t, repo, log, []string{"pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "reference-transaction"}, map[string]string{
		"pre-commit":         "echo fixed > fixed.txt && git add fixed.txt\n",
		"prepare-commit-msg": "echo 'Prepared: yes' >> \"$1\"\n",
		"commit-msg":         "cp \"$1\" \"$1.new\" && echo 'Change-Id: I123' >> \"$1.new\" && mv \"$1.new\" \"$1\"\n",
	})
	var c confinedHooks
	temp := filepath.Join(t.TempDir(), "tmp")
	caller := phase.Caller{Dir: repo, Env: testEnv, Limits: phase.Limits{Timeout: time.Minute, KillGrace: time.Second}}
	g := New(caller, nil, time.Minute, repo)
	g.RunHooks(Hooks{Confine: c.confine, Temp: temp})
	os.WriteFile(filepath.Join(repo, "work.txt"), []byte("work\n"), 0o644)
	if ok, err := g.Commit(ctx, []int{1}, "work"); err != nil || !ok {
		t.Fatalf("commit: %v %v", ok, err)
	}
	data, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 4 || lines[0] != "pre-commit " || !strings.HasPrefix(lines[1], "prepare-commit-msg "+temp) ||
		!strings.HasSuffix(lines[1], "/COMMIT_EDITMSG message") || !strings.HasPrefix(lines[2], "commit-msg "+temp) || lines[3] != "post-commit " {
		t.Fatalf("hooks ran:\n%s", data)
	}
	if want := []string{"pre-commit", "prepare-commit-msg", "commit-msg", "post-commit"}; !slices.Equal(c.runs, want) {
		t.Fatalf("confined %q, want %q", c.runs, want)
	}
	gitDir := filepath.Join(repo, ".git")
	for _, w := range c.write {
		if len(w) != 4 || !strings.HasPrefix(w[0], temp) || !slices.Equal(w[1:], []string{filepath.Join(gitDir, "objects"), filepath.Join(gitDir, "refs"), filepath.Join(gitDir, "logs")}) {
			t.Fatalf("a hook may write %q", w)
		}
	}
	if msg := git("log", "-1", "--format=%B"); msg != "peal: task 1 - work\nPrepared: yes\nChange-Id: I123" {
		t.Fatalf("message %q", msg)
	}
	if files := git("show", "--name-only", "--format="); files != "fixed.txt\nwork.txt" {
		t.Fatalf("committed %q", files)
	}
	if left, _ := os.ReadDir(temp); len(left) != 0 {
		t.Fatalf("the hooks' room is left: %v", left)
	}

	// A hook that refuses.
	os.Remove(log)
	hookLog(t, repo, log, []string{"pre-commit"}, map[string]string{"pre-commit": "echo 'lint failed' >&2; exit 1\n"})
	os.WriteFile(filepath.Join(repo, "more.txt"), []byte("more\n"), 0o644)
	head := git("rev-parse", "HEAD")
	_, err := g.Commit(ctx, []int{2}, "more")
	var he *HookError
	if !errors.As(err, &he) || he.Hook != "pre-commit" || he.What != "commit" || !strings.Contains(err.Error(), "lint failed") {
		t.Fatalf("err %v", err)
	}
	if git("rev-parse", "HEAD") != head {
		t.Fatal("a commit was made after its pre-commit hook refused it")
	}
}

// TestHooksOfAMerge: a merge runs pre-merge-commit, prepare-commit-msg
// ("merge"), commit-msg and post-merge, peal's; a fast-forward runs
// post-merge; a refusing pre-merge-commit leaves the merge to be undone.
func TestHooksOfAMerge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := t.TempDir()
	git := testGit(t, repo)
	git("init", "-q", "-b", "main")
	git("commit", "-q", "--allow-empty", "-m", "root")
	git("checkout", "-q", "-b", "side")
	os.WriteFile(filepath.Join(repo, "side.txt"), []byte("side\n"), 0o644)
	git("add", "side.txt")
	git("commit", "-q", "-m", "side")
	git("checkout", "-q", "main")
	os.WriteFile(filepath.Join(repo, "main.txt"), []byte("main\n"), 0o644)
	git("add", "main.txt")
	git("commit", "-q", "-m", "main")
	log := filepath.Join(t.TempDir(), "hooks.log")
	hookLog(t, repo, log, []string{"pre-merge-commit", "prepare-commit-msg", "commit-msg", "post-merge", "pre-commit", "post-commit"}, nil)
	var c confinedHooks
	caller := phase.Caller{Dir: repo, Env: testEnv, Limits: phase.Limits{Timeout: time.Minute, KillGrace: time.Second}}
	g := New(caller, nil, time.Minute, repo)
	g.RunHooks(Hooks{Confine: c.confine, Temp: t.TempDir()})
	if err := g.Merge(ctx, "side", "peal: merge side", false); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(log)
	got := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(got) != 4 || got[0] != "pre-merge-commit " || !strings.HasSuffix(got[1], " merge") || !strings.HasPrefix(got[2], "commit-msg ") || got[3] != "post-merge 0" {
		t.Fatalf("hooks ran:\n%s", data)
	}
	if parents := strings.Fields(git("log", "-1", "--format=%P")); len(parents) != 2 || git("log", "-1", "--format=%s") != "peal: merge side" {
		t.Fatalf("merge commit %q", git("log", "-1", "--format=%P %s"))
	}

	// Fast-forward: post-merge alone.
	os.Remove(log)
	git("branch", "ahead", "side")
	git("checkout", "-q", "side")
	git("merge", "-q", "main")
	os.WriteFile(filepath.Join(repo, "ahead.txt"), []byte("ahead\n"), 0o644)
	git("add", "ahead.txt")
	git("-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "ahead")
	git("checkout", "-q", "main")
	os.Remove(log)
	if err := g.Merge(ctx, "side", "", true); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(log); string(data) != "post-merge 0\n" {
		t.Fatalf("a fast-forward ran:\n%s", data)
	}

	// Refused.
	hookLog(t, repo, log, []string{"pre-merge-commit"}, map[string]string{"pre-merge-commit": "echo frozen >&2; exit 1\n"})
	git("checkout", "-q", "-b", "late", "HEAD~1")
	os.WriteFile(filepath.Join(repo, "late.txt"), []byte("late\n"), 0o644)
	git("add", "late.txt")
	git("-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "late")
	git("checkout", "-q", "main")
	err := g.Merge(ctx, "late", "peal: merge late", false)
	var he *HookError
	if !errors.As(err, &he) || he.What != "merge" || !g.MergeInProgress(ctx) {
		t.Fatalf("err %v, in progress %v", err, g.MergeInProgress(ctx))
	}
}

// TestCommitWithIgnoredOwnFolder: a .review/ (or .peal/) folder in the tree
// while the .gitignore lists it does not make the commit fail (git add
// refuses an ignored path a pathspec names, even one it excludes); nothing
// of it is committed.
func TestCommitWithIgnoredOwnFolder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := t.TempDir()
	git := testGit(t, repo)
	git("init", "-q")
	os.WriteFile(filepath.Join(repo, ".gitignore"), []byte(".review/\n.peal\n"), 0o644)
	git("add", ".gitignore")
	git("commit", "-q", "-m", "root")
	for _, d := range []string{".review", ".peal"} {
		os.MkdirAll(filepath.Join(repo, d), 0o755)
		os.WriteFile(filepath.Join(repo, d, "config.toml"), []byte("x = 1\n"), 0o644)
	}
	os.WriteFile(filepath.Join(repo, "work.txt"), []byte("work\n"), 0o644)
	caller := phase.Caller{Dir: repo, Env: testEnv, Limits: phase.Limits{Timeout: time.Minute, KillGrace: time.Second}}
	g := New(caller, nil, time.Minute, repo)
	if ok, err := g.Commit(ctx, []int{1}, "work"); err != nil || !ok {
		t.Fatalf("commit: %v %v", ok, err)
	}
	if files := git("show", "--name-only", "--format="); files != "work.txt" {
		t.Fatalf("committed %q", files)
	}
	if _, err := g.State(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Snapshot(ctx, filepath.Join(t.TempDir(), "index")); err != nil {
		t.Fatal(err)
	}
}
