package main

import (
	"bytes"
	"os/exec"
	"syscall"
	"testing"

	"peal/internal/fakes"
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
