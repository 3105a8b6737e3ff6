//go:build unix

package fakes

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// lock waits for a flock on f: exclusive for a writer, shared for a reader.
func lock(f *os.File, exclusive bool) error {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	return unix.Flock(int(f.Fd()), how)
}

// exists probes pid with signal 0: false only when no such process exists.
func exists(pid int) bool {
	return !errors.Is(unix.Kill(pid, 0), unix.ESRCH)
}
