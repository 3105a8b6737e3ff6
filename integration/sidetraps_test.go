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
)

// sideTraps are the ways out of a call besides its proxy, each watched from
// outside: a UDP listener and a UNIX socket outside every tree a call may
// write; and a daemon the call starts, which must not outlive it. (Raw
// sockets, which nothing outside sees, and TCP to another address at an
// allowed port are tried by the escape suites of confine and cmd/peal.)
type sideTraps struct {
	udp      net.PacketConn
	unix     net.Listener
	unixPath string
	mark     string
	mu       sync.Mutex
	got      map[string]string
}

func newSideTraps(t *testing.T, mark string) *sideTraps {
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
	return []string{"udp", "unix socket"}
}

// tries adds the side tries to an escape script (try(name, command); q
// quotes a word for the shell).
func (s *sideTraps) tries(try func(name, cmd string), q func(string) string) {
	udpPort := s.udp.LocalAddr().(*net.UDPAddr).Port
	try("udp", fmt.Sprintf("printf 'PEAL-UDP-%s' > /dev/udp/127.0.0.1/%d", s.mark, udpPort))
	try("unix socket", "curl -s -m 5 --unix-socket "+q(s.unixPath)+" http://localhost/ ; test $? -ne 7")
	// A daemon in a session of its own, out of the call's process group:
	// peal ends it with the call, confined or not (daemonLeft).
	try("daemon", "setsid sh -c ': "+s.daemonMark()+"; sleep 120' </dev/null >/dev/null 2>&1 &")
}

// reached is what got through the side traps.
func (s *sideTraps) reached() map[string]string {
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
