package confine

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"peal/internal/testkit/testbin"
)

// These tests try, from a confined call, the ways out that the launcher's
// namespaces, its seccomp filter and peal's supervisor of connections
// close: a daemon that outlives its call, the terminal, UDP, raw and
// packet sockets, TCP to another address on an allowed port, a UNIX socket
// outside the tree; and the work that must still succeed. Each runs in
// every mode the machine has (its namespaces, and without them: the
// fallback), as root and, run again, as an unprivileged user.

// mode is a way this machine can confine a call, and the confine mode
// that runs it (the fallback without namespaces runs under auto: on
// refuses it).
type mode struct {
	name string
	sup  *Support
	mode Mode
}

// modes are the machine's: what it enforces by default (a network
// namespace for each call where it allows one), without a network
// namespace (confine_network_namespace = false), and, where it has
// namespaces, the fallback without them.
func modes(t *testing.T) []mode {
	t.Helper()
	s := needLandlock(t)
	if !s.Supervise {
		t.Skip("peal cannot decide the connections of calls here: " + s.String())
	}
	return machineModes(s)
}

func machineModes(s Support) []mode {
	out := []mode{{"as probed", &s, On}}
	if s.NetNamespace {
		n := s.WithoutNetNamespace()
		out = append(out, mode{"no network namespace", &n, On})
	}
	if s.PIDNamespace || s.NetNamespace {
		f := s
		f.PIDNamespace, f.IPCNamespace, f.UTSNamespace, f.NetNamespace, f.NetNamespaceAllowed, f.UserNamespace = false, false, false, false, false, false
		f.NamespaceWhy = "as if the system refused them"
		out = append(out, mode{"no namespaces", &f, Auto})
	}
	return out
}

func TestUnprivileged(t *testing.T) {
	testbin.RerunAsUser(t, "^(TestContainment|TestNoTerminal|TestSockets|TestSocketsTCPAny|TestDefaultDeny|TestLandlockFiles|TestLandlockNetwork|TestProbe|TestModelKey|TestDataOnly)$")
}

// TestProbe: the machine's start line is what the tests expect of it
// (printed, so that a run says what it exercised).
func TestProbe(t *testing.T) {
	s := Probe()
	t.Logf("uid %d: %s", os.Geteuid(), s)
	if s.Files && !strings.HasPrefix(s.String(), "files and TCP enforced by Landlock ABI "+strconv.Itoa(s.ABI)) && s.TCP {
		t.Errorf("line %q", s)
	}
	if s.UserNamespace && os.Geteuid() == 0 && (s.PIDNamespace || s.NetNamespace) {
		// Root has its namespaces without a user namespace, unless the
		// system refuses them to it (a container).
		t.Logf("root in a user namespace: %s", s.NamespaceWhy)
	}
}

// startDaemon starts a daemon as an agent's tool would hide one: in a
// session of its own, with its environment cleared, after a double fork,
// ignoring SIGTERM and SIGHUP; it holds a shared lock on lock for as long
// as it lives, and returns once it holds it.
func startDaemon(lock string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command(exe, "daemon-1", lock)
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return err
	}
	cmd.Wait()
	if _, err := r.Read(make([]byte, 1)); err != nil {
		return fmt.Errorf("the daemon did not start: %v", err)
	}
	return nil
}

// daemonStage is a stage of startDaemon's daemon: the first starts the
// second and exits; the second takes the lock, says so on fd 3, and lives.
func daemonStage(stage, lock string) int {
	ready := os.NewFile(3, "ready")
	if stage == "daemon-1" {
		exe, _ := os.Executable()
		cmd := exec.Command(exe, "daemon-2", lock)
		cmd.Env = []string{}
		cmd.ExtraFiles = []*os.File{ready}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if cmd.Start() != nil {
			return 1
		}
		return 0
	}
	signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	f, err := os.Open(lock)
	if err != nil || syscall.Flock(int(f.Fd()), syscall.LOCK_SH) != nil {
		return 1
	}
	ready.Write([]byte{1})
	ready.Close()
	time.Sleep(2 * time.Minute) // a bound, should nothing end it
	return 0
}

// lockFree tells whether no process holds a lock on path.
func lockFree(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}

// TestContainment: a daemon the call starts (its own session, its
// environment cleared, a double fork, SIGTERM ignored) is gone once the
// call has ended: the call's PID namespace ends with its launcher.
// (Without a PID namespace the launcher and peal hold it as subreapers:
// phase's tests.)
func TestContainment(t *testing.T) {
	s := needLandlock(t)
	if !s.PIDNamespace {
		t.Skip("no PID namespace here (phase's tests try the subreapers): " + s.NamespaceWhy)
	}
	sc := newScratch(t)
	lock := filepath.Join(sc.root, "daemon.lock")
	writeFile(t, lock, "")
	c := child{call: &Call{Mode: On, Access: sc.access(sc.tree)}, dir: sc.tree}
	if got, err := c.run(t, "daemon", lock); got != "ok" {
		t.Fatalf("the daemon: %q (%v)", got, err)
	}
	if !lockFree(t, lock) {
		t.Fatal("a process the call started is alive after the call ended")
	}
	// Unconfined, the same daemon outlives its call: the test can fail.
	open := child{call: &Call{Mode: Off}, dir: sc.tree}
	if got, err := open.run(t, "daemon", lock); got != "ok" {
		t.Fatalf("the daemon, unconfined: %q (%v)", got, err)
	}
	if lockFree(t, lock) {
		t.Fatal("unconfined, the daemon did not outlive its call")
	}
	// End it: it holds the lock in its own session.
	killHolders(t, lock)
}

// killHolders kills the processes of this user that hold path open.
func killHolders(t *testing.T, path string) {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			if link, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); link == path {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// openPTY opens a pseudo-terminal pair; it skips the test where the system
// has none.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: /dev/ptmx: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(master.Fd()), unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0)
	}
	if err == nil {
		slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	}
	if err != nil {
		master.Close()
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { master.Close(); slave.Close() })
	return master, slave
}

// pending reads what f holds right now, without waiting.
func pending(f *os.File) string {
	fd := int(f.Fd())
	unix.SetNonblock(fd, true)
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := unix.Read(fd, buf)
		if n <= 0 || err != nil {
			return string(out)
		}
		out = append(out, buf[:n]...)
	}
}

// tiocsti pushes s into the input of the terminal fd, as if typed.
func tiocsti(fd int, s string) error {
	for i := 0; i < len(s); i++ {
		b := s[i]
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCSTI, uintptr(unsafe.Pointer(&b))); errno != 0 {
			return errno
		}
	}
	return nil
}

// tryTerminal tries, from a call, to write to the terminal peal runs on
// (pts) and to push a command line into its input; it prints "blocked"
// or what escaped.
func tryTerminal(pts string) int {
	var escaped []string
	if f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0); err == nil {
		if _, err := f.WriteString("ESCAPED-TTY\n"); err == nil {
			escaped = append(escaped, "write /dev/tty")
		}
		if tiocsti(int(f.Fd()), "ESCAPED-STI\n") == nil {
			escaped = append(escaped, "TIOCSTI /dev/tty")
		}
		f.Close()
	}
	if f, err := os.OpenFile(pts, os.O_WRONLY|unix.O_NOCTTY, 0); err == nil {
		if _, err := f.WriteString("ESCAPED-PTS\n"); err == nil {
			escaped = append(escaped, "write "+pts)
		}
		f.Close()
	}
	if f, err := os.OpenFile(pts, os.O_RDONLY|unix.O_NOCTTY, 0); err == nil {
		if tiocsti(int(f.Fd()), "ESCAPED-STI\n") == nil {
			escaped = append(escaped, "TIOCSTI "+pts)
		}
		f.Close()
	}
	for fd := range 3 {
		if tiocsti(fd, "ESCAPED-STI\n") == nil {
			escaped = append(escaped, "TIOCSTI fd "+strconv.Itoa(fd))
		}
	}
	if len(escaped) > 0 {
		fmt.Println("ESCAPED " + strings.Join(escaped, ", "))
		return 1
	}
	fmt.Println("blocked")
	return 0
}

// confinedOnTerminal is peal on a terminal (its standard input and
// controlling terminal): it runs one confined call that tries it.
func confinedOnTerminal(pts string) int {
	home, tree := os.Getenv("CONFINE_TEST_HOME"), os.Getenv("CONFINE_TEST_TREE")
	pol := Base(home)
	pol.Write = append(pol.Write, Paths("work tree", tree)...)
	call := &Call{Mode: On, Access: pol, EnvPass: []string{helperEnv}}
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "tty", pts)
	cmd.Dir = tree
	cmd.Env = call.Environ(os.Environ())
	cmd.Stdin = os.Stdin // the terminal, as a careless supervisor would give it
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	l, err := call.Prepare(cmd, "tty", "")
	if err == nil {
		err = cmd.Start()
	}
	if err == nil && l != nil {
		if err = l.Wait(); err == nil && l.Launched() {
			<-l.Done()
		}
	}
	if err == nil {
		cmd.Wait()
	}
	if l != nil {
		l.Close()
	}
	fmt.Print(strings.TrimSpace(out.String()))
	if err != nil {
		fmt.Print(" ", err)
	}
	return 0
}

// TestNoTerminal: peal runs on a terminal (a pseudo-terminal here, its
// controlling terminal and standard input); its confined call can neither
// write to it nor push input into it (TIOCSTI), through /dev/tty, the
// terminal's own device, or its standard streams.
func TestNoTerminal(t *testing.T) {
	needLandlock(t)
	master, slave := openPTY(t)
	s := newScratch(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "peal-tty", slave.Name())
	cmd.Env = append(os.Environ(), helperEnv+"=1", "CONFINE_TEST_HOME="+s.home, "CONFINE_TEST_TREE="+s.tree)
	var out bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	shown, typed := pending(master), pending(slave)
	if out.String() != "blocked" || strings.Contains(shown+typed, "ESCAPED") {
		t.Fatalf("the call: %q; the terminal showed %q and holds as input %q", out.String(), shown, typed)
	}
}

// TestSockets: from a confined call, UDP, raw and packet sockets, a
// datagram UNIX socket, TCP to another address on the proxy's port and on
// an allowed loopback port, and a UNIX socket outside the call's tree are
// refused; the proxy, an allowed loopback server, UNIX sockets of its own
// (in its tree, in its temporary folder, abstract), one named in the
// access, and a stream socketpair work.
func TestSockets(t *testing.T) {
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) { trySockets(t, m) })
	}
}

func trySockets(t *testing.T, m mode) {
	s := newScratch(t)
	// A server the call may reach directly (a test database, a local
	// model), and one behind the proxy.
	// Its port must be free at 127.0.0.2 too, for the trap below: another
	// test may hold it there.
	var allowedSrv *httptest.Server
	var sameport net.Listener
	var err error
	for range 20 {
		allowedSrv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") }))
		_, p, _ := net.SplitHostPort(strings.TrimPrefix(allowedSrv.URL, "http://"))
		if sameport, err = net.Listen("tcp", "127.0.0.2:"+p); err == nil {
			break
		}
		allowedSrv.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	defer allowedSrv.Close()
	allowedHost := strings.TrimPrefix(allowedSrv.URL, "http://")
	_, portText, _ := net.SplitHostPort(allowedHost)
	port, _ := strconv.Atoi(portText)
	allow, err := ParseAllow(KeyNetworkAllow, allowedHost)
	if err != nil {
		t.Fatal(err)
	}
	// Listeners nothing allows: on another loopback address, at the
	// allowed port and (once it is known) at the proxy's port, on this
	// machine's outside address, UDP, and a UNIX socket outside the tree.
	var traps []net.Listener
	trap := func(addr string) net.Listener {
		// A later call's proxy may get the port of an earlier one, whose
		// trap is still listening: that trap serves.
		for _, ln := range traps {
			if ln.Addr().String() == addr {
				return ln
			}
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen %s: %v", addr, err)
		}
		traps = append(traps, ln)
		t.Cleanup(func() { ln.Close() })
		return ln
	}
	traps = append(traps, sameport) // 127.0.0.2 at the allowed port
	t.Cleanup(func() { sameport.Close() })
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	sockDir, err := os.MkdirTemp("", "s")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	os.Chmod(sockDir, 0o755)
	outsideSock := filepath.Join(sockDir, "host.sock")
	hostSvc, err := net.Listen("unix", outsideSock)
	if err != nil {
		t.Fatal(err)
	}
	defer hostSvc.Close()
	os.Chmod(outsideSock, 0o777)
	namedSock := filepath.Join(sockDir, "named.sock")
	named, err := net.Listen("unix", namedSock)
	if err != nil {
		t.Fatal(err)
	}
	defer named.Close()
	os.Chmod(namedSock, 0o777)
	go func() {
		for {
			c, err := named.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	outside := outsideIPv4()
	var proxyPort string
	pol := s.access(s.tree)
	pol.TCP.Connect = append(pol.TCP.Connect, uint16(port))
	pol.UnixSockets = Paths(KeyUnixSockets, namedSock)
	c := child{call: &Call{Mode: m.mode, Access: pol, Proxy: NewProxy(nil), Allow: allow, Support: m.sup}, dir: s.tree, tempDir: s.temp,
		before: func(l *Launch) {
			proxyPort = strconv.Itoa(int(l.Endpoint().Port()))
			trap("127.0.0.2:" + proxyPort)
			if outside != "" {
				trap(net.JoinHostPort(outside, proxyPort))
			}
		}}
	refusedDial := func(hostport string) string { return "dial tcp " + hostport + ": connect" + denied }
	c.try(t, []attempt{
		{"TCP to another loopback address at the allowed port", []string{"dial", "127.0.0.2:" + portText}, refusedDial("127.0.0.2:" + portText)},
		{"UDP", []string{"udp", udp.LocalAddr().String()}, "dial udp " + udp.LocalAddr().String() + ": socket" + denied},
		{"a raw socket", []string{"raw", "-"}, "socket" + denied},
		{"a packet socket", []string{"packet", "-"}, "socket" + denied},
		{"a UNIX socket outside the tree", []string{"unix", outsideSock}, "dial unix " + outsideSock + ": connect" + denied},
		{"a datagram socketpair", []string{"socketpair", "dgram"}, "socketpair" + denied},
		// The work that goes on.
		{"the allowed loopback server", []string{"dial", "127.0.0.1:" + portText}, "ok"},
		{"a UNIX socket of its tree", []string{"unixserve", "s.sock"}, "ok"},
		{"a UNIX socket of its temporary folder", []string{"unixserve", filepath.Join(s.temp, "t.sock")}, "ok"},
		{"an abstract UNIX socket of its own", []string{"abstract", "peal-test-" + strconv.Itoa(os.Getpid())}, "ok"},
		{"a UNIX socket named in the access", []string{"unix", namedSock}, "ok"},
		{"a stream socketpair", []string{"socketpair", "stream"}, "ok"},
		{"the proxy", []string{"tunnel", allowedHost}, "ok"},
	})
	// The proxy's port is known once the call is prepared.
	c.try(t, []attempt{{"TCP to another loopback address at the proxy's port", []string{"dial-proxy-port", "127.0.0.2"}, refusedDial("127.0.0.2:PORT")}})
	if outside != "" {
		c.try(t, []attempt{{"TCP to this machine's outside address at the proxy's port", []string{"dial-proxy-port", outside}, refusedDial(outside + ":PORT")}})
	}
	if proxyPort == "" {
		t.Fatal("no proxy port")
	}
	for _, ln := range traps {
		if pendingConns(t, ln) {
			t.Errorf("a connection reached %s", ln.Addr())
		}
	}
	if pendingDatagram(t, udp.(syscall.Conn)) {
		t.Error("a datagram reached the UDP listener")
	}
	if pendingUnix(t, hostSvc) {
		t.Error("a connection reached the UNIX socket outside the tree")
	}
}

// TestSocketsTCPAny: with no TCP rules (confine_tcp = any) a call serves
// and reaches a TCP server of its own; another host stays out of reach.
func TestSocketsTCPAny(t *testing.T) {
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			s := newScratch(t)
			pol := s.access(s.tree)
			pol.TCP = nil
			c := child{call: &Call{Mode: m.mode, Access: pol, Support: m.sup}, dir: s.tree}
			tries := []attempt{{"a TCP server of its own", []string{"tcpserve", "-"}, "ok"}}
			if outside := outsideIPv4(); outside != "" {
				ln, err := net.Listen("tcp", net.JoinHostPort(outside, "0"))
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
				tries = append(tries, attempt{"TCP to this machine's outside address", []string{"dial", ln.Addr().String()}, "dial tcp " + ln.Addr().String() + ": connect" + denied})
				defer func() {
					if pendingConns(t, ln) {
						t.Error("a connection reached the outside address")
					}
				}()
			}
			c.try(t, tries)
		})
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

// pendingUnix tells whether a UNIX listener has a connection waiting.
func pendingUnix(t *testing.T, l net.Listener) bool {
	t.Helper()
	raw, err := l.(*net.UnixListener).SyscallConn()
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
