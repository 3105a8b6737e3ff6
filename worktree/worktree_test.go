package worktree

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"peal/internal/gitrepo"
	"peal/internal/safefs"
	"peal/internal/testkit/testbin"
	"peal/internal/testkit/testgit"
	"peal/phase"
)

// TestMain gives the tests' scratch folders a memory file system when there
// is one (testbin.UseMemoryTemp).
func TestMain(m *testing.M) { os.Exit(testbin.Main(m, nil)) }

// testRepo is a repository whose first commit holds base.txt, the folders
// a, b and c (each with f.txt and sub/g.txt) and top.txt; it returns its
// path and head.
func testRepo(t *testing.T) (string, string) {
	t.Helper()
	repo := t.TempDir()
	testgit.Init(t, repo)
	files := map[string]string{"base.txt": "base\n", "top.txt": "top\n"}
	for _, d := range []string{"a", "b", "c"} {
		files[d+"/f.txt"] = d + "\n"
		files[d+"/sub/g.txt"] = d + " sub\n"
	}
	for name, text := range files {
		os.MkdirAll(filepath.Join(repo, filepath.Dir(name)), 0o755)
		if err := os.WriteFile(filepath.Join(repo, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	testgit.Git(t, repo, "add", "-A")
	testgit.Git(t, repo, "commit", "-q", "-m", "root")
	return repo, testgit.Git(t, repo, "rev-parse", "HEAD")
}

// testSet is the set of worktrees of a state folder of its own for repo,
// sparse or whole, logging to log (nil: nowhere).
func testSet(t *testing.T, repo string, log *bytes.Buffer, sparse ...string) *Set {
	t.Helper()
	caller := phase.Caller{Dir: repo, Limits: phase.Limits{Timeout: time.Minute, KillGrace: time.Second}, Env: testgit.Env}
	logger := slog.New(slog.DiscardHandler)
	if log != nil {
		logger = slog.New(slog.NewTextHandler(log, nil))
	}
	return New(gitrepo.New(caller, logger, time.Minute, repo), logger, filepath.Join(t.TempDir(), "state"), "test", sparse)
}

func fileIn(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// The cone holds the files of its folders, of the folders above them, and
// the top-level files.
func TestConeHolds(t *testing.T) {
	t.Parallel()
	c := coneOf("sub", []string{"x/y", "z/", "./x/y"})
	if !slices.Equal(c, cone{"sub/x/y", "sub/z"}) {
		t.Fatalf("cone %q", c)
	}
	for p, want := range map[string]bool{
		"top.txt": true, "sub/f.txt": true, "sub/x/f.txt": true, "sub/x/y/f.txt": true, "sub/x/y/deep/f.txt": true,
		"sub/z/f.txt": true, "sub/x/w/f.txt": false, "sub/xy/f.txt": false, "other/f.txt": false, "sub/zz/f.txt": false, "sub/x/y2/f": false,
	} {
		if got := c.holds(p); got != want {
			t.Errorf("%s: %v, want %v", p, got, want)
		}
	}
	if !(cone{}).holds("any/where") {
		t.Error("an empty cone is the whole tree")
	}
}

// The size of a worktree adds up the blocks of the files of the cone and
// of their folders, and an index of every path; a cone folder that is a
// file is an error.
func TestTreeSizeCounts(t *testing.T) {
	t.Parallel()
	lt := &lsTree{cone: cone{"a"}, block: 4096, folders: map[string]bool{}}
	listing := "100644 blob 1111 5000\ta/f.txt\x00100644 blob 2222 10\tb/g.txt\x00160000 commit 3333 -\tmod\x00100644 blob 4444 0\ttop\x00"
	// Written in pieces, a record cut in two.
	for _, piece := range []string{listing[:20], listing[20:61], listing[61:]} {
		lt.Write([]byte(piece))
	}
	if lt.files != 2 || lt.bytes != 2*4096+4096 || len(lt.folders) != 1 || lt.index != 3*indexEntry+uint64(len("a/f.txt")+len("b/g.txt")+len("top")) {
		t.Fatalf("%+v", lt)
	}
	// The entries of the top and of the folders above the cone's: a file
	// of a cone folder is not counted twice, a folder outside the cone is
	// one index entry, a folder above or of the cone none.
	above := &lsTree{cone: cone{"x/a"}, block: 4096, folders: map[string]bool{}, above: true}
	above.Write([]byte("100644 blob 1 10\ttop\x00040000 tree 2 -\tx\x00040000 tree 3 -\ty\x00100644 blob 4 5000\tx/f\x00040000 tree 5 -\tx/a\x00040000 tree 6 -\tx/b\x00100644 blob 7 1\tx/a/g\x00"))
	if above.files != 2 || above.bytes != 3*4096 || above.index != 4*indexEntry+uint64(len("top")+len("y")+len("x/f")+len("x/b")) {
		t.Fatalf("%+v", above)
	}
	lt = &lsTree{cone: cone{"a/f.txt"}, block: 4096, folders: map[string]bool{}}
	lt.Write([]byte(listing))
	if lt.notFolder != "a/f.txt" {
		t.Fatalf("notFolder %q", lt.notFolder)
	}
}

// The size of a worktree counts the files and folders a worktree made of
// the same commit holds, sparse or not; and a sparse worktree holds its
// set, the files above it and the top-level files, as Inspect reads it.
func TestTreeSizeOfAWorktree(t *testing.T) {
	t.Parallel()
	repo, head := testRepo(t)
	for _, sparse := range [][]string{nil, {"a"}, {"a/sub", "c"}} {
		s := testSet(t, repo, nil, sparse...)
		size, err := s.Size(context.Background(), head, 4096)
		if err != nil {
			t.Fatal(err)
		}
		tt, err := s.Add(context.Background(), 1, head)
		if err != nil {
			t.Fatal(err)
		}
		entries := 0
		filepath.WalkDir(tt.Path, func(p string, d fs.DirEntry, err error) error {
			if d.Name() == ".git" {
				return nil
			}
			entries++
			return nil
		})
		if uint64(entries) != size.Files {
			t.Errorf("%q: the worktree holds %d files and folders, the size counts %d", sparse, entries, size.Files)
		}
		st, ok := Inspect(s.state, 1)
		if !ok || st.Path != tt.Path || st.Branch != tt.Branch || !slices.Equal(st.Sparse, sparse) {
			t.Errorf("%q: inspected %+v (%v), want %s on %s", sparse, st, ok, tt.Path, tt.Branch)
		}
		if err := s.Remove(context.Background(), tt); err != nil {
			t.Fatal(err)
		}
		if _, ok := Inspect(s.state, 1); ok {
			t.Errorf("%q: a removed worktree is inspected", sparse)
		}
	}
}

// info/exclude keeps what it held around the section of a state folder's
// runs, which is replaced, then removed.
func TestExcludeSection(t *testing.T) {
	t.Parallel()
	repo, _ := testRepo(t)
	s := testSet(t, repo, nil)
	ctx := context.Background()
	file := filepath.Join(repo, ".git", "info", "exclude")
	os.MkdirAll(filepath.Dir(file), 0o755)
	if err := os.WriteFile(file, []byte("# mine\n*.tmp"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Exclude(ctx, []string{"node_modules", "web/a*b [x]"}); err != nil {
		t.Fatal(err)
	}
	scope := strings.TrimSuffix(s.prefix, "/")
	want := "# mine\n*.tmp\n# " + scope + ": worktree_link paths of a running parallel block\n/node_modules\n/web/a\\*b \\[x]\n# end " + scope + "\n"
	if got := fileIn(t, repo, ".git/info/exclude"); got != want {
		t.Fatalf("exclude %q, want %q", got, want)
	}
	if got := testgit.Git(t, repo, "check-ignore", "--no-index", "web/a*b [x]", "web/aXb x"); got != "web/a*b [x]" {
		t.Fatalf("check-ignore %q", got)
	}
	if err := s.Exclude(ctx, []string{".venv"}); err != nil {
		t.Fatal(err)
	}
	if got := fileIn(t, repo, ".git/info/exclude"); got != "# mine\n*.tmp\n# "+scope+": worktree_link paths of a running parallel block\n/.venv\n# end "+scope+"\n" {
		t.Fatalf("exclude %q", got)
	}
	if err := s.Unexclude(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fileIn(t, repo, ".git/info/exclude"); got != "# mine\n*.tmp\n" {
		t.Fatalf("exclude %q", got)
	}
	// A file that held only the section goes with it.
	os.Remove(file)
	if err := s.Exclude(ctx, []string{".venv"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Unexclude(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(file); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("info/exclude: %v, want it gone", err)
	}
}

// A link is made inside the worktree only: a link among its folders (a
// tracked link, say) is refused, and so is a path the worktree already has.
func TestLinkPathRefusals(t *testing.T) {
	t.Parallel()
	repo, wt, outside := t.TempDir(), t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(repo, "web", "node_modules"), 0o755)
	os.MkdirAll(filepath.Join(repo, "node_modules"), 0o755)
	os.Symlink(outside, filepath.Join(wt, "web"))
	err := linkPath(repo, filepath.Join("web", "node_modules"), wt)
	if want := filepath.Join(wt, "web") + " is a symbolic link in the worktree: a link goes in a folder"; err == nil || err.Error() != want {
		t.Fatalf("err %v, want %q", err, want)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("a link was made outside the worktree: %v", entries)
	}
	os.WriteFile(filepath.Join(wt, "node_modules"), []byte("x"), 0o644)
	err = linkPath(repo, "node_modules", wt)
	if want := filepath.Join(wt, "node_modules") + " already exists in the worktree"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err %v, want %q", err, want)
	}
	if err := linkPath(repo, "missing", wt); err == nil || err.Error() != filepath.Join(repo, "missing")+" does not exist in the work tree" {
		t.Fatalf("err %v", err)
	}
}

// The merge note is written whole (atomically), and read back as the
// project reads its files: capped, a note of an older peal (the branch's
// name alone) understood, and a note that cannot be read, such as one cut
// short, kept aside with a warning rather than taken for a branch's name,
// and left there by the sweep.
func TestMergeNote(t *testing.T) {
	t.Parallel()
	repo, _ := testRepo(t)
	var log bytes.Buffer
	s := testSet(t, repo, &log)
	now := time.Date(2026, 11, 27, 1, 2, 3, 0, time.UTC)
	if err := s.writeNote(mergeNote{Task: 2, Branch: "peal-test/task-2", Before: "abc"}); err != nil {
		t.Fatal(err)
	}
	if got := fileIn(t, s.root, noteName); got != `{"task":2,"branch":"peal-test/task-2","before":"abc"}`+"\n" {
		t.Fatalf("note %q", got)
	}
	entries, _ := os.ReadDir(s.root)
	if len(entries) != 1 {
		t.Fatalf("the write left %d files in the worktrees folder", len(entries))
	}
	if n, ok := s.readNote(now); !ok || n != (mergeNote{Task: 2, Branch: "peal-test/task-2", Before: "abc"}) {
		t.Fatalf("read %+v %v", n, ok)
	}
	write := func(text string) {
		if err := os.WriteFile(filepath.Join(s.root, noteName), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("peal-old/task-3\n")
	if n, ok := s.readNote(now); !ok || n != (mergeNote{Branch: "peal-old/task-3"}) {
		t.Fatalf("a note of an older peal: %+v %v", n, ok)
	}
	for i, bad := range []string{`{"task":2,"branch":"peal-te`, "two words\n", strings.Repeat("x", maxNote+1)} {
		write(bad)
		if n, ok := s.readNote(now); ok {
			t.Fatalf("%d: an unreadable note read as %+v", i, n)
		}
		if _, err := os.Lstat(filepath.Join(s.root, noteName)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%d: the unreadable note stayed in place: %v", i, err)
		}
	}
	aside := filepath.Join(s.root, noteName+".corrupt-20261127T010203Z")
	if got := fileIn(t, s.root, filepath.Base(aside)); got != `{"task":2,"branch":"peal-te` {
		t.Fatalf("kept aside %q", got)
	}
	if c := strings.Count(log.String(), "the note of a merge an earlier run began is unreadable: kept aside"); c != 3 {
		t.Fatalf("%d warnings:\n%s", c, log.String())
	}
	s.Sweep(context.Background(), func(int) bool { return false })
	for _, name := range []string{filepath.Base(aside), filepath.Base(aside) + ".1", filepath.Base(aside) + ".2"} {
		if _, err := os.Lstat(filepath.Join(s.root, name)); err != nil {
			t.Fatalf("the sweep removed the kept note %s: %v", name, err)
		}
	}
}

// TestAddThatFailsLeavesNothing: when git has made a task's worktree and
// branch but cannot write the files (here the base commit holds a path git
// refuses to check out), the add fails with git's complaint and neither the
// worktree, nor its folder, nor its branch is left.
func TestAddThatFailsLeavesNothing(t *testing.T) {
	t.Parallel()
	repo, _ := testRepo(t)
	blob := testgit.In(t, repo, "x\n", "hash-object", "-w", "--stdin")
	tree := testgit.In(t, repo, "100644 blob "+blob+"\t.GIT\n", "mktree")
	bad := testgit.Git(t, repo, "commit-tree", tree, "-p", "HEAD", "-m", "bad")
	s := testSet(t, repo, nil)
	_, err := s.Add(context.Background(), 1, bad)
	if err == nil || !strings.Contains(err.Error(), "read-tree") || !strings.Contains(err.Error(), ".GIT") {
		t.Fatalf("add: %v, want git read-tree's refusal of .GIT", err)
	}
	if left := testgit.WorktreeLeftovers(t, repo, s.state); len(left) > 0 {
		t.Errorf("left behind: %q", left)
	}
	if _, err := os.Lstat(treePath(s.state, 1)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the worktree's folder: %v, want it gone", err)
	}
}

// A copy (worktree_copy) lands inside the worktree only: a link the
// worktree holds where the copy goes, or among the folders on its way, is
// replaced or refused, never written through.
func TestCopyPathNeverThroughALink(t *testing.T) {
	t.Parallel()
	repo, wt, outside := t.TempDir(), t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(repo, "conf"), 0o755)
	os.WriteFile(filepath.Join(repo, ".env"), []byte("KEY=1\n"), 0o600)
	os.WriteFile(filepath.Join(repo, "conf", "local.toml"), []byte("x = 1\n"), 0o644)
	victim := filepath.Join(outside, "victim")
	os.WriteFile(victim, []byte("mine\n"), 0o644)
	os.Symlink(victim, filepath.Join(wt, ".env"))
	os.Symlink(outside, filepath.Join(wt, "conf"))
	if err := copyPath(repo, ".env", wt); err != nil {
		t.Fatal(err)
	}
	if got := fileIn(t, wt, ".env"); got != "KEY=1\n" {
		t.Fatalf("the copy: %q", got)
	}
	if info, _ := os.Lstat(filepath.Join(wt, ".env")); !info.Mode().IsRegular() {
		t.Fatalf("the link at the copy's place stayed: %v", info.Mode())
	}
	err := copyPath(repo, filepath.Join("conf", "local.toml"), wt)
	var nr *safefs.NotRegularError
	if !errors.As(err, &nr) {
		t.Fatalf("a link among the folders: err %v", err)
	}
	if got, _ := os.ReadFile(victim); string(got) != "mine\n" {
		t.Fatalf("written through a link: %q", got)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Fatalf("a copy landed outside the worktree: %v", entries)
	}
}
