package main

import (
	"errors"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// pending tells whether a listener has a connection waiting to be
// accepted, without waiting: a connect the kernel let through is queued by
// the time the process that made it has exited.
func pending(t *testing.T, l net.Listener) bool {
	t.Helper()
	sc, ok := l.(syscall.Conn)
	if !ok {
		t.Fatalf("%T has no file descriptor", l)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	got := false
	raw.Control(func(fd uintptr) {
		nfd, _, err := unix.Accept4(int(fd), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err == nil {
			unix.Close(nfd)
			got = true
		} else if !errors.Is(err, syscall.EAGAIN) {
			t.Fatal(err)
		}
	})
	return got
}

// lockFree tells whether no process holds a lock on path: the daemon the
// escape program starts holds one while it lives.
func lockFree(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}

// killHolders kills the processes that hold path open: the daemons of an
// unconfined run.
func killHolders(path string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fds, _ := os.ReadDir("/proc/" + e.Name() + "/fd")
		for _, fd := range fds {
			if link, _ := os.Readlink("/proc/" + e.Name() + "/fd/" + fd.Name()); link == path {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// outsideIPv4 is an IPv4 address of this machine other than loopback, ""
// when it has none.
func outsideIPv4() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return ""
}
