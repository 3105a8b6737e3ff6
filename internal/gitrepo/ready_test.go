package gitrepo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"peal/internal/safefs"
	"peal/internal/testkit/testbin"
	"peal/phase"
)

// TestCommitOnAFullDisk: a commit that fails because the disk of the work
// tree is full says so, naming the folder, and no word of the identity.
func TestCommitOnAFullDisk(t *testing.T) {
	t.Parallel()
	repo := testbin.FullDisk(t, func(dir string) {
		git := testGit(t, dir)
		git("init", "-q")
		git("commit", "-q", "--allow-empty", "-m", "root")
	})
	// A file whose object git cannot write: the disk has no room left.
	if err := os.WriteFile(filepath.Join(repo, "work.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	g := New(phase.Caller{Dir: repo, Env: testEnv, Limits: phase.Limits{Timeout: time.Minute, KillGrace: time.Second}}, nil, time.Minute, repo)
	_, err := g.Commit(context.Background(), []int{1}, "work")
	var full *safefs.FullError
	if !errors.As(err, &full) || full.Dir != repo {
		t.Fatalf("commit on a full disk: %v", err)
	}
}
