//go:build unix

package procs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Alive reports whether a process with this id exists (one of another
// user's counts too) and is not a zombie: a process killed a moment ago
// stays in the process table until its parent reaps it, yet runs no more,
// and PID 1 of a container may never reap it.
func Alive(pid int) bool {
	if pid <= 0 || errors.Is(unix.Kill(pid, 0), unix.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err != nil {
		// Without /proc (not Linux) the signal probe is all there is.
		return true
	}
	return !statDead(stat)
}

// statDead reports whether a /proc/<pid>/stat line shows a zombie or a dead
// process. The command name may hold spaces and parentheses: the state is
// the field after the last ')'.
func statDead(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	switch stat[i+2] {
	case 'Z', 'X', 'x':
		return true
	}
	return false
}

// Kill sends SIGKILL to the process named, if it still has an id here;
// never to a process group or to every process, as a zero or negative
// id would.
func (id ID) Kill() {
	if pid := id.Host(); pid > 0 {
		unix.Kill(pid, unix.SIGKILL)
	}
}
