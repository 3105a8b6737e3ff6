package confine_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"peal/confine"
	"peal/internal/testkit/testgit"
)

// The agent's own git under the recommended .git rule (Git.Paths), in a
// linked worktree and in the main work tree. An external test package: the
// tests' git (internal/testkit/testgit) stands on phase, which stands on confine.

// gitChild runs the test binary as the helper (see TestMain) under call in
// dir and returns its output line and error.
func gitChild(t *testing.T, call *confine.Call, dir string, args ...string) (string, error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := *call
	c.EnvPass = append(append([]string(nil), c.EnvPass...), "CONFINE_TEST_HELPER", "GIT_*")
	cmd := exec.Command(exe, args...)
	cmd.Dir = dir
	cmd.Env = c.Environ(append(append(os.Environ(), testgit.Env...), "CONFINE_TEST_HELPER=1"))
	l, err := c.Prepare(cmd, t.Name(), "")
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Wait(); err != nil {
		cmd.Wait()
		t.Fatalf("the launcher failed: %v", err)
	}
	err = cmd.Wait()
	return strings.TrimSpace(out.String()), err
}

type gitAttempt struct {
	name string
	args []string
	want string
}

func tryGit(t *testing.T, call *confine.Call, dir string, attempts []gitAttempt) {
	t.Helper()
	for _, a := range attempts {
		t.Run(a.name, func(t *testing.T) {
			if got, err := gitChild(t, call, dir, a.args...); got != a.want {
				t.Fatalf("%v: got %q (%v), want %q", a.args, got, err, a.want)
			}
		})
	}
}

// gitScratch is a scratch home with a planted key and a repository with one
// commit, a folder and a file, made through the tests' git client.
func gitScratch(t *testing.T) (home, repo string) {
	t.Helper()
	if s := confine.Probe(); !s.Files {
		t.Skip("this kernel enforces no Landlock rules: " + s.String())
	}
	root := t.TempDir()
	home, repo = filepath.Join(root, "home"), filepath.Join(root, "repo")
	for _, d := range []string{filepath.Join(home, ".ssh"), filepath.Join(repo, "src")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for f, data := range map[string]string{filepath.Join(home, ".ssh", "id_ed25519"): "KEY\n", filepath.Join(repo, "README"): "readme\n", filepath.Join(repo, "src", "main.go"): "package main\n"} {
		if err := os.WriteFile(f, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	testgit.Git(t, repo, "init", "-q", "-b", "main")
	if err := os.MkdirAll(filepath.Join(repo, ".git", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	testgit.Git(t, repo, "add", "-A")
	testgit.Git(t, repo, "commit", "-qm", "start")
	return home, repo
}

const denied = ": permission denied"

func TestLandlockGitWorktree(t *testing.T) {
	home, repo := gitScratch(t)
	wt := filepath.Join(filepath.Dir(repo), "wt")
	testgit.Git(t, repo, "worktree", "add", "-q", "-b", "task-1", wt)
	g, err := confine.FindGit(wt)
	if err != nil {
		t.Fatal(err)
	}
	if !g.Linked || g.Common != repo+"/.git" || g.Dir != repo+"/.git/worktrees/wt" {
		t.Fatalf("FindGit = %+v", g)
	}
	pol := confine.Base(home)
	pol.Write = append(pol.Write, confine.Paths("work tree", wt)...)
	write, protect := g.Paths(true)
	pol.Write = append(pol.Write, write...)
	pol.Protect = append(pol.Protect, protect...)
	pol.Protect = append(pol.Protect, confine.Paths("main work tree", repo)...)
	call := &confine.Call{Mode: confine.On, Access: pol}
	tryGit(t, call, wt, []gitAttempt{
		{"edit a file", []string{"run", "echo change >> README && echo new > added.txt"}, "ok"},
		{"git status", []string{"run", "git status --porcelain >/dev/null"}, "ok"},
		{"git diff", []string{"run", "git diff --stat | grep -q README"}, "ok"},
		{"git add", []string{"run", "git add -A && git diff --cached --name-only | grep -q added.txt"}, "ok"},
		{"write the main work tree", []string{"write", repo + "/README"}, "open " + repo + "/README" + denied},
		{"plant a hook", []string{"write", repo + "/.git/hooks/post-commit"}, "open " + repo + "/.git/hooks/post-commit" + denied},
		{"rewrite .git/config", []string{"write", repo + "/.git/config"}, "open " + repo + "/.git/config" + denied},
		{"plant .git/info/attributes", []string{"write", repo + "/.git/info/attributes"}, "open " + repo + "/.git/info/attributes" + denied},
		{"git config core.hooksPath", []string{"show", "git config core.hooksPath /tmp 2>&1; git config --get core.hooksPath; echo $?"},
			"error: could not lock config file " + repo + "/.git/config: Permission denied\n1"},
		{"move the main branch", []string{"run", "git update-ref refs/heads/main HEAD"}, "exit status 128: fatal: update_ref failed for ref 'refs/heads/main': cannot lock ref 'refs/heads/main': Unable to create '" + repo + "/.git/refs/heads/main.lock': Permission denied"},
		{"read the key through a link", []string{"run", "ln -s " + home + "/.ssh/id_ed25519 key && cat key"}, "exit status 1: cat: key: Permission denied"},
	})
	if got := testgit.Git(t, wt, "diff", "--cached", "--name-only"); got != "README\nadded.txt" {
		t.Errorf("the agent's git add staged %q", got)
	}
	if _, err := os.Stat(repo + "/.git/hooks/post-commit"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a hook was planted (%v)", err)
	}
}

func TestLandlockGitMainTree(t *testing.T) {
	home, repo := gitScratch(t)
	g, err := confine.FindGit(repo)
	if err != nil {
		t.Fatal(err)
	}
	pol := confine.Base(home)
	pol.Write = append(pol.Write, confine.Paths("work tree", repo)...)
	write, protect := g.Paths(true) // staging cannot apply to a main work tree
	if len(write) != 0 {
		t.Fatalf("a main work tree's git data made writable: %v", write)
	}
	pol.Protect = append(pol.Protect, protect...)
	call := &confine.Call{Mode: confine.On, Access: pol}
	addLine := "fatal: Unable to create '" + repo + "/.git/index.lock': Permission denied"
	tryGit(t, call, repo, []gitAttempt{
		{"edit a file in a folder", []string{"run", "echo change >> src/main.go && echo new > src/added.go"}, "ok"},
		{"edit a top file", []string{"run", "echo change >> README"}, "ok"},
		{"git status", []string{"run", "git status --porcelain | grep -q main.go"}, "ok"},
		{"git diff", []string{"run", "git diff --stat | grep -q README"}, "ok"},
		{"git add", []string{"show", "git add -A 2>&1"}, addLine},
		{"create a top file", []string{"write", repo + "/NEW"}, "open " + repo + "/NEW" + denied},
		{"plant a hook", []string{"write", repo + "/.git/hooks/pre-commit"}, "open " + repo + "/.git/hooks/pre-commit" + denied},
		{"rewrite .git/config", []string{"write", repo + "/.git/config"}, "open " + repo + "/.git/config" + denied},
	})
	for _, c := range []struct{ line, want string }{
		{addLine, "the call was refused writing " + repo + "/.git/index.lock: " + repo + "/.git (the repository's .git) is never written by a confined call"},
		{"open " + repo + "/NEW" + denied, "the call was refused creating or removing " + repo + "/NEW: " + repo + " holds " + repo + "/.git, which a confined call never writes, so entries directly in " + repo + " cannot be created, removed or renamed (its subfolders can)"},
	} {
		if got := confine.Explain(&pol, repo, []string{"noise", c.line}, nil); got != c.want {
			t.Errorf("Explain(%q) = %q, want %q", c.line, got, c.want)
		}
	}
}
