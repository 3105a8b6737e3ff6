//go:build unix

package safefs

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// nonblock keeps the opening of a named pipe from waiting for a writer.
const nonblock = unix.O_NONBLOCK

// tryLock takes an exclusive flock on f without waiting. flock belongs to the
// open file description, so the kernel drops it when the process dies, and a
// second open of the same file, even in this process, is refused too.
func tryLock(f *os.File) (held bool, err error) {
	conn, err := f.SyscallConn()
	if err != nil {
		return false, err
	}
	var lockErr error
	err = conn.Control(func(fd uintptr) {
		for {
			lockErr = unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB)
			if !errors.Is(lockErr, unix.EINTR) {
				return
			}
		}
	})
	if err != nil {
		return false, err
	}
	if errors.Is(lockErr, unix.EWOULDBLOCK) {
		return false, nil
	}
	return lockErr == nil, lockErr
}

// unlock releases the flock of f's open file description, wherever else
// that description is shared.
func unlock(f *os.File) error {
	conn, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var uerr error
	err = conn.Control(func(fd uintptr) {
		for {
			uerr = unix.Flock(int(fd), unix.LOCK_UN)
			if !errors.Is(uerr, unix.EINTR) {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	return uerr
}
