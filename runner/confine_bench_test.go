package runner

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"peal/config"
	"peal/confine"
	"peal/internal/procs"
	"peal/internal/testkit/testbin"
	"peal/internal/testkit/testgit"
)

// BenchmarkConfinedRun measures what confinement costs a run, side by side
// with the same run under confine = off, alternately in one loop so that a
// machine busy with other work slows both alike, on tmpfs (or
// PEAL_BENCH_DIR):
//   - plan50: 50 sequential tasks of an agent that does nothing (100
//     calls), all a run does included: off-ms, on-ms, and the difference
//     per call (extra-ms/call); each run on a fresh state folder, so the
//     run's worktree is made every time;
//   - plan50-again: the same, on a state folder whose run's worktree an
//     earlier run left (what a re-run pays);
//   - wait6s: one task whose execute waits 6 s: the CPU peal spends,
//     confined (on-cpu-ms) and not (off-cpu-ms).
//
// The block of 4 on a large repository is BenchmarkLargeRepo20kFiles.
func BenchmarkConfinedRun(b *testing.B) {
	testbin.NoStet(b)
	if !confine.Probe().Files {
		b.Skip("this kernel does not confine files")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	procs.Limit() // as the peal binary runs
	dir := testbin.BenchDir(b, testbin.BenchTmpfs())
	repo := filepath.Join(dir, "repo")
	os.MkdirAll(repo, 0o755)
	testgit.Init(b, repo)
	os.WriteFile(filepath.Join(repo, "README.md"), []byte("hello\n"), 0o644)
	testgit.Git(b, repo, "add", "-A")
	testgit.Git(b, repo, "commit", "-q", "-m", "root")
	for _, k := range testgit.Env {
		name, value, _ := strings.Cut(k, "=")
		b.Setenv(name, value)
	}
	agent := filepath.Join(dir, "agent")
	// An agent that answers at once, but for an execute with WAIT set.
	os.WriteFile(agent, []byte("#!/bin/sh\ncase \"$*\" in *--plan*) echo the plan;; *) [ -n \"$BENCH_WAIT\" ] && sleep \"$BENCH_WAIT\";; esac\nexit 0\n"), 0o755)
	plan := func(n int) string {
		var p strings.Builder
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&p, "## Task %d\nDo thing %d.\n", i, i)
		}
		path := filepath.Join(dir, fmt.Sprintf("plan-%d.md", n))
		os.WriteFile(path, []byte(p.String()), 0o644)
		return path
	}
	n := 0
	cfgOf := func(b *testing.B, planPath, mode, stateDir string, extra ...string) *config.Config {
		if stateDir == "" {
			n++
			stateDir = filepath.Join(dir, fmt.Sprintf("state-%d", n))
		}
		planPath = planOf(b, planPath, stateDir)
		cfg, err := config.Load(config.Inputs{Env: append([]string{"PEAL_PLAN_PATH=" + planPath, "PEAL_REPO_PATH=" + repo,
			"PEAL_STATE_DIR=" + stateDir, "PEAL_AGENT_CMD=" + agent, "PEAL_CONFINE=" + mode,
			"PEAL_CONFINE_ENV_PASS=BENCH_WAIT"}, extra...)})
		if err == nil {
			err = cfg.Validate()
		}
		if err != nil {
			b.Fatal(err)
		}
		return cfg
	}
	exec := func(b *testing.B, cfg *config.Config, tasks int) (time.Duration, time.Duration) {
		start, cpu := time.Now(), selfCPU()
		out, err := Run(context.Background(), cfg, slog.New(slog.DiscardHandler))
		if err != nil || len(out.Completed) != tasks {
			b.Fatal(err, out)
		}
		return time.Since(start), selfCPU() - cpu
	}
	// side runs the plan of 50 tasks under off and on, side by side (again:
	// on a state folder whose tasks all run again); extra is the
	// configuration of the confined runs besides.
	side := func(again bool, extra ...string) func(b *testing.B) {
		return func(b *testing.B) {
			p := plan(50)
			states := map[string]string{}
			if again {
				for _, mode := range []string{"off", "on"} {
					states[mode] = filepath.Join(dir, "again-"+mode)
					exec(b, cfgOf(b, p, mode, states[mode]), 50)
					os.Remove(filepath.Join(states[mode], "state.json")) // every task runs again
				}
			}
			var wall [2]time.Duration
			runs := 0
			for b.Loop() {
				for i, mode := range []string{"off", "on"} {
					var more []string
					if mode == "on" {
						more = extra
					}
					cfg := cfgOf(b, p, mode, states[mode], more...)
					d, _ := exec(b, cfg, 50)
					wall[i] += d
					if again {
						os.Remove(filepath.Join(states[mode], "state.json"))
					}
				}
				runs++
			}
			off, on := wall[0].Seconds()*1000/float64(runs), wall[1].Seconds()*1000/float64(runs)
			b.ReportMetric(off, "off-ms")
			b.ReportMetric(on, "on-ms")
			b.ReportMetric((on-off)/100, "extra-ms/call")
		}
	}
	b.Run("plan50", side(false))
	b.Run("plan50-no-netns", side(false, "PEAL_CONFINE_NETWORK_NAMESPACE=false"))
	b.Run("plan50-again", side(true))
	b.Run("wait6s", func(b *testing.B) {
		p := plan(1)
		b.Setenv("BENCH_WAIT", "6")
		var cpu [2]time.Duration
		runs := 0
		for b.Loop() {
			for i, mode := range []string{"off", "on"} {
				_, c := exec(b, cfgOf(b, p, mode, ""), 1)
				cpu[i] += c
			}
			runs++
		}
		b.ReportMetric(cpu[0].Seconds()*1000/float64(runs), "off-cpu-ms")
		b.ReportMetric(cpu[1].Seconds()*1000/float64(runs), "on-cpu-ms")
	})
}

// planOf is a copy of the plan planPath for a run on the state folder
// stateDir: a plan's state stays where its first run kept it (the note in
// the repository says where), so a benchmark that starts a plan over on a
// fresh state folder gives each folder a plan of its own.
func planOf(b *testing.B, planPath, stateDir string) string {
	own := stateDir + ".plan.md"
	if _, err := os.Stat(own); err != nil {
		data, err := os.ReadFile(planPath)
		if err == nil {
			err = os.WriteFile(own, data, 0o644)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	return own
}
