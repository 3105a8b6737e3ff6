//go:build unix

package review

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"peal/internal/gitrepo"
	"peal/internal/testkit/testgit"
	"peal/phase"
)

// stetAt is a stet whose program is script, reviewing the worktree wt of
// repo (its git made from the work tree's, pinned), with settings noted
// from repo.
func stetAt(t *testing.T, repo, wt, script string) *stet {
	t.Helper()
	caller := phase.Caller{Dir: wt, Env: testgit.Env, Log: slog.New(slog.DiscardHandler), Limits: phase.Limits{Timeout: time.Minute, KillGrace: time.Second}}
	main := gitrepo.New(caller, nil, time.Minute, repo)
	if err := main.Pin(context.Background()); err != nil {
		t.Fatal(err)
	}
	rv := &Reviewer{git: main, stet: &stet{}, settings: &settings{}}
	if err := rv.NoteSettings(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	return &stet{path: script, stateDir: filepath.Join(dir, "review", "stet"), worktrees: filepath.Join(dir, "review", "worktrees"), attempts: 1,
		network: func() phase.Budget { return phase.Budget{} }, log: slog.New(slog.DiscardHandler), caller: caller,
		repo: main.In(caller, wt, wt, false), settings: rv.settings}
}

// TestStetGitPinned: stet runs git through its PATH with nothing else of
// its environment, in the task's tree; a process that rewrote the tree's
// .git to a git folder of its own, whose configuration runs a program,
// after the guard looked and before stet's git read it, wins nothing: the
// git stet finds first names the tree's git folder as the repository
// records it, and runs no hook; in a folder that is neither the tree nor
// stet's worktrees it refuses to run.
func TestStetGitPinned(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	testgit.Init(t, repo)
	testgit.Git(t, repo, "commit", "-q", "--allow-empty", "-m", "root")
	wt := filepath.Join(t.TempDir(), "wt")
	testgit.Git(t, repo, "worktree", "add", "-q", "-b", "w", wt)
	dir := t.TempDir()
	out, marker := filepath.Join(dir, "git-dirs"), filepath.Join(dir, "marker")
	// The stand-in stet runs git as the real one does: PATH and HOME only.
	script := filepath.Join(dir, "stet")
	os.WriteFile(script, []byte("#!/bin/sh\nexec env -i PATH=\"$PATH\" HOME=\"$HOME\" sh -c 'git rev-parse --absolute-git-dir >> "+out+
		" && git status --porcelain >/dev/null && cd / && git rev-parse --absolute-git-dir >> "+out+"; exit 1'\n"), 0o755)
	s := stetAt(t, repo, wt, script)

	evil := filepath.Join(dir, "evil.git")
	testgit.Git(t, dir, "init", "-q", "--bare", evil)
	prog := filepath.Join(dir, "planted.sh")
	os.WriteFile(prog, []byte("#!/bin/sh\necho ran >> "+marker+"\n"), 0o755)
	os.WriteFile(filepath.Join(evil, "config"), []byte("[core]\n\tbare = false\n\tfsmonitor = "+prog+"\n"), 0o644)
	os.WriteFile(filepath.Join(wt, ".git"), []byte("gitdir: "+evil+"\n"), 0o644)

	if open, err := s.open(context.Background(), 1); err != nil || open {
		t.Fatalf("stet status: %v %v", open, err)
	}
	data, _ := os.ReadFile(out)
	if got := strings.Fields(string(data)); !slices.Equal(got, []string{filepath.Join(repo, ".git", "worktrees", "wt")}) {
		t.Fatalf("stet's git used %q (and ran outside the tree?)", got)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("stet's git ran the program of a planted git folder")
	}
}

// TestStetSettings: the user's .review/config.toml reaches stet as STET_*
// variables (the user's own variables winning); a task's tree whose
// .review/config.toml is not the user's gets no stet: the refusal names
// it, and it is removed (restored, in the work tree itself).
func TestStetSettings(t *testing.T) {
	t.Parallel()
	env, err := settingsEnv([]byte("model = \"m\"\nprovider = \"openai\"\ntemperature = 0.5\nnitpicky = true\nnum_ctx = 8\n[table]\nx = 1\n"),
		func(name string) (string, bool) { return "user's", name == "STET_MODEL" })
	if err != nil || !slices.Equal(env, []string{"STET_NITPICKY=true", "STET_NUM_CTX=8", "STET_PROVIDER=openai", "STET_TEMPERATURE=0.5"}) {
		t.Fatalf("env %q, %v", env, err)
	}
	if _, err := settingsEnv([]byte("model = "), func(string) (string, bool) { return "", false }); err == nil {
		t.Fatal("no error for a file that is no TOML")
	}

	repo := t.TempDir()
	testgit.Init(t, repo)
	testgit.Git(t, repo, "commit", "-q", "--allow-empty", "-m", "root")
	users := "provider = \"openai\"\n"
	os.MkdirAll(filepath.Join(repo, ".review"), 0o755)
	os.WriteFile(filepath.Join(repo, ".review", "config.toml"), []byte(users), 0o644)
	wt := filepath.Join(t.TempDir(), "wt")
	testgit.Git(t, repo, "worktree", "add", "-q", "-b", "w", wt)
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	script := filepath.Join(dir, "stet")
	os.WriteFile(script, []byte("#!/bin/sh\necho \"$1 $STET_PROVIDER\" >> "+calls+"\nexit 1\n"), 0o755)
	s := stetAt(t, repo, wt, script)
	ctx := context.Background()
	if _, err := s.open(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		plant func(path string)
		what  string
	}{
		{"made", func(p string) {
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, []byte("provider = \"ollama\"\n"), 0o644)
		}, "made or changed"},
		{"a link", func(p string) { os.Symlink(filepath.Join(repo, ".review", "config.toml"), p) }, "made a link"},
		{"a pipe", func(p string) { mkfifo(t, p) }, "made a named pipe"},
	} {
		path := filepath.Join(wt, ".review", "config.toml")
		c.plant(path)
		_, err := s.open(ctx, 1)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Path != path || ce.What != c.what || ce.Put != "removed" {
			t.Fatalf("%s: %v", c.name, err)
		}
		if _, err := os.Lstat(path); err == nil {
			t.Fatalf("%s: left in the tree", c.name)
		}
	}
	data, _ := os.ReadFile(calls)
	if string(data) != "status openai\n" {
		t.Fatalf("stet ran: %q", data)
	}

	// In the work tree itself (a run whose tasks work there): changed, and
	// restored.
	m := stetAt(t, repo, repo, script)
	m.settings = s.settings
	os.WriteFile(filepath.Join(repo, ".review", "config.toml"), []byte("provider = \"ollama\"\n"), 0o644)
	_, err = m.open(ctx, 1)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.What != "changed" || ce.Put != "restored" {
		t.Fatalf("in the work tree: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(repo, ".review", "config.toml")); string(got) != users {
		t.Fatalf("the user's file holds %q", got)
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkStetGit is one git command of stet's (git rev-parse
// --show-toplevel in the task's tree, with PATH and HOME alone), run
// through peal's git for stet against git found as it is.
func BenchmarkStetGit(b *testing.B) {
	repo := b.TempDir()
	testgit.Init(b, repo)
	testgit.Git(b, repo, "commit", "-q", "--allow-empty", "-m", "root")
	wt := filepath.Join(b.TempDir(), "wt")
	testgit.Git(b, repo, "worktree", "add", "-q", "-b", "w", wt)
	caller := phase.Caller{Dir: wt, Env: testgit.Env, Log: slog.New(slog.DiscardHandler), Limits: phase.Limits{Timeout: time.Minute, KillGrace: time.Second}}
	main := gitrepo.New(caller, nil, time.Minute, repo)
	if err := main.Pin(context.Background()); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	shim, err := gitShim(filepath.Join(dir, "git"), main.In(caller, wt, wt, false), filepath.Join(dir, "worktrees"))
	if err != nil || shim == "" {
		b.Fatal(shim, err)
	}
	real, err := exec.LookPath("git")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, git string }{{"direct", real}, {"peal's-git", filepath.Join(shim, "git")}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				cmd := exec.Command(c.git, "rev-parse", "--show-toplevel")
				cmd.Dir, cmd.Env = wt, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
				if out, err := cmd.Output(); err != nil || strings.TrimSpace(string(out)) == "" {
					b.Fatal(string(out), err)
				}
			}
		})
	}
}

// TestStetGitIntoNoRepository: stet's git runs nothing a tree holds. The
// tree holds a repository a call made (staged, as a commit's git add -A
// would have left it, with a file changed since), whose configuration
// names a file system monitor; a textconv program of the repository's
// configuration converts the tree's files for diffs. stet's status does
// not go into the repository, its diff shows the files as they are, and
// neither program runs.
func TestStetGitIntoNoRepository(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	testgit.Init(t, repo)
	testgit.Git(t, repo, "commit", "-q", "--allow-empty", "-m", "root")
	wt := filepath.Join(t.TempDir(), "wt")
	testgit.Git(t, repo, "worktree", "add", "-q", "-b", "w", wt)
	dir := t.TempDir()
	out, marker := filepath.Join(dir, "out"), filepath.Join(dir, "marker")
	prog := filepath.Join(dir, "planted.sh")
	os.WriteFile(prog, []byte("#!/bin/sh\necho \"$0 $*\" >> "+marker+"\ncat \"$1\" 2>/dev/null | tr a-z A-Z\n"), 0o755)
	testgit.Git(t, repo, "config", "diff.shout.textconv", prog)

	os.WriteFile(filepath.Join(wt, ".gitattributes"), []byte("*.txt diff=shout\n"), 0o644)
	os.WriteFile(filepath.Join(wt, "a.txt"), []byte("quiet\n"), 0o644)
	sub := filepath.Join(wt, "sub")
	testgit.Git(t, wt, "init", "-q", sub)
	os.WriteFile(filepath.Join(sub, "f"), []byte("f\n"), 0o644)
	testgit.Git(t, sub, "add", "f")
	testgit.Git(t, sub, "commit", "-q", "-m", "x")
	testgit.Git(t, sub, "config", "core.fsmonitor", prog)
	testgit.Git(t, wt, "add", "-A")
	testgit.Git(t, wt, "commit", "-q", "-m", "work")
	os.WriteFile(filepath.Join(sub, "f"), []byte("g\n"), 0o644)

	script := filepath.Join(dir, "stet")
	os.WriteFile(script, []byte("#!/bin/sh\nexec env -i PATH=\"$PATH\" HOME=\"$HOME\" sh -c 'git status --porcelain >> "+out+
		" && git diff --no-color --no-ext-diff HEAD~1..HEAD -- a.txt >> "+out+"'\n"), 0o755)
	s := stetAt(t, repo, wt, script)
	if _, err := s.open(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(out)
	if strings.Contains(string(data), " M sub") || !strings.Contains(string(data), "+quiet") {
		t.Fatalf("stet's git said:\n%s", data)
	}
	if ran, err := os.ReadFile(marker); err == nil {
		t.Fatalf("stet's git ran a program of the tree's:\n%s", ran)
	}
}
