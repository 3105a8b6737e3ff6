package agentlog

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"peal/phase"
)

// Two runs that started in the same second: the second never overwrites the
// first one's file, and says that it cannot log.
func TestSameSecond(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	start := time.Date(2026, 3, 15, 10, 15, 2, 0, time.UTC)
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	first, second := New(dir, start, logger).Call("execute", 2), New(dir, start, logger).Call("execute", 2)
	var spec1, spec2 phase.Spec
	first.Attach(&spec1, 1)
	second.Attach(&spec2, 1)
	spec1.StdoutSink.Write([]byte("first run"))
	defer first.Close()
	defer second.Close()
	if spec2.StdoutSink != nil || spec2.StderrSink != nil || !strings.Contains(log.String(), "agent log file cannot be created") {
		t.Fatalf("second run got sinks %v %v; log:\n%s", spec2.StdoutSink, spec2.StderrSink, log.String())
	}
	data, err := os.ReadFile(filepath.Join(dir, "20260315T101502Z-task-2-execute-call-1-attempt-1.stdout.log"))
	if err != nil || string(data) != "first run" {
		t.Fatalf("first run's file: %q, %v", data, err)
	}
}
