//go:build unix

package check

import (
	"io"
	"log/slog"
	"syscall"
	"testing"

	"peal/internal/procs"
)

func testLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// processAlive: a process killed and not yet reaped is not alive.
func processAlive(pid int) bool { return procs.Alive(pid) }

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
}
