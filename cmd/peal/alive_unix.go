//go:build unix

package main

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// processAlive reports whether a process with this id exists (one of
// another user's counts too) and is not a zombie: a run killed a moment ago
// stays in the process table until its parent reaps it, yet runs no more.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := unix.Kill(pid, 0); err != nil && !errors.Is(err, unix.EPERM) {
		return false
	}
	if runtime.GOOS == "linux" {
		status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		return err != nil || !bytes.Contains(status, []byte("\nState:\tZ"))
	}
	return true
}
