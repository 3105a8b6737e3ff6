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

// BenchmarkBlock4TasksChecks: what the project's checks cost a parallel
// block of 4 instant tasks (each writes a file, committed, in a worktree of
// its own, merged back), with a check that takes checkSleep, against the
// same block without checks. A run pays the check once on the starting
// tree, once per task after its execute (in its worktree: the tasks' run
// side by side) and once per merge, one merge at a time: the merged
// checks are the cost that grows with the block.
func BenchmarkBlock4TasksChecks(b *testing.B) {
	testbin.NoStet(b)
	const checkSleep = 200 * time.Millisecond
	dir := b.TempDir()
	repo := filepath.Join(dir, "repo")
	os.MkdirAll(repo, 0o755)
	git := func(args ...string) string { return testgit.Git(b, repo, args...) }
	git("init", "-q")
	os.WriteFile(filepath.Join(repo, "base.txt"), []byte("base\n"), 0o644)
	git("add", "-A")
	git("commit", "-q", "-m", "root")
	head := git("rev-parse", "HEAD")
	planPath, agentDir := filepath.Join(dir, "plan.md"), filepath.Join(dir, "agent")
	os.MkdirAll(agentDir, 0o755)
	os.WriteFile(planPath, []byte(parallelPlan("pppp")), 0o644)
	rules := map[string][]fakes.Outcome{}
	for task := 1; task <= 4; task++ {
		rules[fmt.Sprintf("execute:%d", task)] = []fakes.Outcome{{WriteFiles: map[string]string{fmt.Sprintf("new%d.txt", task): "x\n"}}}
	}
	if err := fakes.WriteScenario(agentDir, fakes.Scenario{Rules: rules}); err != nil {
		b.Fatal(err)
	}
	b.Setenv(fakes.AgentDirEnv, agentDir)
	b.Setenv("CURSOR_API_KEY", "bench-key")
	for _, k := range testgit.Env {
		name, value, _ := strings.Cut(k, "=")
		b.Setenv(name, value)
	}
	for _, checks := range []string{"", fmt.Sprintf("sleep %.1f", checkSleep.Seconds())} {
		name := "no-checks"
		if checks != "" {
			name = "check-" + checkSleep.String()
		}
		b.Run(name, func(b *testing.B) {
			n := 0
			var checkRuns int
			for b.Loop() {
				b.StopTimer()
				git("reset", "-q", "--hard", head)
				git("clean", "-q", "-fd")
				stateDir, err := os.MkdirTemp(dir, "state-")
				if err != nil {
					b.Fatal(err)
				}
				env := []string{"PEAL_PLAN_PATH=" + planOf(b, planPath, stateDir), "PEAL_REPO_PATH=" + repo, "PEAL_STATE_DIR=" + stateDir, "PEAL_AGENT_CMD=" + fakeAgent,
					"PEAL_MAX_PARALLEL=4", "PEAL_CHECK_COMMANDS=" + checks}
				cfg, err := config.Load(config.Inputs{Env: env})
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
				b.StopTimer()
				checkRuns += countChecks(b, stateDir)
				b.StartTimer()
				n++
			}
			b.ReportMetric(float64(checkRuns)/float64(n), "check-runs")
		})
	}
}

// countChecks counts the check lines of the run record in stateDir.
func countChecks(b *testing.B, stateDir string) int {
	data, err := os.ReadFile(filepath.Join(stateDir, "run_record.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	return strings.Count(string(data), `"ev":"check"`)
}
