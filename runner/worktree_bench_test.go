package runner

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"peal/config"
	"peal/internal/fakes"
	"peal/internal/testbin"
	"peal/phase"
	"peal/review"
)

// benchFiles is the size of the repository of the worktree benchmarks.
const benchFiles = 10000

// bigRepo makes a repository of benchFiles small files in 100 folders, one
// commit, under parent; it returns its path and head.
func bigRepo(b *testing.B, parent string) (string, string) {
	b.Helper()
	repo := filepath.Join(parent, "repo")
	for i := range benchFiles {
		dir := filepath.Join(repo, fmt.Sprintf("pkg%02d", i%100))
		if i < 100 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file%05d.go", i)), []byte(fmt.Sprintf("package pkg\n\nconst C%d = %d\n", i, i)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
		cmd.Env = append(os.Environ(), fakes.GitEnv...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "root")
	// Packed, as a clone is: 10 000 loose objects (a tree just added)
	// would make every checkout open and inflate 10 000 files.
	git("repack", "-a", "-d", "-q")
	return repo, git("rev-parse", "HEAD")
}

// benchPlaces are the folders the worktree benchmarks run in: the memory
// folder and the temporary folder the process was given (a disk).
func benchPlaces(b *testing.B, run func(b *testing.B, dir string)) {
	for _, where := range []struct{ name, parent string }{{"disk", testbin.DiskTemp}, {"tmpfs", benchTmpfsParent()}} {
		b.Run(where.name, func(b *testing.B) { run(b, benchDir(b, where.parent)) })
	}
}

// benchDir is a fresh folder in parent, removed after the benchmark; the
// benchmark is skipped where parent does not exist.
func benchDir(b *testing.B, parent string) string {
	if _, err := os.Stat(parent); err != nil {
		b.Skipf("no %s here", parent)
	}
	dir, err := os.MkdirTemp(parent, "peal-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// benchTmpfsParent is where the tmpfs cases run: PEAL_BENCH_DIR, or
// /dev/shm.
func benchTmpfsParent() string {
	if dir := os.Getenv("PEAL_BENCH_DIR"); dir != "" {
		return dir
	}
	return "/dev/shm"
}

// BenchmarkWorktreeAdd10kFiles: making and removing the worktree of one task
// on a repository of 10 000 files, as a block does (git worktree add of a
// new branch, then git worktree remove and the branch deleted), against
// cp -r of the same files (cp-ms): the cost of writing them at all.
func BenchmarkWorktreeAdd10kFiles(b *testing.B) {
	benchPlaces(b, func(b *testing.B, dir string) {
		repo, head := bigRepo(b, dir)
		caller := phase.Caller{Dir: repo, Limits: phase.Limits{Timeout: time.Minute, KillGrace: time.Second}, Env: fakes.GitEnv}
		log := slog.New(slog.DiscardHandler)
		ts := newTrees(filepath.Join(dir, "state"), review.NewGit(caller, log, time.Minute, repo), repo)
		ctx := context.Background()
		var add, remove, copied time.Duration
		n := 0
		for b.Loop() {
			start := time.Now()
			tt, err := ts.add(ctx, 1, head)
			if err != nil {
				b.Fatal(err)
			}
			mid := time.Now()
			if err := ts.remove(ctx, tt); err != nil {
				b.Fatal(err)
			}
			if err := ts.deleteBranch(ctx, tt.branch); err != nil {
				b.Fatal(err)
			}
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
	benchPlaces(b, func(b *testing.B, dir string) {
		repo, head := bigRepo(b, dir)
		caller := phase.Caller{Dir: repo, Limits: phase.Limits{Timeout: time.Minute, KillGrace: time.Second}, Env: fakes.GitEnv}
		ts := newTrees(filepath.Join(dir, "state"), review.NewGit(caller, slog.New(slog.DiscardHandler), time.Minute, repo), repo)
		ctx := context.Background()
		var made time.Duration
		n := 0
		for b.Loop() {
			start := time.Now()
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for task := 1; task <= 4; task++ {
				wg.Go(func() { _, errs[task-1] = ts.add(ctx, task, head) })
			}
			wg.Wait()
			made += time.Since(start)
			b.StopTimer()
			for task := 1; task <= 4; task++ {
				if errs[task-1] != nil {
					b.Fatal(errs[task-1])
				}
				tt := ts.of(task)
				if err := ts.remove(ctx, tt); err != nil {
					b.Fatal(err)
				}
				if err := ts.deleteBranch(ctx, tt.branch); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
			n++
		}
		b.ReportMetric(float64(made.Milliseconds())/float64(n), "block-ms")
		b.ReportMetric(float64(made.Milliseconds())/float64(4*n), "task-ms")
	})
}

// BenchmarkBlock4Tasks10kFiles: a block of 4 instant tasks (each writes one
// file; its work committed) on a repository of 10 000 files, in worktrees
// of their own merged back, against the shared work tree.
func BenchmarkBlock4Tasks10kFiles(b *testing.B) {
	benchPlaces(b, func(b *testing.B, dir string) {
		repo, head := bigRepo(b, dir)
		planPath, agentDir := filepath.Join(dir, "plan.md"), filepath.Join(dir, "agent")
		os.MkdirAll(agentDir, 0o755)
		os.WriteFile(planPath, []byte(parallelPlan("pppp")), 0o644)
		rules := map[string][]fakes.Outcome{}
		for task := 1; task <= 4; task++ {
			rules[fmt.Sprintf("execute:%d", task)] = []fakes.Outcome{{WriteFiles: map[string]string{fmt.Sprintf("pkg%02d/new%d.go", task, task): "package pkg\n"}}}
		}
		if err := fakes.WriteScenario(agentDir, fakes.Scenario{Rules: rules}); err != nil {
			b.Fatal(err)
		}
		b.Setenv(fakes.AgentDirEnv, agentDir)
		b.Setenv("CURSOR_API_KEY", "bench-key")
		for _, k := range fakes.GitEnv {
			name, value, _ := strings.Cut(k, "=")
			b.Setenv(name, value)
		}
		for _, isolation := range []string{"shared", "worktree"} {
			b.Run(isolation, func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					// The repository back at its first commit, a fresh state
					// folder: every run does the same work.
					for _, args := range [][]string{{"reset", "-q", "--hard", head}, {"clean", "-q", "-fd"}} {
						if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
							b.Fatalf("git %v: %v\n%s", args, err, out)
						}
					}
					stateDir, err := os.MkdirTemp(dir, "state-")
					if err != nil {
						b.Fatal(err)
					}
					cfg, err := config.Load(config.Inputs{Env: []string{"PEAL_PLAN_PATH=" + planPath, "PEAL_REPO_PATH=" + repo,
						"PEAL_STATE_DIR=" + stateDir, "PEAL_AGENT_CMD=" + fakeAgent,
						"PEAL_STET_PATH=/nonexistent", "PEAL_MAX_PARALLEL=4", "PEAL_COMMIT_AFTER_PHASE2=true", "PEAL_PARALLEL_ISOLATION=" + isolation}})
					if err == nil {
						err = cfg.Validate()
					}
					if err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					out, err := Run(context.Background(), cfg, slog.New(slog.DiscardHandler), withoutLaunchGap())
					if err != nil || len(out.Completed) != 4 {
						b.Fatal(err, out)
					}
				}
			})
		}
	})
}
