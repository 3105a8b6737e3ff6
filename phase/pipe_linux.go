//go:build linux

package phase

import (
	"os"

	"golang.org/x/sys/unix"
)

// pipe makes a pipe between peal and a child. peal's end is non-blocking
// and read or written through Go's poller, so that closing it ends a read or
// write under way; the child's end stays a plain blocking descriptor. (An
// os.Pipe registers both ends with the poller and exec then switches the
// child's back: about ten system calls per call for nothing.) pealReads
// tells which end is peal's: the read end for output, the write end for
// standard input.
func pipe(pealReads bool) (peal, child *os.File, err error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	mine, theirs := fds[0], fds[1]
	if !pealReads {
		mine, theirs = theirs, mine
	}
	if err := unix.SetNonblock(mine, true); err != nil {
		unix.Close(mine)
		unix.Close(theirs)
		return nil, nil, os.NewSyscallError("fcntl", err)
	}
	return os.NewFile(uintptr(mine), "|0"), os.NewFile(uintptr(theirs), "|1"), nil
}
