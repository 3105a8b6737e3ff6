package runner

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"peal/config"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testbin"
	"peal/internal/testkit/testgit"
)

// benchFiles is the size of the repository of the block benchmarks.
const benchFiles = 10000

// BenchmarkBlock4Tasks10kFiles: a block of 4 instant tasks (each writes one
// file; its work committed) on a repository of 10 000 files, in worktrees
// of their own merged back, against the shared work tree.
func BenchmarkBlock4Tasks10kFiles(b *testing.B) {
	testbin.NoStet(b)
	testbin.BenchPlaces(b, func(b *testing.B, dir string) {
		repo, head := testgit.GeneratedRepo(b, dir, benchFiles, 100)
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
	for _, k := range testgit.Env {
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
		out := fakes.Outcome{WriteFiles: map[string]string{fmt.Sprintf("%s/new%d.go", testgit.PkgName(task, folders), task): "package pkg\n"}}
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
	testgit.Git(b, bb.repo, "reset", "-q", "--hard", bb.head)
	testgit.Git(b, bb.repo, "clean", "-q", "-fd")
	stateDir, err := os.MkdirTemp(bb.dir, "state-")
	if err != nil {
		b.Fatal(err)
	}
	// Confined as a user's run is (confine = auto), unless env says
	// otherwise; the fake agent keeps its variables and writes its record.
	cfg, err := config.Load(config.Inputs{Env: append([]string{"PEAL_PLAN_PATH=" + planOf(b, bb.planPath, stateDir), "PEAL_REPO_PATH=" + bb.repo,
		"PEAL_STATE_DIR=" + stateDir, "PEAL_AGENT_CMD=" + bb.agent,
		"PEAL_MAX_PARALLEL=4", "PEAL_COMMIT_AFTER_PHASE2=true",
		"PEAL_CONFINE_ENV_PASS=FAKE_*", "PEAL_CONFINE_WRITE_PATHS=" + bb.agentDir + "," + filepath.Join(bb.dir, "counts")}, env...)})
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

// BenchmarkLargeRepo20kFiles: a block of 4 instant tasks (each writes a
// file, its work committed and merged) on a repository of 20 000 files in
// 200 folders, on disk and on tmpfs, with full worktrees (full-ms) and with
// a sparse set of 20 of the 200 folders, 10% (sparse-ms), confined as a
// user's run is (confine = auto) and under confine = off (off-full-ms,
// off-sparse-ms; full-on/off and sparse-on/off the ratios), measured
// alternately in the same loop so that a machine busy with other work
// slows all alike. Before the timed runs each task counts the files its
// worktree holds (full-files, sparse-files). The worktrees' own costs
// (linked against copied dependencies, peal's worktree against git's) are
// worktree's BenchmarkLargeRepo20kFiles.
func BenchmarkLargeRepo20kFiles(b *testing.B) {
	testbin.NoStet(b)
	testbin.BenchPlaces(b, func(b *testing.B, dir string) {
		repo, head := testgit.GeneratedRepo(b, dir, largeFiles, largeFolders)
		var set []string
		for i := range largeFolders / 10 {
			set = append(set, testgit.PkgName(i, largeFolders))
		}
		sparse := "PEAL_WORKTREE_SPARSE_PATHS=" + strings.Join(set, ",")
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
			var took [4]time.Duration // full, sparse, off full, off sparse
			n := 0
			for b.Loop() {
				for i, env := range [][]string{nil, {sparse}, {"PEAL_CONFINE=off"}, {"PEAL_CONFINE=off", sparse}} {
					b.StopTimer()
					cfg := bench.prepare(b, env...)
					b.StartTimer()
					start := time.Now()
					bench.exec(b, cfg)
					took[i] += time.Since(start)
				}
				n++
			}
			ms := func(d time.Duration) float64 { return float64(d.Milliseconds()) / float64(n) }
			b.ReportMetric(ms(took[0]), "full-ms")
			b.ReportMetric(ms(took[1]), "sparse-ms")
			b.ReportMetric(ms(took[2]), "off-full-ms")
			b.ReportMetric(ms(took[3]), "off-sparse-ms")
			b.ReportMetric(took[1].Seconds()/took[0].Seconds(), "sparse/full")
			b.ReportMetric(took[0].Seconds()/took[2].Seconds(), "full-on/off")
			b.ReportMetric(took[1].Seconds()/took[3].Seconds(), "sparse-on/off")
			for metric, n := range held {
				b.ReportMetric(float64(n), metric)
			}
		})

	})
}
