package testgit

import (
	"context"
	"path/filepath"
	"testing"

	"peal/internal/gitrepo"
)

// Init's copies are repositories of their own: a commit in one is not in
// the other, and git takes both as fresh repositories.
func TestGitInitCopies(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	Init(t, a)
	Init(t, b)
	Git(t, a, "commit", "-q", "--allow-empty", "-m", "first")
	if out := Git(t, a, "log", "--format=%s"); out != "first" {
		t.Fatalf("log of a: %q", out)
	}
	if _, err := gitrepo.Plain(b).Command("rev-parse", "--verify", "-q", "HEAD").Run(context.Background()); err == nil {
		t.Fatal("b has a commit")
	}
	if out := Git(t, b, "rev-parse", "--absolute-git-dir"); out != filepath.Join(b, ".git") {
		t.Fatalf("git dir of b: %q", out)
	}
}
