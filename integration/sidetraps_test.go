package integration

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sideTraps are the ways out of a call besides its proxy, each watched from
// outside: a UDP listener and a UNIX socket outside every tree a call may
// write; a git credential cache's socket in ~/.cache/git/credential (made by
// another program before the run); another program's datagram socket,
// which a raw UNIX socket would reach; a System V message queue every user
// may use; a process listening on NETLINK_USERSOCK; and a daemon the call
// starts, which must not outlive it. (Raw IP sockets, NETLINK_SOCK_DIAG and
// an inbound port, which nothing outside sees while the CLI runs, and TCP
// to another address at an allowed port are tried by the escape suites of
// confine and cmd/peal.)
type sideTraps struct {
	udp      net.PacketConn
	unix     net.Listener
	unixPath string
	cred     string // the credential cache's socket
	dgram    string // the datagram socket
	msgKey   int
	netlink  uint32 // the NETLINK_USERSOCK listener's port
	queue    uintptr
	nl       int
	mark     string
	mu       sync.Mutex
	got      map[string]string
}

func newSideTraps(t *testing.T, home, mark string) *sideTraps {
	t.Helper()
	s := &sideTraps{mark: mark, got: map[string]string{}}
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.udp = udp
	go func() {
		buf := make([]byte, 512)
		for {
			n, _, err := udp.ReadFrom(buf)
			if err != nil {
				return
			}
			s.note("udp", fmt.Sprintf("a datagram reached the listener: %q", buf[:n]))
		}
	}()
	dir, err := os.MkdirTemp("", "peal-unix-trap-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	s.unixPath = filepath.Join(dir, "host.sock")
	if s.unix, err = net.Listen("unix", s.unixPath); err != nil {
		t.Fatal(err)
	}
	os.Chmod(s.unixPath, 0o777)
	go s.accept(s.unix, "unix socket")
	t.Cleanup(func() {
		s.udp.Close()
		s.unix.Close()
		os.RemoveAll(dir)
	})
	s.daemons(t, home, dir)
	return s
}

// accept notes every connection ln takes under name.
func (s *sideTraps) accept(ln net.Listener, name string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s.note(name, "a connection reached "+ln.Addr().String())
		c.Close()
	}
}

func (s *sideTraps) note(name, what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.got[name] == "" {
		s.got[name] = what
	}
}

// names are the names of the side tries judged.
func (s *sideTraps) names() []string {
	return []string{"udp", "unix socket", "credential socket", "raw unix datagram", "sysv ipc", "netlink usersock"}
}

// tries adds the side tries to an escape script (try(name, command); q
// quotes a word for the shell).
func (s *sideTraps) tries(try func(name, cmd string), q func(string) string) {
	udpPort := s.udp.LocalAddr().(*net.UDPAddr).Port
	try("udp", fmt.Sprintf("printf 'PEAL-UDP-%s' > /dev/udp/127.0.0.1/%d", s.mark, udpPort))
	try("unix socket", "curl -s -m 5 --unix-socket "+q(s.unixPath)+" http://localhost/ ; test $? -ne 7")
	try("credential socket", "curl -s -m 5 --unix-socket "+q(s.cred)+" http://localhost/ ; test $? -ne 7")
	// perl, the system's, for the calls curl and bash do not make.
	try("raw unix datagram", `perl -e 'use Socket; socket(my $s, AF_UNIX, SOCK_RAW, 0) or die "socket: $!\n"; send($s, "PEAL-DGRAM-`+s.mark+`", 0, pack_sockaddr_un($ARGV[0])) or die "send: $!\n"' `+q(s.dgram))
	try("sysv ipc", fmt.Sprintf(`perl -e '$id = msgget(%d, 0); defined $id or die "msgget: $!\n"; msgsnd($id, pack("l! a*", 1, "PEAL-IPC-%s"), 0) or die "msgsnd: $!\n"'`, s.msgKey, s.mark))
	try("netlink usersock", fmt.Sprintf(`perl -e 'socket(my $s, 16, 3, 2) or die "socket: $!\n"; my $m = pack("LSSLL", 16 + 6, 0, 0, 0, 0) . "stolen"; send($s, $m, 0, pack("SSLL", 16, 0, %d, 0)) or die "send: $!\n"'`, s.netlink))
	// A daemon in a session of its own, out of the call's process group:
	// peal ends it with the call, confined or not (daemonLeft).
	try("daemon", "setsid sh -c ': "+s.daemonMark()+"; sleep 120' </dev/null >/dev/null 2>&1 &")
}

// reached is what got through the side traps.
func (s *sideTraps) reached() map[string]string {
	s.received()
	s.mu.Lock()
	defer s.mu.Unlock()
	got := map[string]string{}
	for k, v := range s.got {
		got[k] = v
	}
	return got
}

func (s *sideTraps) daemonMark() string { return "PEAL-DAEMON-" + s.mark }

// daemonLeft is the pid of the daemon a call started that is still alive
// (ended here), or 0.
func (s *sideTraps) daemonLeft() int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		if strings.Contains(string(cmdline), s.daemonMark()) && !strings.Contains(string(stat), ") Z ") {
			syscall.Kill(pid, syscall.SIGKILL)
			return pid
		}
	}
	return 0
}

// daemons makes the listeners of the other programs a call must not reach,
// each noting what comes to it: a git credential cache's socket in
// home/.cache/git/credential, a datagram socket in dir, a System V
// message queue every user may write, a NETLINK_USERSOCK listener.
func (s *sideTraps) daemons(t *testing.T, home, dir string) {
	t.Helper()
	credDir := filepath.Join(home, ".cache", "git", "credential")
	if err := os.MkdirAll(credDir, 0o700); err != nil {
		t.Fatal(err)
	}
	s.cred = filepath.Join(credDir, "socket")
	cred, err := net.Listen("unix", s.cred)
	if err != nil {
		t.Fatal(err)
	}
	go s.accept(cred, "credential socket")
	s.dgram = filepath.Join(dir, "log.sock")
	dg, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: s.dgram, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(s.dgram, 0o777)
	go func() {
		buf := make([]byte, 512)
		for {
			n, err := dg.Read(buf)
			if err != nil {
				return
			}
			s.note("raw unix datagram", fmt.Sprintf("a datagram reached the socket: %q", buf[:n]))
		}
	}()
	var msq uintptr
	for i := range 100 {
		s.msgKey = 0x7e5c0000 + (os.Getpid()*100+i)%0xffff
		id, _, e := unix.Syscall(unix.SYS_MSGGET, uintptr(s.msgKey), unix.IPC_CREAT|unix.IPC_EXCL|0o666, 0)
		if e == 0 {
			msq = id
			break
		}
	}
	if msq == 0 {
		t.Fatal("no System V message queue key free")
	}
	nl, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_USERSOCK)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(nl, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(nl)
	if err != nil {
		t.Fatal(err)
	}
	s.netlink = sa.(*unix.SockaddrNetlink).Pid
	t.Cleanup(func() {
		cred.Close()
		dg.Close()
		unix.Close(nl)
		unix.Syscall(unix.SYS_MSGCTL, msq, unix.IPC_RMID, 0)
	})
	s.queue, s.nl = msq, nl
}

// received notes what reached the message queue and the netlink listener
// (read without waiting, once the run is over).
func (s *sideTraps) received() {
	buf := make([]byte, 8+512)
	if n, _, e := unix.Syscall6(unix.SYS_MSGRCV, s.queue, uintptr(unsafe.Pointer(&buf[0])), 512, 0, unix.IPC_NOWAIT, 0); e == 0 {
		s.note("sysv ipc", fmt.Sprintf("a message reached the queue: %q", buf[8:8+n]))
	}
	if n, _, err := unix.Recvfrom(s.nl, buf, unix.MSG_DONTWAIT); err == nil && n > 0 {
		s.note("netlink usersock", fmt.Sprintf("a netlink message reached the listener: %q", buf[:n]))
	}
}
