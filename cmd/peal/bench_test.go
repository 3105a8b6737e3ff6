package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"peal/internal/testkit/fakes"
)

// BenchmarkPeakRSS200MiB runs the peal binary on a task whose execute call
// prints 200 MiB and reports peal's peak resident set (target under 96 MiB):
// output past the 10 MiB capture is read and dropped, never buffered.
func BenchmarkPeakRSS200MiB(b *testing.B) {
	t := &testing.T{}
	s := newSandbox(t, "## Task 1\nA\n")
	s.t = t
	if err := fakes.WriteScenario(s.agentDir, fakes.Scenario{Rules: map[string][]fakes.Outcome{"execute": {{StdoutMiB: 200, NoStdout: true}}}}); err != nil {
		b.Fatal(err)
	}
	var peak int64
	for b.Loop() {
		cmd := exec.Command(bins["peal"], "run")
		cmd.Dir, cmd.Env = s.dir, s.env("PEAL_STATE_DIR="+b.TempDir(), "PEAL_LOG_LEVEL=error")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			b.Fatalf("%v: %s", err, stderr.String())
		}
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			peak = max(peak, ru.Maxrss) // KiB on Linux
		}
	}
	b.ReportMetric(float64(peak)/1024, "peak-RSS-MiB")
}

// benchRun runs `peal run` once in s with a fresh state folder, checks its
// exit code, and returns its wall time and the CPU time of peal and every
// process it waited for (the agent calls, git).
func benchRun(b *testing.B, s *sandbox, code int, env ...string) (wall, cpu time.Duration) {
	cmd := exec.Command(bins["peal"], "run")
	cmd.Dir, cmd.Env = s.dir, s.env(append([]string{"PEAL_STATE_DIR=" + b.TempDir(), "PEAL_LOG_LEVEL=error"}, env...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	cmd.Run()
	wall = time.Since(start)
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != code {
		b.Fatalf("peal: %v, want exit %d: %s", cmd.ProcessState, code, stderr.String())
	}
	return wall, cpuOf(cmd.ProcessState)
}

// benchBare runs the fake agent once as a bare exec with the given outcome,
// under an optional timeout (SIGTERM, as peal's), and returns its wall and
// CPU time: the baseline of the benchmarks below.
func benchBare(b *testing.B, out fakes.Outcome, timeout time.Duration) (wall, cpu time.Duration) {
	dir := b.TempDir()
	if err := fakes.WriteScenario(dir, fakes.Scenario{Default: out}); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bins["fakeagent"], "-p")
	cmd.Env = []string{"FAKE_AGENT_DIR=" + dir, "PEAL_PHASE=plan", "PEAL_TASK_INDEX=1"}
	cmd.Stdin = strings.NewReader("the prompt")
	start := time.Now()
	cmd.Start()
	if timeout > 0 {
		t := time.AfterFunc(timeout, func() { cmd.Process.Signal(syscall.SIGTERM) })
		defer t.Stop()
	}
	cmd.Wait()
	return time.Since(start), cpuOf(cmd.ProcessState)
}

func cpuOf(ps *os.ProcessState) time.Duration { return ps.UserTime() + ps.SystemTime() }

// BenchmarkRunTimeout1s: `peal run` of one task whose plan call hangs
// (it exits on SIGTERM) under a 1 s phase timeout and no retry, from start
// to exit, confine = off and auto side by side, against the same hanging
// agent as a bare exec stopped after 1 s. Each run is the first on a
// repository of its own (the state of a plan stays where its first run
// kept it). Target: the run returns within 1.02 s unconfined, 1.05 s
// confined.
func BenchmarkRunTimeout1s(b *testing.B) {
	for _, mode := range []string{"off", "auto"} {
		b.Run(mode, func(b *testing.B) {
			hang := fakes.Outcome{Hang: true}
			var peal, bare time.Duration
			for b.Loop() {
				t := &testing.T{}
				s := newSandbox(t, "## Task 1\nA\n")
				s.t = t
				s.scenario(map[string][]fakes.Outcome{"plan": {hang}})
				w, _ := benchRun(b, s, 1, "PEAL_PHASE_TIMEOUT_SEC=1", "PEAL_PHASE_RETRY_COUNT=0", "PEAL_CONFINE="+mode)
				peal += w
				os.RemoveAll(s.dir)
				w, _ = benchBare(b, hang, time.Second)
				bare += w
			}
			b.ReportMetric(peal.Seconds()/float64(b.N), "s/run")
			b.ReportMetric(bare.Seconds()/float64(b.N), "bare-s/run")
		})
	}
}

// BenchmarkRunWait6sCPU: the CPU time of `peal run` of one task whose plan
// call sleeps 6 s, start-up and the execute call included, against the same
// two agent calls as bare execs; with commit_after_phase2 (commit) peal
// also runs git to commit what the execute call wrote. Target: peal's share
// (the difference) under 40 ms.
func BenchmarkRunWait6sCPU(b *testing.B) {
	for _, tc := range []struct {
		name string
		env  []string
	}{{"no-git", nil}, {"commit", []string{"PEAL_COMMIT_AFTER_PHASE2=true", "GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@example.com", "GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@example.com"}}} {
		b.Run(tc.name, func(b *testing.B) {
			t := &testing.T{}
			s := newSandbox(t, "## Task 1\nA\n")
			s.t = t
			sleep, done := fakes.Outcome{SleepMS: 6000, Stdout: "the plan\n"}, fakes.Outcome{Stdout: "done\n"}
			n := 0
			var peal, bare time.Duration
			for b.Loop() {
				n++
				write := done
				write.WriteFiles = map[string]string{filepath.Join(s.repo, fmt.Sprintf("f%d.txt", n)): "x"}
				s.scenario(map[string][]fakes.Outcome{"plan": {sleep}, "execute": {write}})
				_, c := benchRun(b, s, 0, tc.env...)
				peal += c
				_, c1 := benchBare(b, sleep, 0)
				_, c2 := benchBare(b, done, 0)
				bare += c1 + c2
			}
			b.ReportMetric(float64(peal.Microseconds())/1000/float64(b.N), "cpu-ms/run")
			b.ReportMetric(float64(bare.Microseconds())/1000/float64(b.N), "bare-cpu-ms/run")
		})
	}
}

// BenchmarkGuard: what peal's guard costs a run (it starts once per peal
// process): one exec of the peal binary as the guard, which reads its pipe
// to the end and, peal having ended with no call under way, exits. Compare
// with BenchmarkRunWait6sCPU, which does not count it (peal does not wait
// for its guard).
func BenchmarkGuard(b *testing.B) {
	var cpu time.Duration
	for b.Loop() {
		cmd := exec.Command(bins["peal"])
		cmd.Env = []string{"PEAL_GUARD_OF=1"}
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			b.Fatalf("%v: %s", err, out)
		}
		cpu += cpuOf(cmd.ProcessState)
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/run")
}
