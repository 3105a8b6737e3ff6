package phase

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// sysPidfdOpen is pidfd_open(2), the same number on every Linux architecture.
const sysPidfdOpen = 434

// waitGroupGone waits, at most limit, until no process of group pgid is left
// (zombies count as gone): the signals have been sent, and a call returns only
// once what it started is really dead. It finds the members in /proc and waits
// on a pidfd of each, so the wait itself costs nothing.
func waitGroupGone(pgid int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for _, pid := range groupMembers(pgid) {
		waitExit(pid, time.Until(deadline))
	}
}

// groupMembers lists the live processes whose process group is pgid.
func groupMembers(pgid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name may hold spaces and parentheses: the fields
		// after the last ')' are state, ppid, pgrp.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(stat[i+1:])
		if len(f) < 3 || bytes.Equal(f[0], []byte("Z")) || bytes.Equal(f[0], []byte("X")) {
			continue
		}
		if g, err := strconv.Atoi(string(f[2])); err == nil && g == pgid {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitExit blocks until process pid exits or d passes.
func waitExit(pid int, d time.Duration) {
	if d <= 0 {
		return
	}
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if errno != 0 {
		return // gone already, or no pidfd support: nothing to wait on
	}
	defer syscall.Close(int(fd))
	var set syscall.FdSet
	set.Bits[fd/64] |= 1 << (fd % 64)
	tv := syscall.NsecToTimeval(d.Nanoseconds())
	for {
		// A pidfd becomes readable when its process exits.
		_, err := syscall.Select(int(fd)+1, &set, nil, nil, &tv)
		if err != syscall.EINTR {
			return
		}
	}
}
