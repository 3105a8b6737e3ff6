package worktree

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"peal/internal/gitrepo"
	"peal/internal/testkit/testbin"
	"peal/internal/testkit/testgit"
	"peal/phase"
)

// benchFiles is the size of the repository of the worktree benchmarks.
const benchFiles = 10000

// benchSet is the set of worktrees of a fresh state folder in dir for repo.
func benchSet(dir, repo string, timeout time.Duration) *Set {
	caller := phase.Caller{Dir: repo, Limits: phase.Limits{Timeout: timeout, KillGrace: time.Second}, Env: testgit.Env}
	log := slog.New(slog.DiscardHandler)
	return New(gitrepo.New(caller, log, timeout, repo), log, filepath.Join(dir, "state"), "bench", nil)
}

// dropTree removes the worktree of t and its branch, as a block does once
// its task is merged.
func dropTree(b *testing.B, s *Set, t *Tree) {
	if err := s.Remove(context.Background(), t); err != nil {
		b.Fatal(err)
	}
	if err := s.DeleteBranch(context.Background(), t.Branch); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkWorktreeAdd10kFiles: making and removing the worktree of one task
// on a repository of 10 000 files, as a block does (git worktree add of a
// new branch, then git worktree remove and the branch deleted), against
// cp -r of the same files (cp-ms): the cost of writing them at all.
func BenchmarkWorktreeAdd10kFiles(b *testing.B) {
	testbin.BenchPlaces(b, func(b *testing.B, dir string) {
		repo, head := testgit.GeneratedRepo(b, dir, benchFiles, 100)
		s := benchSet(dir, repo, time.Minute)
		ctx := context.Background()
		var add, remove, copied time.Duration
		n := 0
		for b.Loop() {
			start := time.Now()
			t, err := s.Add(ctx, 1, head)
			if err != nil {
				b.Fatal(err)
			}
			mid := time.Now()
			dropTree(b, s, t)
			add, remove = add+mid.Sub(start), remove+time.Since(mid)
			// The floor: the same files written by cp, outside git.
			b.StopTimer()
			dst := filepath.Join(dir, "copy")
			start = time.Now()
			if out, err := exec.Command("sh", "-c", "mkdir "+dst+" && cp -r "+repo+"/pkg* "+dst).CombinedOutput(); err != nil {
				b.Fatalf("cp: %v\n%s", err, out)
			}
			copied += time.Since(start)
			os.RemoveAll(dst)
			b.StartTimer()
			n++
		}
		b.ReportMetric(float64(add.Milliseconds())/float64(n), "add-ms")
		b.ReportMetric(float64(remove.Milliseconds())/float64(n), "remove-ms")
		b.ReportMetric(float64(copied.Milliseconds())/float64(n), "cp-ms")
	})
}

// BenchmarkWorktreeAdd4At10kFiles: the worktrees of a block of 4 made at
// the same time, as the block makes them (registered one at a time, their
// files written together), on a repository of 10 000 files: the wall time
// of the four (block-ms) and that time per task (task-ms).
func BenchmarkWorktreeAdd4At10kFiles(b *testing.B) {
	testbin.BenchPlaces(b, func(b *testing.B, dir string) {
		repo, head := testgit.GeneratedRepo(b, dir, benchFiles, 100)
		s := benchSet(dir, repo, time.Minute)
		ctx := context.Background()
		var made time.Duration
		n := 0
		for b.Loop() {
			start := time.Now()
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for task := 1; task <= 4; task++ {
				wg.Go(func() { _, errs[task-1] = s.Add(ctx, task, head) })
			}
			wg.Wait()
			made += time.Since(start)
			b.StopTimer()
			for task := 1; task <= 4; task++ {
				if errs[task-1] != nil {
					b.Fatal(errs[task-1])
				}
				dropTree(b, s, s.Of(task))
			}
			b.StartTimer()
			n++
		}
		b.ReportMetric(float64(made.Milliseconds())/float64(n), "block-ms")
		b.ReportMetric(float64(made.Milliseconds())/float64(4*n), "task-ms")
	})
}

// The repository of BenchmarkLargeRepo20kFiles: 20 000 files in 200
// folders.
const largeFiles, largeFolders = 20000, 200

// BenchmarkLargeRepo20kFiles: what the worktrees of a parallel block cost
// on a repository of 20 000 files in 200 folders, on disk and on tmpfs.
// Each sub-benchmark measures its two cases alternately, in the same loop,
// so that a machine busy with other work slows both alike (the block of 4
// with full and sparse worktrees is the runner's
// BenchmarkLargeRepo20kFiles):
//
//   - deps: worktree_link (link-ms) against worktree_copy (copy-ms) of a
//     dependency folder of 20 000 files, per task; the target is ≤ 10 ms.
//     link-block-ms is what a block pays once for its links (checking the
//     path, naming it in info/exclude and removing it again).
//   - add: peal's full worktree of one task (registered without its files,
//     then its files read in: peal-ms) against a plain `git worktree add`
//     of a new branch of the same tree (git-ms); the target is
//     peal/git ≤ 1.2. size-ms is the disk check's look at the tree, once
//     per block.
func BenchmarkLargeRepo20kFiles(b *testing.B) {
	testbin.BenchPlaces(b, func(b *testing.B, dir string) {
		repo, head := testgit.GeneratedRepo(b, dir, largeFiles, largeFolders)
		ctx := context.Background()

		b.Run("add", func(b *testing.B) {
			s := benchSet(filepath.Join(dir, "add"), repo, 10*time.Minute)
			var pealTime, gitTime, sizeTime time.Duration
			n := 0
			for b.Loop() {
				start := time.Now()
				t, err := s.Add(ctx, 1, head)
				if err != nil {
					b.Fatal(err)
				}
				pealTime += time.Since(start)
				b.StopTimer()
				dropTree(b, s, t)
				path := filepath.Join(dir, "plain")
				b.StartTimer()
				start = time.Now()
				testgit.Git(b, repo, "worktree", "add", "-q", "-b", "plain", path, head)
				gitTime += time.Since(start)
				b.StopTimer()
				testgit.Git(b, repo, "worktree", "remove", "--force", path)
				testgit.Git(b, repo, "branch", "-q", "-D", "plain")
				start = time.Now()
				if _, err := s.Size(ctx, head, 4096); err != nil {
					b.Fatal(err)
				}
				sizeTime += time.Since(start)
				b.StartTimer()
				n++
			}
			b.ReportMetric(float64(pealTime.Milliseconds())/float64(n), "peal-ms")
			b.ReportMetric(float64(gitTime.Milliseconds())/float64(n), "git-ms")
			b.ReportMetric(pealTime.Seconds()/gitTime.Seconds(), "peal/git")
			b.ReportMetric(float64(sizeTime.Milliseconds())/float64(n), "size-ms")
		})

		b.Run("deps", func(b *testing.B) {
			// A work tree of a few files whose node_modules, ignored, holds
			// 20 000 files in 200 folders.
			work := filepath.Join(dir, "deps")
			deps, _ := testgit.GeneratedRepo(b, work, 1, 1)
			for i := range largeFiles {
				d := filepath.Join(deps, "node_modules", testgit.PkgName(i%largeFolders, largeFolders))
				if i < largeFolders {
					os.MkdirAll(d, 0o755)
				}
				if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d.js", i)), []byte("module.exports = 1\n"), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			os.WriteFile(filepath.Join(deps, ".git", "info", "exclude"), []byte("node_modules/\n"), 0o644)
			s := benchSet(work, deps, time.Minute)
			links := []string{"node_modules"}
			var linkTime, copyTime, blockTime time.Duration
			n := 0
			for b.Loop() {
				for _, c := range []struct {
					copies, links []string
					took          *time.Duration
				}{{nil, links, &linkTime}, {links, nil, &copyTime}} {
					b.StopTimer()
					t := &Tree{Task: 1, Dir: filepath.Join(work, "task")}
					if err := os.MkdirAll(t.Dir, 0o755); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					start := time.Now()
					if err := s.Prepare(t, c.copies, c.links); err != nil {
						b.Fatal(err)
					}
					*c.took += time.Since(start)
					b.StopTimer()
					os.RemoveAll(t.Dir)
					b.StartTimer()
				}
				start := time.Now()
				if err := s.CheckLinks(ctx, links); err != nil {
					b.Fatal(err)
				}
				if err := s.Exclude(ctx, links); err != nil {
					b.Fatal(err)
				}
				if err := s.Unexclude(ctx); err != nil {
					b.Fatal(err)
				}
				blockTime += time.Since(start)
				n++
			}
			b.ReportMetric(float64(linkTime.Microseconds())/1000/float64(n), "link-ms")
			b.ReportMetric(float64(copyTime.Microseconds())/1000/float64(n), "copy-ms")
			b.ReportMetric(float64(blockTime.Microseconds())/1000/float64(n), "link-block-ms")
			if _, err := os.Stat(filepath.Join(deps, "node_modules", testgit.PkgName(0, largeFolders), "f00000.js")); err != nil {
				b.Fatalf("the linked folder lost its files: %v", err)
			}
		})
	})
}
