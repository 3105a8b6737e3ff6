//go:build unix

package main

import (
	"errors"

	"golang.org/x/sys/unix"
)

// processAlive reports whether a process with this id exists (one of
// another user's counts too).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
