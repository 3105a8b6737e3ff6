//go:build unix

package fakes

import (
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
