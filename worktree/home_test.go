package worktree

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"peal/internal/gitrepo"
	"peal/internal/testkit/testbin"
	"peal/internal/testkit/testgit"
	"peal/phase"
	"peal/state"
)

// homeSet is the set of the state folder state for repo.
func homeSet(repo, state string, log *bytes.Buffer) *Set {
	caller := phase.Caller{Dir: repo, Limits: phase.Limits{Timeout: time.Minute, KillGrace: time.Second}, Env: testgit.Env}
	logger := slog.New(slog.NewTextHandler(log, nil))
	return New(gitrepo.New(caller, logger, time.Minute, repo), logger, state, "test", nil)
}

// TestHomeOutlivesRuns: the home worktree a run made is found whole by the
// next run on the state folder, with its notes; its .git file is written
// again when a call changed it; LinkIgnored links what the work tree
// ignores and takes back the links of entries that went; DropHome leaves
// nothing.
func TestHomeOutlivesRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, _ := testRepo(t)
	os.WriteFile(filepath.Join(repo, ".gitignore"), []byte("deps/\n.env\n"), 0o644)
	testgit.Git(t, repo, "add", ".gitignore")
	testgit.Git(t, repo, "commit", "-q", "-m", "ignore")
	head := testgit.Git(t, repo, "rev-parse", "HEAD")
	os.MkdirAll(filepath.Join(repo, "deps"), 0o755)
	os.WriteFile(filepath.Join(repo, ".env"), []byte("SECRET=1\n"), 0o600)
	state := filepath.Join(t.TempDir(), "state")
	var log bytes.Buffer
	first := homeSet(repo, state, &log)
	first.Sweep(ctx, func(int) bool { return false })
	if first.HomeFound() {
		t.Fatal("a home is found where no run ran")
	}
	h, err := first.AddHome(ctx, head)
	if err != nil {
		t.Fatal(err)
	}
	linked, err := first.LinkIgnored(ctx, nil)
	if err != nil || !slices.Equal(linked, []string{".env", "deps/"}) {
		t.Fatalf("LinkIgnored: %v, linked %q", err, linked)
	}
	if err := first.NoteBrought(Brought{Commit: head}); err != nil {
		t.Fatal(err)
	}
	// Both links are ignored in the home worktree, the file's too.
	if got := testgit.Git(t, h.Path, "status", "--porcelain"); got != "" {
		t.Fatalf("git status in the home worktree: %q", got)
	}
	os.WriteFile(filepath.Join(h.Path, ".git"), []byte("gitdir: /elsewhere\n"), 0o644)
	os.Remove(filepath.Join(repo, ".env")) // gone from the work tree between runs

	next := homeSet(repo, state, &log)
	next.Sweep(ctx, func(int) bool { return false })
	if !next.HomeFound() {
		t.Fatalf("the home is not found:\n%s", log.String())
	}
	if !strings.Contains(log.String(), "written again") {
		t.Errorf("log:\n%s", log.String())
	}
	if b, ok := next.HomeBrought(); !ok || b.Commit != head {
		t.Errorf("brought %+v %v", b, ok)
	}
	if linked, err := next.LinkIgnored(ctx, nil); err != nil || !slices.Equal(linked, []string{"deps/"}) {
		t.Fatalf("LinkIgnored again: %v, linked %q", err, linked)
	}
	if _, err := os.Lstat(filepath.Join(h.Path, ".env")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the link of the entry that went stays: %v", err)
	}
	if err := next.DropHome(ctx); err != nil {
		t.Fatal(err)
	}
	if left := testgit.WorktreeLeftovers(t, repo, state); len(left) > 0 {
		t.Errorf("left behind: %q", left)
	}
	for _, name := range []string{homeName, broughtName, linksName} {
		if _, err := os.Lstat(filepath.Join(next.Root(), name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is left: %v", name, err)
		}
	}
	if b := testgit.Git(t, repo, "for-each-ref", "refs/heads/peal-test/"); b != "" {
		t.Errorf("branch left: %q", b)
	}
}

// TestHomeUnborn: in a repository without a commit the home worktree is
// on an unborn branch of its own with nothing staged, and no commit reaches
// the work tree's branch.
func TestHomeUnborn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := t.TempDir()
	testgit.Init(t, repo)
	os.WriteFile(filepath.Join(repo, "mine.txt"), []byte("mine\n"), 0o644)
	s := homeSet(repo, filepath.Join(t.TempDir(), "state"), &bytes.Buffer{})
	h, err := s.AddHome(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := gitrepo.Plain(h.Path).Command("rev-parse", "--verify", "-q", "HEAD").Run(ctx); err == nil {
		t.Fatalf("the home has a HEAD: %q", out)
	}
	if got := testgit.Git(t, h.Path, "symbolic-ref", "HEAD"); got != "refs/heads/"+h.Branch {
		t.Errorf("HEAD %q", got)
	}
	if got := testgit.Git(t, h.Path, "ls-files"); got != "" {
		t.Errorf("staged: %q", got)
	}
	if _, err := gitrepo.Plain(repo).Command("rev-parse", "--verify", "-q", "HEAD").Run(ctx); err == nil {
		t.Error("the work tree's branch got a commit")
	}
}

// TestBring: the changes made in the home worktree are written into the
// work tree as git would check them out (a new file, a change, an
// executable, a link, a removal with the folder it empties); a path the
// work tree changed meanwhile refuses the whole change, writing nothing;
// bringing what was brought already changes nothing.
func TestBring(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, head := testRepo(t)
	s := homeSet(repo, filepath.Join(t.TempDir(), "state"), &bytes.Buffer{})
	h, err := s.AddHome(ctx, head)
	if err != nil {
		t.Fatal(err)
	}
	home := gitrepo.Plain(h.Path, testgit.Env...)
	os.WriteFile(filepath.Join(h.Path, "base.txt"), []byte("changed\n"), 0o644)
	os.MkdirAll(filepath.Join(h.Path, "new", "deep"), 0o755)
	os.WriteFile(filepath.Join(h.Path, "new", "deep", "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.Symlink("../top.txt", filepath.Join(h.Path, "new", "link"))
	os.RemoveAll(filepath.Join(h.Path, "c"))
	state, err := home.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	changes, err := home.TreeChanges(ctx, head, state)
	if err != nil {
		t.Fatal(err)
	}
	// The work tree changed one of the paths meanwhile: nothing is written.
	os.WriteFile(filepath.Join(repo, "c", "f.txt"), []byte("the user's\n"), 0o644)
	_, err = s.Bring(changes)
	var be *BringError
	if !errors.As(err, &be) || be.Path != "c/f.txt" {
		t.Fatalf("Bring over a changed file: %v", err)
	}
	if fileIn(t, repo, "base.txt") != "base\n" {
		t.Fatal("a refused change wrote a file")
	}
	testgit.Git(t, repo, "checkout", "--", "c/f.txt")
	for range 2 {
		if _, err := s.Bring(changes); err != nil {
			t.Fatal(err)
		}
	}
	if fileIn(t, repo, "base.txt") != "changed\n" {
		t.Error("base.txt not brought")
	}
	if info, err := os.Stat(filepath.Join(repo, "new", "deep", "run.sh")); err != nil || info.Mode().Perm()&0o100 == 0 {
		t.Errorf("run.sh: %v", err)
	}
	if target, err := os.Readlink(filepath.Join(repo, "new", "link")); err != nil || target != "../top.txt" {
		t.Errorf("link: %q %v", target, err)
	}
	if _, err := os.Lstat(filepath.Join(repo, "c")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the emptied folder stays: %v", err)
	}
	if got := testgit.Git(t, repo, "add", "-A", "--dry-run"); got == "" {
		t.Fatal("nothing changed in the work tree")
	}
	testgit.Git(t, repo, "add", "-A")
	if got := testgit.Git(t, repo, "write-tree"); got != state {
		t.Errorf("the work tree holds %s, the home %s", got, state)
	}
}

// TestBringIgnored: what a task did in the home worktree to the entries
// git ignores comes to the work tree: a linked folder it removed is
// removed, one it made again replaces the old one, and a new build output
// moves there; each is linked back.
func TestBringIgnored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, _ := testRepo(t)
	os.WriteFile(filepath.Join(repo, ".gitignore"), []byte("deps/\ncache/\nbin/\n.env\n"), 0o644)
	testgit.Git(t, repo, "add", ".gitignore")
	testgit.Git(t, repo, "commit", "-q", "-m", "ignore")
	for _, d := range []string{"deps", "cache"} {
		os.MkdirAll(filepath.Join(repo, d), 0o755)
		os.WriteFile(filepath.Join(repo, d, "old"), []byte("old\n"), 0o644)
	}
	s := homeSet(repo, filepath.Join(t.TempDir(), "state"), &bytes.Buffer{})
	h, err := s.AddHome(ctx, testgit.Git(t, repo, "rev-parse", "HEAD"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.LinkIgnored(ctx, nil); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(repo, ".env"), []byte("SECRET=mine\n"), 0o600)
	if _, err := s.LinkIgnored(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// The task puts a link of its own where the user's .env was linked.
	os.Remove(filepath.Join(h.Path, ".env"))
	os.Symlink("/etc/hostname", filepath.Join(h.Path, ".env"))
	os.Remove(filepath.Join(h.Path, "cache"))
	os.Remove(filepath.Join(h.Path, "deps"))
	os.MkdirAll(filepath.Join(h.Path, "deps"), 0o755)
	os.WriteFile(filepath.Join(h.Path, "deps", "new"), []byte("new\n"), 0o644)
	os.MkdirAll(filepath.Join(h.Path, "bin"), 0o755)
	os.WriteFile(filepath.Join(h.Path, "bin", "app"), []byte("app\n"), 0o755)
	st, err := gitrepo.Plain(h.Path).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	linked, brought, err := s.BringIgnored(ctx, st.Ignored)
	if err != nil || !brought || !slices.Equal(slices.Sorted(slices.Values(linked)), []string{".env", "bin/", "deps/"}) {
		t.Fatalf("BringIgnored: %v, %v, linked %q", err, brought, linked)
	}
	if _, err := os.Lstat(filepath.Join(repo, "cache")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("cache stays: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(repo, "deps", "old")); !errors.Is(err, fs.ErrNotExist) || fileIn(t, repo, "deps/new") != "new\n" {
		t.Errorf("deps: %v", err)
	}
	if fileIn(t, repo, "bin/app") != "app\n" || !linkedTo(filepath.Join(repo, "bin"), filepath.Join(h.Path, "bin")) {
		t.Error("bin not moved and linked back")
	}
	if got := testgit.Git(t, h.Path, "status", "--porcelain"); got != "" {
		t.Errorf("git status in the home worktree: %q", got)
	}
	// The user's .env is never lost: with no task's mark to hold a copy,
	// it is kept on a ref of its own, noted in the repository's git
	// folder, with the command that puts it back.
	kept := s.Kept()
	if len(kept) != 1 || len(kept[0].Files) != 1 || kept[0].Files[0].Path != ".env" ||
		testgit.Git(t, repo, "show", kept[0].Ref+":.env") != "SECRET=mine" {
		t.Fatalf("the user's .env kept: %+v", kept)
	}
	if noted := state.ReadKept(state.KeptDir(filepath.Join(repo, ".git")), nil); len(noted) != 1 || noted[0].Ref != kept[0].Ref {
		t.Fatalf("noted %+v", noted)
	}
	os.Remove(filepath.Join(repo, ".env"))
	testgit.Git(t, repo, strings.Fields(strings.TrimPrefix(kept[0].Files[0].Restore, "git "))...)
	if fileIn(t, repo, ".env") != "SECRET=mine\n" {
		t.Fatal("the restore command does not put .env back")
	}
}

// TestBringIgnoredDataOnly: what a task made in the home worktree and git
// ignores comes back as data only: a set-uid copy of a shell, a set-gid
// file, a sticky folder, a named pipe, a socket, anything in peal's own
// folders or a git folder is refused with a *BringError naming it, and
// nothing at all is brought. As root, and as an unprivileged user.
func TestBringIgnoredDataOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Skip("no /bin/sh to copy")
	}
	for _, c := range []struct {
		name, path, why string
		make            func(home string) error
	}{
		{"set-uid shell", "build/sh", "set-uid", func(home string) error {
			if err := os.WriteFile(filepath.Join(home, "build", "sh"), sh, 0o755); err != nil {
				return err
			}
			return os.Chmod(filepath.Join(home, "build", "sh"), 0o755|fs.ModeSetuid)
		}},
		{"set-gid", "build/tool", "set-gid", func(home string) error {
			os.WriteFile(filepath.Join(home, "build", "tool"), []byte("x"), 0o755)
			return os.Chmod(filepath.Join(home, "build", "tool"), 0o755|fs.ModeSetgid)
		}},
		{"sticky folder", "build/tmp", "sticky", func(home string) error {
			os.Mkdir(filepath.Join(home, "build", "tmp"), 0o755)
			return os.Chmod(filepath.Join(home, "build", "tmp"), 0o777|fs.ModeSticky)
		}},
		{"named pipe", "build/pipe", "named pipe", func(home string) error { return syscall.Mkfifo(filepath.Join(home, "build", "pipe"), 0o644) }},
		{"socket", "build/s", "socket", func(home string) error {
			l, err := net.Listen("unix", filepath.Join(home, "build", "s"))
			if err != nil {
				return err
			}
			l.(*net.UnixListener).SetUnlinkOnClose(false)
			return l.Close()
		}},
		{"a git folder", "build/dep/.git", "git folder", func(home string) error {
			os.MkdirAll(filepath.Join(home, "build", "dep", ".git", "hooks"), 0o755)
			return os.WriteFile(filepath.Join(home, "build", "dep", ".git", "config"), []byte("[core]\n"), 0o644)
		}},
		{"peal's state folder", ".peal", "peal's own folder .peal", func(home string) error {
			os.MkdirAll(filepath.Join(home, ".peal"), 0o755)
			return os.WriteFile(filepath.Join(home, ".peal", "state.json"), []byte("{}"), 0o644)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			repo, _ := testRepo(t)
			os.WriteFile(filepath.Join(repo, ".gitignore"), []byte("build/\n.peal/\nout.txt\n"), 0o644)
			testgit.Git(t, repo, "add", ".gitignore")
			testgit.Git(t, repo, "commit", "-q", "-m", "ignore")
			s := homeSet(repo, filepath.Join(t.TempDir(), "state"), &bytes.Buffer{})
			s.Own(filepath.Join(repo, ".peal"))
			h, err := s.AddHome(ctx, testgit.Git(t, repo, "rev-parse", "HEAD"))
			if err != nil {
				t.Fatal(err)
			}
			// Beside the entry refused, a plain output the task made too.
			os.MkdirAll(filepath.Join(h.Path, "build"), 0o755)
			os.WriteFile(filepath.Join(h.Path, "out.txt"), []byte("out\n"), 0o644)
			if err := c.make(h.Path); err != nil {
				t.Skipf("cannot make it here: %v", err)
			}
			st, err := gitrepo.Plain(h.Path).Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, brought, err := s.BringIgnored(ctx, st.Ignored)
			var be *BringError
			if !errors.As(err, &be) || be.Path != c.path || !strings.Contains(be.Why, c.why) || brought {
				t.Fatalf("err %v (%+v), brought %v; want %s refused (%s)", err, be, brought, c.path, c.why)
			}
			for _, p := range []string{"build", ".peal", "out.txt"} {
				if _, err := os.Lstat(filepath.Join(repo, p)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s reached the work tree: %v", p, err)
				}
			}
		})
	}
}

// TestBringIgnoredDataOnlyAsAUser runs TestBringIgnoredDataOnly as an
// unprivileged user: what such a user may make (a set-uid file of its own,
// a sticky folder) is refused the same.
func TestBringIgnoredDataOnlyAsAUser(t *testing.T) {
	testbin.RerunAsUser(t, "^TestBringIgnoredDataOnly$")
}

// TestNeverOverIgnored: work that puts something where the work tree holds
// a file it ignores (a link the task committed at the path of the user's
// .env, after taking .env out of .gitignore) is refused, fast-forward or
// brought as files, with the path named; the user's .env stays, and so
// does a file under a folder the work tree holds as a link.
func TestNeverOverIgnored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, _ := testRepo(t)
	os.WriteFile(filepath.Join(repo, ".gitignore"), []byte(".env\nvendor\n"), 0o644)
	testgit.Git(t, repo, "add", ".gitignore")
	testgit.Git(t, repo, "commit", "-q", "-m", "ignore")
	head := testgit.Git(t, repo, "rev-parse", "HEAD")
	os.WriteFile(filepath.Join(repo, ".env"), []byte("SECRET=the user's\n"), 0o600)
	elsewhere := t.TempDir()
	os.Symlink(elsewhere, filepath.Join(repo, "vendor"))
	s := homeSet(repo, filepath.Join(t.TempDir(), "state"), &bytes.Buffer{})
	h, err := s.AddHome(ctx, head)
	if err != nil {
		t.Fatal(err)
	}
	home := gitrepo.Plain(h.Path, testgit.Env...)
	for _, c := range []struct {
		path, want string
		plant      func()
	}{
		{".env", "peal never overwrites nor removes it", func() {
			os.WriteFile(filepath.Join(h.Path, ".gitignore"), []byte(""), 0o644)
			os.Symlink("/etc/hostname", filepath.Join(h.Path, ".env"))
		}},
		{"vendor/evil.sh", "the work tree holds vendor there, which is no folder", func() {
			os.WriteFile(filepath.Join(h.Path, ".gitignore"), []byte(".env\n"), 0o644)
			os.MkdirAll(filepath.Join(h.Path, "vendor"), 0o755)
			os.WriteFile(filepath.Join(h.Path, "vendor", "evil.sh"), []byte("#!/bin/sh\n"), 0o755)
		}},
	} {
		testgit.Git(t, h.Path, "reset", "-q", "--hard", head)
		testgit.Git(t, h.Path, "clean", "-fdq")
		c.plant()
		testgit.Git(t, h.Path, "add", "-A")
		testgit.Git(t, h.Path, "commit", "-q", "-m", "plant")
		err := s.FastForward(ctx)
		var be *BringError
		if !errors.As(err, &be) || be.Path != c.path || !strings.Contains(be.Error(), c.want) {
			t.Fatalf("%s: fast-forward: %v", c.path, err)
		}
		state, err := home.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		changes, err := home.TreeChanges(ctx, head, state)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Bring(changes); !errors.As(err, &be) || be.Path != c.path {
			t.Fatalf("%s: bring: %v", c.path, err)
		}
		if got := testgit.Git(t, repo, "rev-parse", "HEAD"); got != head {
			t.Fatalf("%s: the work tree moved", c.path)
		}
		if fileIn(t, repo, ".env") != "SECRET=the user's\n" {
			t.Fatalf("%s: the user's .env changed", c.path)
		}
		if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
			t.Fatalf("%s: written through the user's link: %v", c.path, entries)
		}
	}
}
