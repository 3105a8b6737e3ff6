package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"peal/internal/testkit/fakes"
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

// watchDaemons makes the other programs a call must not reach, each
// watched from outside: a git credential cache's socket in ~/.cache/git/credential
// (made before the run, by a program outside it), another program's
// datagram socket in sockDir, a System V shared memory segment and message
// queue every user may use, and a process listening on NETLINK_USERSOCK.
func (s *escapeSandbox) watchDaemons(t *testing.T, sockDir string) {
	t.Helper()
	dir := filepath.Join(s.home, ".cache", "git", "credential")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s.daemonSock = filepath.Join(dir, "socket")
	ln, err := net.Listen("unix", s.daemonSock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	os.Chmod(s.daemonSock, 0o777)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.daemonConns.Add(1)
			io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	if s.dgram, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(sockDir, "log.sock"), Net: "unixgram"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.dgram.Close() })
	os.Chmod(filepath.Join(sockDir, "log.sock"), 0o777)
	for i := range 100 {
		s.shmKey, s.msgKey = 0x7e5a0000+(os.Getpid()*100+i)%0xffff, 0x7e5b0000+(os.Getpid()*100+i)%0xffff
		shm, err := unix.SysvShmGet(s.shmKey, 4096, unix.IPC_CREAT|unix.IPC_EXCL|0o666)
		if err != nil {
			continue
		}
		t.Cleanup(func() { unix.SysvShmCtl(shm, unix.IPC_RMID, nil) })
		msq, _, e := unix.Syscall(unix.SYS_MSGGET, uintptr(s.msgKey), unix.IPC_CREAT|unix.IPC_EXCL|0o666, 0)
		if e != 0 {
			continue
		}
		s.msq = msq
		t.Cleanup(func() { unix.Syscall(unix.SYS_MSGCTL, msq, unix.IPC_RMID, 0) })
		break
	}
	if s.msq == 0 {
		t.Fatal("no System V IPC keys free")
	}
	if s.netlink, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_USERSOCK); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(s.netlink) })
	if err := unix.Bind(s.netlink, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(s.netlink)
	if err != nil {
		t.Fatal(err)
	}
	s.netlinkPort = sa.(*unix.SockaddrNetlink).Pid
}

// daemonsReached says which of watchDaemons' daemons a call reached, and
// how.
func (s *escapeSandbox) daemonsReached() map[string]string {
	got := map[string]string{}
	if n := s.daemonConns.Load(); n > 0 {
		got["the credential cache's socket"] = fmt.Sprintf("%d connections", n)
	}
	if pendingDatagram(s.t, s.dgram) {
		got["the datagram socket"] = "a datagram came"
	}
	buf := make([]byte, 8+64)
	if _, _, e := unix.Syscall6(unix.SYS_MSGRCV, s.msq, uintptr(unsafe.Pointer(&buf[0])), 64, 0, unix.IPC_NOWAIT, 0); e == 0 {
		got["the message queue"] = "a message came"
	}
	if n, _, _ := unix.Recvfrom(s.netlink, make([]byte, 64), unix.MSG_DONTWAIT); n > 0 {
		got["the NETLINK_USERSOCK listener"] = "a message came"
	}
	return got
}

// pendingDatagram tells whether a datagram waits on c, without waiting (a
// read deadline already passed would not even look).
func pendingDatagram(t *testing.T, c syscall.Conn) bool {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	got := false
	raw.Control(func(fd uintptr) {
		n, _, err := unix.Recvfrom(int(fd), make([]byte, 64), unix.MSG_DONTWAIT)
		got = err == nil && n >= 0
	})
	return got
}

// TestEscapeInboundPort: a call listens on a TCP socket it never bound,
// which picks a free port on every address of the machine, and the test
// connects to that port from outside (at 127.0.0.1 and at this machine's
// outside address) while the call waits: confined, no connection reaches
// the call, in its own network namespace (the default) or without one,
// where peal refuses the listen(); unconfined, one does (the test can
// fail). As root and as an unprivileged user.
func TestEscapeInboundPort(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	for _, who := range []string{"root", "unprivileged"} {
		for _, mode := range []string{"on", "nonetns", "off"} {
			t.Run(who+"/"+mode, func(t *testing.T) {
				t.Parallel()
				s := newEscapeSandbox(t, "## Task 1\nListen\n")
				if who == "unprivileged" {
					s.asUser()
				} else if os.Geteuid() != 0 {
					t.Skip("not root")
				}
				dir := filepath.Join(s.agentDir, "listen")
				os.Mkdir(dir, 0o777)
				os.Chmod(dir, 0o777)
				fifo := filepath.Join(dir, "go")
				if err := unix.Mkfifo(fifo, 0o666); err != nil {
					t.Fatal(err)
				}
				os.Chmod(fifo, 0o666)
				s.scenario(map[string][]fakes.Outcome{"execute:1": {{Commands: [][]string{{s.bin("escape")}}}}})
				if who == "unprivileged" {
					filepath.Walk(s.agentDir, func(p string, _ os.FileInfo, err error) error { return os.Lchown(p, s.uid, s.gid) })
				}
				env := s.env(mode, "ESCAPE_LISTEN="+dir)
				if mode == "nonetns" {
					env = s.env("on", "ESCAPE_LISTEN="+dir, "PEAL_CONFINE_NETWORK_NAMESPACE=false")
				}
				wait := s.start(env, "run")
				ended := make(chan result, 1)
				go func() { ended <- wait() }()
				// Opening the FIFO waits for the call, which has written
				// its port: an event, or peal's end should it never come.
				opened := make(chan *os.File, 1)
				go func() {
					if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
						opened <- w
					}
				}()
				var r result
				select {
				case w := <-opened:
					b, _ := os.ReadFile(filepath.Join(dir, "port"))
					if port := string(b); port != "0" && port != "" {
						for _, h := range []string{"127.0.0.1", outsideIPv4()} {
							if h == "" {
								continue
							}
							if c, err := net.Dial("tcp", net.JoinHostPort(h, port)); err == nil {
								c.Close()
							}
						}
					}
					w.Close()
					r = <-ended
				case r = <-ended:
					// Let the goroutine that opens the FIFO go.
					if f, err := os.OpenFile(fifo, os.O_RDONLY|unix.O_NONBLOCK, 0); err == nil {
						f.Close()
					}
					t.Fatalf("peal ended before the call listened: exit %d: %s", r.code, r.stderr)
				}
				escaped, _, blocked, _ := s.results()
				const try = "[execute 1] inbound-port"
				switch {
				case mode == "off" && !slices.Contains(escaped, try):
					t.Fatalf("unconfined, no connection came in: escaped %q, blocked %q", escaped, blocked)
				case mode != "off" && !slices.ContainsFunc(blocked, func(b string) bool { return strings.HasPrefix(b, try+": ") }):
					t.Fatalf("a connection came in: escaped %q, blocked %q\n%s", escaped, blocked, r.stderr)
				}
				if i := slices.IndexFunc(blocked, func(b string) bool { return strings.HasPrefix(b, try) }); i >= 0 {
					t.Logf("%s", blocked[i])
				}
			})
		}
	}
}
