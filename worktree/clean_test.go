package worktree

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"peal/internal/testkit/testgit"
)

// TestCleanRemovesOnlyWhatHoldsNoWork: Clean removes the run's worktree and
// its branch when the work tree holds all it holds (the ignored entries
// linked into it stay in the work tree), and leaves it, saying why, when it
// holds work the work tree has not taken; a branch of the runs whose
// commits the work tree's history lacks is left, a merged one deleted; a
// kept branch is only named; the work tree is never touched.
func TestCleanRemovesOnlyWhatHoldsNoWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, _ := testRepo(t)
	os.WriteFile(filepath.Join(repo, ".gitignore"), []byte("deps/\n"), 0o644)
	testgit.Git(t, repo, "add", ".gitignore")
	testgit.Git(t, repo, "commit", "-q", "-m", "ignore")
	head := testgit.Git(t, repo, "rev-parse", "HEAD")
	os.MkdirAll(filepath.Join(repo, "deps"), 0o755)
	os.WriteFile(filepath.Join(repo, "deps", "lib.js"), []byte("lib\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "wip.txt"), []byte("the user's uncommitted work\n"), 0o644)
	state := filepath.Join(t.TempDir(), "state")
	tmp := filepath.Join(state, "tmp")
	var log bytes.Buffer
	s := homeSet(repo, state, &log)
	s.Sweep(ctx, func(int) bool { return false })
	h, err := s.AddHome(ctx, head)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.LinkIgnored(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.NoteBrought(Brought{Commit: head}); err != nil {
		t.Fatal(err)
	}
	// A branch of the runs the work tree never took, one it took, and one
	// kept for the user.
	testgit.Git(t, repo, "branch", "peal-test/task-7", head)
	testgit.Git(t, repo, "branch", KeptPrefix+"task-2-abc", head)
	other := filepath.Join(t.TempDir(), "other")
	testgit.Git(t, repo, "worktree", "add", "-q", "-b", "peal-test/task-9", other, head)
	os.WriteFile(filepath.Join(other, "task9.txt"), []byte("x\n"), 0o644)
	testgit.Git(t, other, "add", "task9.txt")
	testgit.Git(t, other, "commit", "-q", "-m", "task 9's work")
	testgit.Git(t, repo, "worktree", "remove", other)

	// The run's worktree holds work the work tree has not taken: left.
	os.WriteFile(filepath.Join(h.Path, "new.txt"), []byte("a task's work\n"), 0o644)
	c, err := homeSet(repo, state, &log).Clean(ctx, tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Removed) != 1 || !strings.Contains(c.Removed[0], "branch peal-test/task-7") ||
		len(c.Left) != 2 || !strings.Contains(c.Left[0], "it holds work the work tree has not taken") || !strings.Contains(c.Left[1], "branch peal-test/task-9: it holds commits") ||
		!slices.Equal(c.Kept, []string{KeptPrefix + "task-2-abc"}) {
		t.Fatalf("cleaned %+v", c)
	}
	if _, err := os.Stat(filepath.Join(h.Path, "new.txt")); err != nil {
		t.Fatalf("the work of the run's worktree is gone: %v", err)
	}

	// Once the work tree holds it all, the run's worktree goes, and its
	// branch; the links into it go, never what they name.
	os.Remove(filepath.Join(h.Path, "new.txt"))
	c, err = homeSet(repo, state, &log).Clean(ctx, tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Removed) != 1 || !strings.Contains(c.Removed[0], "the run's worktree") || len(c.Left) != 1 {
		t.Fatalf("cleaned %+v", c)
	}
	if _, err := os.Stat(h.Path); !os.IsNotExist(err) {
		t.Fatalf("the run's worktree is still there: %v", err)
	}
	branches := testgit.Git(t, repo, "branch", "--format=%(refname:short)")
	if strings.Contains(branches, h.Branch) || !strings.Contains(branches, "peal-test/task-9") || !strings.Contains(branches, KeptPrefix+"task-2-abc") {
		t.Fatalf("branches:\n%s", branches)
	}
	if data, err := os.ReadFile(filepath.Join(repo, "deps", "lib.js")); err != nil || string(data) != "lib\n" {
		t.Fatalf("a linked folder's file: %q, %v", data, err)
	}
	if data, err := os.ReadFile(filepath.Join(repo, "wip.txt")); err != nil || string(data) != "the user's uncommitted work\n" {
		t.Fatalf("the user's work: %q, %v", data, err)
	}
}
