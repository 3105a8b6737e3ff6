package phase

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// dieWithParent makes the kernel SIGKILL the child when peal dies, even of
// SIGKILL, so that no agent goes on editing the repository unsupervised.
func dieWithParent(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}

// The parent-death signal fires when the *thread* that started the child
// exits, not the process, and the Go runtime may end threads. Every child is
// therefore started from one goroutine locked to its thread for the life of
// the process: that thread never exits while peal runs.
var (
	spawnOnce sync.Once
	spawns    chan spawnRequest
)

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

func startChild(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawns = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as peal
			for req := range spawns {
				req.done <- req.cmd.Start()
			}
		}()
	})
	req := spawnRequest{cmd: cmd, done: make(chan error, 1)}
	spawns <- req
	return <-req.done
}

// strays lists the live processes, outside group pgid, whose environment
// carries callID: what a call started and then lost track of (a daemon that
// called setsid). Processes of other users cannot be read and are never
// listed. It runs at the end of every call, so it reads the environment only
// of processes started since the call's child (the group leader, pgid), and
// the state only of the few that carry the id.
func strays(callID string, pgid int) []int {
	if callID == "" {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	since := startedSince(pgid)
	var pids []int
	want := []byte(CallIDEnv + "=" + callID + "\x00")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !since(pid) || !carries(pid, want) {
			continue
		}
		if g, alive := procGroup(pid); alive && g != pgid {
			pids = append(pids, pid)
		}
	}
	return pids
}

// startedSince tells which pids may belong to processes started at or after
// pid first: the kernel hands out pids in increasing order up to pid_max and
// then wraps around, and it says which pid it handed out last. When that
// cannot be read, every pid may.
func startedSince(first int) func(pid int) bool {
	data, err := os.ReadFile("/proc/sys/kernel/ns_last_pid")
	last, perr := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || perr != nil {
		return func(int) bool { return true }
	}
	return pidRange(first, last)
}

// pidRange tells whether a pid was handed out from first to last, in the
// kernel's order (which wraps around at pid_max).
func pidRange(first, last int) func(pid int) bool {
	switch {
	case last >= first:
		return func(pid int) bool { return pid >= first && pid <= last }
	default: // wrapped around since first
		return func(pid int) bool { return pid >= first || pid <= last }
	}
}

// carries reports whether the environment of pid holds the entry want
// (NUL-terminated).
func carries(pid int, want []byte) bool {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	return bytes.HasPrefix(env, want) || bytes.Contains(env, append([]byte{0}, want...))
}

// forEachProcess calls fn with every live process and its process group
// (zombies count as gone).
func forEachProcess(fn func(pid, pgid int)) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, alive := procGroup(pid); alive {
			fn(pid, g)
		}
	}
}

// procGroup reads the process group of pid from /proc/<pid>/stat; alive is
// false for a zombie or a process that is gone.
func procGroup(pid int) (pgid int, alive bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name may hold spaces and parentheses: the fields after
	// the last ')' are state, ppid, pgrp.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 3 || bytes.Equal(f[0], []byte("Z")) || bytes.Equal(f[0], []byte("X")) {
		return 0, false
	}
	g, err := strconv.Atoi(string(f[2]))
	return g, err == nil
}

// waitGone waits, at most limit, until no process of group pgid (none when
// pgid is 0) and none of pids is left. It waits on a pidfd of each, so the
// wait costs nothing.
func waitGone(pgid int, pids []int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	if pgid > 0 {
		forEachProcess(func(pid, group int) {
			if group == pgid {
				pids = append(pids, pid)
			}
		})
	}
	for _, pid := range pids {
		waitExit(pid, time.Until(deadline))
	}
}

// waitExit blocks until process pid exits or d passes: a pidfd becomes
// readable when its process exits.
func waitExit(pid int, d time.Duration) {
	if d <= 0 {
		return
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // gone already, or no pidfd support: nothing to wait on
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		_, err := unix.Poll(fds, int(min(left.Milliseconds()+1, 1<<30)))
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// SweepLeftovers stops (SIGTERM, then SIGKILL after grace) every process
// whose call id belongs to scope but was given by another peal process: what
// a run that died (even of SIGKILL) left running. The caller must know that
// no other live peal works in scope (it holds the scope's lock). It returns
// how many processes it found.
func SweepLeftovers(scope string, grace time.Duration) int {
	if scope == "" {
		return 0
	}
	prefix := []byte(CallIDEnv + "=" + scope + "/")
	mine := []byte(CallIDEnv + "=" + scope + "/" + strconv.Itoa(os.Getpid()) + "/")
	// Only the few processes that carry such an id need to be alive (not a
	// zombie): their state is read after their environment.
	var pids []int
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.HasPrefix(kv, prefix) && !bytes.HasPrefix(kv, mine) {
				if _, alive := procGroup(pid); alive {
					pids = append(pids, pid)
				}
				break
			}
		}
	}
	if len(pids) == 0 {
		return 0
	}
	signalAll(pids, unix.SIGTERM)
	deadline := time.Now().Add(grace)
	for _, pid := range pids {
		waitExit(pid, time.Until(deadline))
	}
	signalAll(pids, unix.SIGKILL)
	waitGone(0, pids, grace)
	return len(pids)
}
