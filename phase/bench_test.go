package phase

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"peal/internal/testkit/fakes"
)

// noop is the no-op binary of the overhead benchmarks.
func noop(b *testing.B) string {
	p, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no `true` binary on PATH")
	}
	return p
}

// BenchmarkBareExec100 is the baseline: 100 plain execs of a no-op binary.
func BenchmarkBareExec100(b *testing.B) {
	bin := noop(b)
	before := cpuTime()
	for b.Loop() {
		for range 100 {
			if err := exec.Command(bin).Run(); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportCPU(b, before)
}

// reportCPU reports this process's CPU time per op since before: on a busy
// machine it varies less than the wall time.
func reportCPU(b *testing.B, before time.Duration) {
	b.ReportMetric(float64((cpuTime()-before).Microseconds())/1000/float64(b.N), "self-cpu-ms/op")
}

// BenchmarkRun100 is 100 supervised calls of the same binary: own process
// group, pipes drained, timers armed, group cleanup. Compare with
// BenchmarkBareExec100 (the target is at most 3x, ideally 1.5x).
func BenchmarkRun100(b *testing.B) {
	bin := noop(b)
	spec := Spec{Phase: "plan", Argv: []string{bin}, Timeout: time.Minute, IdleTimeout: time.Minute, KillGrace: 5 * time.Second}
	before := cpuTime()
	for b.Loop() {
		for range 100 {
			res, err := Run(context.Background(), spec)
			if err != nil || res.ExitCode != 0 {
				b.Fatal(err, res.ExitCode)
			}
		}
	}
	reportCPU(b, before)
}

// BenchmarkTimeout1s: a 1 s timeout on a child that exits on SIGTERM; the
// call must return right after the timeout (target 1.05 s per op).
func BenchmarkTimeout1s(b *testing.B) {
	dir := setup(b, fakes.Outcome{Hang: true})
	spec := agentSpec(dir, time.Second, 5*time.Second)
	for b.Loop() {
		res, err := Run(context.Background(), spec)
		if err != nil || !res.TimedOut {
			b.Fatal(err, res.TimedOut)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/call")
}

// BenchmarkWait6sCPU: CPU time this process spends while a call sleeps 6 s
// (target under 150 ms): waiting must not poll.
func BenchmarkWait6sCPU(b *testing.B) {
	dir := setup(b, fakes.Outcome{SleepMS: 6000})
	spec := agentSpec(dir, time.Minute, 5*time.Second)
	var total time.Duration
	for b.Loop() {
		before := cpuTime()
		res, err := Run(context.Background(), spec)
		total += cpuTime() - before
		if err != nil || res.ExitCode != 0 {
			b.Fatal(err, res.ExitCode)
		}
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "cpu-ms/call")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
