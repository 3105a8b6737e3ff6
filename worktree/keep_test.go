package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"peal/internal/testkit/testgit"
)

// TestSettlePutsBack: a task that worked in the work tree and did not
// complete has its work kept on a branch, and the work tree is put back as
// the mark holds it: the branch, the files (an uncommitted edit, a staged
// file, an ignored .env), the index; what git ignores that the task made
// goes; an ignored file over the bound, of which the mark took no copy
// (and said so, once), stays as the task left it, and so does an ignored
// folder that was there.
func TestSettlePutsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, _ := testRepo(t)
	os.WriteFile(filepath.Join(repo, ".gitignore"), []byte(".env\n*.log\ndeps/\nout/\nnode_modules/\n"), 0o644)
	testgit.Git(t, repo, "add", ".gitignore")
	testgit.Git(t, repo, "commit", "-q", "-m", "ignore")
	head := testgit.Git(t, repo, "rev-parse", "HEAD")
	os.WriteFile(filepath.Join(repo, ".env"), []byte("SECRET=1\n"), 0o600)
	os.WriteFile(filepath.Join(repo, "big.log"), bytes.Repeat([]byte("x"), maxIgnoredFile+1), 0o644)
	os.MkdirAll(filepath.Join(repo, "deps"), 0o755)
	os.WriteFile(filepath.Join(repo, "deps", "lib"), []byte("lib\n"), 0o644)
	// A folder of more entries than a mark copies: an install's.
	os.MkdirAll(filepath.Join(repo, "node_modules"), 0o755)
	for i := range maxIgnoredFolder {
		os.WriteFile(filepath.Join(repo, "node_modules", fmt.Sprintf("m%d", i)), []byte("module\n"), 0o644)
	}
	os.WriteFile(filepath.Join(repo, "top.txt"), []byte("my edit\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "staged.txt"), []byte("staged\n"), 0o644)
	testgit.Git(t, repo, "add", "staged.txt")
	status := testgit.Git(t, repo, "status", "--porcelain", "--ignored")
	var log bytes.Buffer
	s := homeSet(repo, filepath.Join(t.TempDir(), "state"), &log)
	m, err := s.Mark(ctx, []int{3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Mark(ctx, []int{3}); err != nil { // the warning is said once a run
		t.Fatal(err)
	}
	if strings.Count(log.String(), "big.log") != 1 || strings.Count(log.String(), "node_modules/") != 1 {
		t.Fatalf("the ignored file and folder over the bounds are not named once:\n%s", log.String())
	}
	// The task: a commit, edits, removals, what it builds.
	os.WriteFile(filepath.Join(repo, "a", "f.txt"), []byte("the task's\n"), 0o644)
	testgit.Git(t, repo, "commit", "-q", "-am", "task 3")
	os.WriteFile(filepath.Join(repo, ".env"), []byte("SECRET=theirs\n"), 0o600)
	os.Remove(filepath.Join(repo, "staged.txt"))
	os.WriteFile(filepath.Join(repo, "big.log"), []byte("short\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "new.log"), []byte("new\n"), 0o644)
	os.MkdirAll(filepath.Join(repo, "out"), 0o755)
	os.WriteFile(filepath.Join(repo, "out", "bin"), []byte("bin\n"), 0o755)
	os.WriteFile(filepath.Join(repo, "deps", "lib"), []byte("rebuilt\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "node_modules", "m0"), []byte("reinstalled\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "half.txt"), []byte("half\n"), 0o644)

	st, err := s.Settle(ctx, m, false, true, "the task failed", time.Now())
	if err != nil || st.Landed || st.Work == nil || !strings.HasPrefix(st.Work.Ref, KeptPrefix+"task-3-") {
		t.Fatalf("settled %+v, %v", st, err)
	}
	if got := testgit.Git(t, repo, "rev-parse", "HEAD"); got != head {
		t.Fatalf("HEAD %s, want %s", got, head)
	}
	if got := testgit.Git(t, repo, "show", st.Work.Ref+":half.txt"); got != "half" {
		t.Fatalf("the kept branch holds %q", got)
	}
	for name, want := range map[string]string{".env": "SECRET=1\n", "top.txt": "my edit\n", "staged.txt": "staged\n", "a/f.txt": "a\n",
		"big.log": "short\n", "deps/lib": "lib\n", "node_modules/m0": "reinstalled\n"} {
		if got := fileIn(t, repo, name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	for _, gone := range []string{"new.log", "out", "half.txt"} {
		if _, err := os.Lstat(filepath.Join(repo, gone)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still there: %v", gone, err)
		}
	}
	if got := testgit.Git(t, repo, "status", "--porcelain", "--ignored"); got != status {
		t.Errorf("status %q, want %q", got, status)
	}
	if _, ok := s.LeftMark(ctx); ok {
		t.Error("the mark outlived its settling")
	}
}

// TestSettleLeftPutsFilesBack: a confined run (whose tasks work in the run's
// worktree) killed while it brought a task's work into the work tree leaves
// the mark of a task that did not complete; the next run settles it with
// the work tree put back as the mark has it, files and index, whatever the
// dead run got to write, which is kept on a branch first.
func TestSettleLeftPutsFilesBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, _ := testRepo(t)
	os.WriteFile(filepath.Join(repo, "top.txt"), []byte("my edit\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "staged.txt"), []byte("staged\n"), 0o644)
	testgit.Git(t, repo, "add", "staged.txt")
	status := testgit.Git(t, repo, "status", "--porcelain", "--ignored")
	state := filepath.Join(t.TempDir(), "state")
	if _, err := homeSet(repo, state, &bytes.Buffer{}).Mark(ctx, []int{2}); err != nil {
		t.Fatal(err)
	}
	// What the dead run brought before it died: a file replaced, one
	// added, all staged.
	os.WriteFile(filepath.Join(repo, "top.txt"), []byte("the task's\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "half.txt"), []byte("half\n"), 0o644)
	testgit.Git(t, repo, "add", "-A")
	s := homeSet(repo, state, &bytes.Buffer{}) // the next run's
	m, ok := s.LeftMark(ctx)
	if !ok {
		t.Fatal("no mark left")
	}
	st, err := s.Settle(ctx, m, false, false, "an earlier run ended before its task completed", time.Now())
	if err != nil || st.Landed || st.Work == nil {
		t.Fatalf("settled %+v, %v", st, err)
	}
	if got := testgit.Git(t, repo, "status", "--porcelain", "--ignored"); got != status {
		t.Errorf("status %q, want %q", got, status)
	}
	if got := fileIn(t, repo, "top.txt"); got != "my edit\n" {
		t.Errorf("top.txt = %q", got)
	}
	if got := testgit.Git(t, repo, "show", st.Work.Ref+":half.txt"); got != "half" {
		t.Errorf("the kept branch holds half.txt = %q", got)
	}
}

// TestMergeRefusesPealsFolders: the work of a task of a parallel block
// that committed files in peal's state folder or stet's is never merged:
// the merge is refused before it starts, naming the path, and the work tree
// stays.
func TestMergeRefusesPealsFolders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, path := range []string{".peal/state.json", ".review/stet/session.json"} {
		repo, head := testRepo(t)
		s := testSet(t, repo, nil)
		s.Own(filepath.Join(repo, ".peal"))
		tr, err := s.Add(ctx, 1, head)
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(tr.Path, filepath.Dir(path)), 0o755)
		os.WriteFile(filepath.Join(tr.Path, path), []byte("planted\n"), 0o644)
		testgit.Git(t, tr.Path, "add", "-f", path)
		testgit.Git(t, tr.Path, "commit", "-q", "-m", "plant")
		_, err = s.Merge(ctx, 1, tr.Branch)
		var ce *ConflictError
		if !errors.As(err, &ce) || !strings.Contains(ce.Detail, path) || !strings.Contains(ce.Detail, "peal's own folder") {
			t.Fatalf("%s: err %v", path, err)
		}
		if got := testgit.Git(t, repo, "rev-parse", "HEAD"); got != head {
			t.Fatalf("%s: the work tree moved", path)
		}
		if _, err := os.Lstat(filepath.Join(repo, filepath.Dir(path))); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s reached the work tree: %v", path, err)
		}
	}
}
