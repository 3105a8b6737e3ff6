//go:build unix

package safefs

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// nonblock keeps the opening of a named pipe from waiting for a writer. Every
// open of the package passes it: on a regular file or a folder it changes
// nothing, and a descriptor opened with it spares Go's runtime switching it
// to non-blocking and back (four fcntl calls per open).
const nonblock = unix.O_NONBLOCK

// tryLock takes an exclusive flock on f without waiting. flock belongs to the
// open file description, so the kernel drops it when the process dies, and a
// second open of the same file, even in this process, is refused too. A
// flock that does not wait is never interrupted by a signal (EINTR).
func tryLock(f *os.File) (held bool, err error) {
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

// unlock releases the flock of f's open file description, wherever else
// that description is shared.
func unlock(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_UN) }
