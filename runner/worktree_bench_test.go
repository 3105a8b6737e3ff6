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
	return generatedRepo(b, parent, benchFiles, 100)
}

// generatedRepo makes a repository of files small files spread over folders
// folders (pkg00, pkg01, … or pkg000, … from 100 folders on), one commit,
// under parent; it returns its path and head.
func generatedRepo(b *testing.B, parent string, files, folders int) (string, string) {
	b.Helper()
	repo := filepath.Join(parent, "repo")
	for i := range files {
		dir := filepath.Join(repo, pkgName(i%folders, folders))
		if i < folders {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file%05d.go", i)), []byte(fmt.Sprintf("package pkg\n\nconst C%d = %d\n", i, i)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	git := benchGit(b, repo)
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "root")
	// Packed, as a clone is: 10 000 loose objects (a tree just added)
	// would make every checkout open and inflate 10 000 files.
	git("repack", "-a", "-d", "-q")
	return repo, git("rev-parse", "HEAD")
}

// benchGit runs git in repo for a benchmark's set-up and returns its
// output; a failure ends the benchmark.
func benchGit(b *testing.B, repo string) func(args ...string) string {
	return func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
		cmd.Env = append(os.Environ(), fakes.GitEnv...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
}

// pkgName is the name of folder i of a generated repository of folders
// folders.
func pkgName(i, folders int) string {
	if folders > 100 {
		return fmt.Sprintf("pkg%03d", i)
	}
	return fmt.Sprintf("pkg%02d", i)
}

// dropTree removes the worktree of tt and its branch, as a block does once
// its task is merged.
func dropTree(b *testing.B, ts *trees, tt *taskTree) {
	if err := ts.remove(context.Background(), tt); err != nil {
		b.Fatal(err)
	}
	if err := ts.deleteBranch(context.Background(), tt.branch); err != nil {
		b.Fatal(err)
	}
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
			dropTree(b, ts, tt)
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
				dropTree(b, ts, tt)
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
		bench := newBlockBench(b, dir, repo, head, 100)
		for _, isolation := range []string{"shared", "worktree"} {
			b.Run(isolation, func(b *testing.B) { bench.run(b, "PEAL_PARALLEL_ISOLATION="+isolation) })
		}
	})
}

// blockBench runs a block of 4 instant tasks on a generated repository: task
// N writes a file in folder N.
type blockBench struct {
	dir, repo, head, planPath, agentDir string
	agent                               string // the fake agent as the run calls it
}

// newBlockBench writes the plan and the fake agent's scenario of the block
// in dir, for repo (folders folders) at head.
func newBlockBench(b *testing.B, dir, repo, head string, folders int) *blockBench {
	bb := &blockBench{dir: dir, repo: repo, head: head, planPath: filepath.Join(dir, "plan.md"), agentDir: filepath.Join(dir, "agent"), agent: fakeAgent}
	os.MkdirAll(bb.agentDir, 0o755)
	os.WriteFile(bb.planPath, []byte(parallelPlan("pppp")), 0o644)
	bb.scenario(b, folders, nil)
	b.Setenv(fakes.AgentDirEnv, bb.agentDir)
	b.Setenv("CURSOR_API_KEY", "bench-key")
	for _, k := range fakes.GitEnv {
		name, value, _ := strings.Cut(k, "=")
		b.Setenv(name, value)
	}
	return bb
}

// scenario has task N write a file in folder N, after the commands of
// first(N) when it is set (run by the fake under the Cursor CLI's name, as
// a CLI runs a tool).
func (bb *blockBench) scenario(b *testing.B, folders int, first func(task int) []string) {
	bb.agent = fakeAgent
	if first != nil {
		bb.agent = filepath.Join(bb.dir, "agent-bin", "agent")
		os.MkdirAll(filepath.Dir(bb.agent), 0o755)
		if _, err := os.Lstat(bb.agent); err != nil {
			if err := os.Symlink(fakeAgent, bb.agent); err != nil {
				b.Fatal(err)
			}
		}
	}
	rules := map[string][]fakes.Outcome{}
	for task := 1; task <= 4; task++ {
		out := fakes.Outcome{WriteFiles: map[string]string{fmt.Sprintf("%s/new%d.go", pkgName(task, folders), task): "package pkg\n"}}
		if first != nil {
			out.Commands = [][]string{first(task)}
		}
		rules[fmt.Sprintf("execute:%d", task)] = []fakes.Outcome{out}
	}
	if err := fakes.WriteScenario(bb.agentDir, fakes.Scenario{Rules: rules}); err != nil {
		b.Fatal(err)
	}
}

// prepare readies a run of the block from the repository's first commit
// and a fresh state folder, with env on top of the block's configuration.
func (bb *blockBench) prepare(b *testing.B, env ...string) *config.Config {
	for _, args := range [][]string{{"reset", "-q", "--hard", bb.head}, {"clean", "-q", "-fd"}} {
		if out, err := exec.Command("git", append([]string{"-C", bb.repo}, args...)...).CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	stateDir, err := os.MkdirTemp(bb.dir, "state-")
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := config.Load(config.Inputs{Env: append([]string{"PEAL_PLAN_PATH=" + bb.planPath, "PEAL_REPO_PATH=" + bb.repo,
		"PEAL_STATE_DIR=" + stateDir, "PEAL_AGENT_CMD=" + bb.agent,
		"PEAL_STET_PATH=/nonexistent", "PEAL_MAX_PARALLEL=4", "PEAL_COMMIT_AFTER_PHASE2=true"}, env...)})
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}

// exec runs the block of cfg; every task completes.
func (bb *blockBench) exec(b *testing.B, cfg *config.Config) {
	out, err := Run(context.Background(), cfg, slog.New(slog.DiscardHandler), withoutLaunchGap())
	if err != nil || len(out.Completed) != 4 {
		b.Fatal(err, out)
	}
}

// run times the block, each run from the first commit, and reports its
// wall time in block-ms.
func (bb *blockBench) run(b *testing.B, env ...string) {
	var total time.Duration
	n := 0
	for b.Loop() {
		b.StopTimer()
		cfg := bb.prepare(b, env...)
		b.StartTimer()
		start := time.Now()
		bb.exec(b, cfg)
		total += time.Since(start)
		n++
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(n), "block-ms")
}

// The repository of BenchmarkLargeRepo20kFiles: 20 000 files in 200
// folders.
const largeFiles, largeFolders = 20000, 200

// BenchmarkLargeRepo20kFiles: what a parallel block costs on a repository
// of 20 000 files in 200 folders, side by side in one run, on disk and on
// tmpfs. Each sub-benchmark measures its two cases alternately, in the
// same loop, so that a machine busy with other work slows both alike:
//
//   - block4: a block of 4 instant tasks (each writes a file, its work
//     committed and merged) with full worktrees (full-ms) and with a sparse
//     set of 20 of the 200 folders, 10% (sparse-ms); the target is
//     sparse/full ≤ 0.3. Before the timed runs each task counts the files
//     its worktree holds (full-files, sparse-files).
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
	benchPlaces(b, func(b *testing.B, dir string) {
		repo, head := generatedRepo(b, dir, largeFiles, largeFolders)
		caller := phase.Caller{Dir: repo, Limits: phase.Limits{Timeout: time.Minute, KillGrace: time.Second}, Env: fakes.GitEnv}
		git := review.NewGit(caller, slog.New(slog.DiscardHandler), 10*time.Minute, repo)
		ctx := context.Background()
		var set []string
		for i := range largeFolders / 10 {
			set = append(set, pkgName(i, largeFolders))
		}
		sparse := "PEAL_WORKTREE_SPARSE_PATHS=" + strings.Join(set, ",")

		b.Run("add", func(b *testing.B) {
			ts := newTrees(filepath.Join(dir, "state-add"), git, repo)
			var pealTime, gitTime, sizeTime time.Duration
			n := 0
			for b.Loop() {
				start := time.Now()
				tt, err := ts.add(ctx, 1, head)
				if err != nil {
					b.Fatal(err)
				}
				pealTime += time.Since(start)
				b.StopTimer()
				dropTree(b, ts, tt)
				path := filepath.Join(dir, "plain")
				b.StartTimer()
				start = time.Now()
				if out, err := exec.Command("git", "-C", repo, "worktree", "add", "-q", "-b", "plain", path, head).CombinedOutput(); err != nil {
					b.Fatalf("git worktree add: %v\n%s", err, out)
				}
				gitTime += time.Since(start)
				b.StopTimer()
				for _, args := range [][]string{{"worktree", "remove", "--force", path}, {"branch", "-q", "-D", "plain"}} {
					if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
						b.Fatalf("git %v: %v\n%s", args, err, out)
					}
				}
				start = time.Now()
				if _, err := ts.size(ctx, head, 4096); err != nil {
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

		b.Run("block4", func(b *testing.B) {
			bench := newBlockBench(b, dir, repo, head, largeFolders)
			// Each task counts the files its worktree holds, once, before
			// the timed runs.
			counts := filepath.Join(dir, "counts")
			os.MkdirAll(counts, 0o755)
			bench.scenario(b, largeFolders, func(task int) []string {
				return []string{"sh", "-c", fmt.Sprintf("find . -path ./.git -prune -o -type f -print | wc -l > %s/%d", counts, task)}
			})
			held := map[string]int{}
			for _, c := range []struct {
				env    []string
				metric string
				want   int
			}{{nil, "full-files", largeFiles}, {[]string{sparse}, "sparse-files", largeFiles / 10}} {
				bench.exec(b, bench.prepare(b, c.env...))
				for task := 1; task <= 4; task++ {
					data, err := os.ReadFile(filepath.Join(counts, fmt.Sprint(task)))
					if got := strings.TrimSpace(string(data)); err != nil || got != fmt.Sprint(c.want) {
						b.Fatalf("%s: task %d's worktree held %q files (%v), want %d", c.metric, task, got, err, c.want)
					}
				}
				held[c.metric] = c.want
			}
			bench.scenario(b, largeFolders, nil)
			var full, part time.Duration
			n := 0
			for b.Loop() {
				b.StopTimer()
				cfg := bench.prepare(b)
				b.StartTimer()
				start := time.Now()
				bench.exec(b, cfg)
				full += time.Since(start)
				b.StopTimer()
				cfg = bench.prepare(b, sparse)
				b.StartTimer()
				start = time.Now()
				bench.exec(b, cfg)
				part += time.Since(start)
				n++
			}
			b.ReportMetric(float64(full.Milliseconds())/float64(n), "full-ms")
			b.ReportMetric(float64(part.Milliseconds())/float64(n), "sparse-ms")
			b.ReportMetric(part.Seconds()/full.Seconds(), "sparse/full")
			for metric, n := range held {
				b.ReportMetric(float64(n), metric)
			}
		})

		b.Run("deps", func(b *testing.B) {
			// A work tree of a few files whose node_modules, ignored, holds
			// 20 000 files in 200 folders.
			work := filepath.Join(dir, "deps")
			deps, _ := generatedRepo(b, work, 1, 1)
			for i := range largeFiles {
				d := filepath.Join(deps, "node_modules", pkgName(i%largeFolders, largeFolders))
				if i < largeFolders {
					os.MkdirAll(d, 0o755)
				}
				if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d.js", i)), []byte("module.exports = 1\n"), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			os.WriteFile(filepath.Join(deps, ".git", "info", "exclude"), []byte("node_modules/\n"), 0o644)
			link := &run{cfg: &config.Config{RepoPath: deps, WorktreeLink: []string{"node_modules"}}, log: slog.New(slog.DiscardHandler)}
			copied := &run{cfg: &config.Config{RepoPath: deps, WorktreeCopy: []string{"node_modules"}}, log: slog.New(slog.DiscardHandler)}
			depsCaller := caller
			depsCaller.Dir = deps
			link.git = review.NewGit(depsCaller, slog.New(slog.DiscardHandler), time.Minute, deps)
			link.trees = newTrees(filepath.Join(work, "state"), link.git, deps)
			var linkTime, copyTime, blockTime time.Duration
			n := 0
			for b.Loop() {
				for _, c := range []struct {
					r    *run
					took *time.Duration
				}{{link, &linkTime}, {copied, &copyTime}} {
					b.StopTimer()
					tt := &taskTree{task: 1, dir: filepath.Join(work, "task")}
					if err := os.MkdirAll(tt.dir, 0o755); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					start := time.Now()
					if err := c.r.prepareTree(ctx, tt); err != nil {
						b.Fatal(err)
					}
					*c.took += time.Since(start)
					b.StopTimer()
					os.RemoveAll(tt.dir)
					b.StartTimer()
				}
				start := time.Now()
				if err := link.checkLinks(ctx); err != nil {
					b.Fatal(err)
				}
				if err := link.trees.exclude(ctx, link.cfg.WorktreeLink); err != nil {
					b.Fatal(err)
				}
				link.endLinks(ctx)
				blockTime += time.Since(start)
				n++
			}
			b.ReportMetric(float64(linkTime.Microseconds())/1000/float64(n), "link-ms")
			b.ReportMetric(float64(copyTime.Microseconds())/1000/float64(n), "copy-ms")
			b.ReportMetric(float64(blockTime.Microseconds())/1000/float64(n), "link-block-ms")
			if _, err := os.Stat(filepath.Join(deps, "node_modules", pkgName(0, largeFolders), "f00000.js")); err != nil {
				b.Fatalf("the linked folder lost its files: %v", err)
			}
		})
	})
}
