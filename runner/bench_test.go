package runner

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"peal/config"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
)

// BenchmarkParallelMakespan measures the makespan of a block of 8 tasks on 4
// slots where task 1's execute takes 4 units and the others 1 unit. A
// work-conserving pool needs max(longest, total work / slots) = max(4, 11/4)
// = 4 units; Peal's fixed chunks of 4 need 4 + 1 = 5.
func BenchmarkParallelMakespan(b *testing.B) {
	const unit = 500 * time.Millisecond
	const tasks, slots = 8, 4
	rules := map[string][]fakes.Outcome{"execute": {{SleepMS: int(unit / time.Millisecond)}}}
	rules["execute:1"] = []fakes.Outcome{{SleepMS: int(4 * unit / time.Millisecond)}}

	var total time.Duration
	runs := 0
	for b.Loop() {
		b.StopTimer()
		cfg := benchRun(b, parallelPlan("pppppppp"), rules, fmt.Sprintf("PEAL_MAX_PARALLEL=%d", slots))
		b.StartTimer()
		start := time.Now()
		if _, err := Run(context.Background(), cfg, slog.New(slog.DiscardHandler)); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		runs++
	}
	longest, work := 4.0, 4.0+float64(tasks-1)
	b.ReportMetric(total.Seconds()/float64(runs)/unit.Seconds(), "units/op")
	b.ReportMetric(max(longest, work/slots), "ideal-units")
}

// benchRun prepares a fresh repository, plan and fake agent scenario for one
// iteration (the harness needs a *testing.T) and returns the run's config.
func benchRun(b *testing.B, plan string, rules map[string][]fakes.Outcome, env ...string) *config.Config {
	b.Helper()
	tmp := b.TempDir()
	repo, planPath, agentDir := filepath.Join(tmp, "repo"), filepath.Join(tmp, "plan.md"), filepath.Join(tmp, "agent")
	for _, d := range []string{repo, agentDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	testgit.Git(b, repo, "init", "-q")
	if err := os.WriteFile(planPath, []byte(plan), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := fakes.WriteScenario(agentDir, fakes.Scenario{Rules: rules}); err != nil {
		b.Fatal(err)
	}
	b.Setenv(fakes.AgentDirEnv, agentDir)
	b.Setenv("CURSOR_API_KEY", "bench-key")
	base := []string{"PEAL_PLAN_PATH=" + planPath, "PEAL_REPO_PATH=" + repo, "PEAL_STATE_DIR=" + filepath.Join(tmp, "state"),
		"PEAL_AGENT_CMD=" + fakeAgent, "PEAL_PHASE_TIMEOUT_SEC=60"}
	cfg, err := config.Load(config.Inputs{Env: append(base, env...)})
	if err != nil {
		b.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	return cfg
}
