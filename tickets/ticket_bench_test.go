package tickets

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// BenchmarkTicketLifecycle is one task's ticket work in a run, on tmpfs
// when /dev/shm exists: open and lock, begin an attempt, write the close
// summary, read its verdict back, complete the attempt, close.
func BenchmarkTicketLifecycle(b *testing.B) {
	base := "/dev/shm"
	if _, err := os.Stat(base); err != nil {
		base = b.TempDir()
	}
	dir, err := os.MkdirTemp(base, "peal-ticket-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	n := 0
	for b.Loop() {
		n++
		t, err := openTicketIn(dir, fmt.Sprintf("task-%d", n), now, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := t.Begin(now, nil); err != nil {
			b.Fatal(err)
		}
		if err := t.WriteCloseSummary(false, Counts{}); err != nil {
			b.Fatal(err)
		}
		if _, err := t.CloseStatus(); err != nil {
			b.Fatal(err)
		}
		if err := t.Complete(now, AttemptClosed, &QualityGate{}); err != nil {
			b.Fatal(err)
		}
		t.Close()
	}
}
