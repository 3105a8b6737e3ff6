package confine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The tries of what a call starts without: ways out that no deny list
// names, each refused by default (every namespace the machine allows, the
// seccomp allow list, no capability, sockets of the call's own):
//
//   - a UNIX socket of another program in a folder the call may write (a
//     credential daemon's in a cache);
//   - a raw (datagram) UNIX socket, and through it a datagram to another
//     program's socket;
//   - listen() on a TCP socket it never bound, which picks a port on every
//     address of the machine;
//   - System V shared memory and message queues of another program;
//   - netlink beyond NETLINK_ROUTE: NETLINK_USERSOCK to a listening
//     process, NETLINK_SOCK_DIAG's list of the machine's sockets;
//   - root's capabilities: chown, a set-id bit, another user's id.
//
// Each runs in every mode of the machine (machineModes), and again as an
// unprivileged user (TestUnprivileged).

// denyHelper is the helper's side of these tries (helper's actions it does
// not know); ok is false for an action it does not know either.
func denyHelper(what, arg string) (ok bool, err error) {
	switch what {
	case "unixraw":
		// A raw UNIX socket (a datagram one to the kernel), and a datagram
		// through it to arg, another program's socket.
		fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return true, fmt.Errorf("socket: %w", err)
		}
		defer syscall.Close(fd)
		return true, syscall.Sendto(fd, []byte("stolen"), 0, &syscall.SockaddrUnix{Name: arg})
	case "netlink":
		// arg: the protocol, and for NETLINK_USERSOCK the port of a
		// listening process ("2:1234").
		proto, port, _ := strings.Cut(arg, ":")
		p, _ := strconv.Atoi(proto)
		fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, p)
		if err != nil {
			return true, fmt.Errorf("socket: %w", err)
		}
		defer syscall.Close(fd)
		if port == "" {
			return true, nil
		}
		pid, _ := strconv.Atoi(port)
		return true, syscall.Sendto(fd, netlinkMessage("stolen"), 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK, Pid: uint32(pid)})
	case "sysvipc":
		// arg: the keys of another program's shared memory segment and
		// message queue ("shmkey:msgkey"): read the one, send to the other.
		shmKey, msgKey, _ := strings.Cut(arg, ":")
		sk, _ := strconv.Atoi(shmKey)
		mk, _ := strconv.Atoi(msgKey)
		var errs []string
		if id, err := unix.SysvShmGet(sk, 0, 0); err != nil {
			errs = append(errs, "shmget: "+err.Error())
		} else if b, err := unix.SysvShmAttach(id, 0, unix.SHM_RDONLY); err != nil {
			errs = append(errs, "shmat: "+err.Error())
		} else {
			fmt.Printf("read %q\n", strings.TrimRight(string(b[:16]), "\x00"))
			unix.SysvShmDetach(b)
		}
		if id, _, e := unix.Syscall(unix.SYS_MSGGET, uintptr(mk), 0, 0); e != 0 {
			errs = append(errs, "msgget: "+e.Error())
		} else {
			msg := append(make([]byte, 8), "stolen"...)
			binary.NativeEndian.PutUint64(msg, 1)
			if _, _, e := unix.Syscall6(unix.SYS_MSGSND, id, uintptr(unsafe.Pointer(&msg[0])), 6, unix.IPC_NOWAIT, 0, 0); e != 0 {
				errs = append(errs, "msgsnd: "+e.Error())
			} else {
				fmt.Println("sent")
			}
		}
		switch len(errs) {
		case 0:
			return true, nil
		case 2:
			return true, errors.New(strings.Join(errs, "; "))
		}
		return true, fmt.Errorf("reached another program's IPC: %s", strings.Join(errs, "; "))
	case "rootcaps":
		// arg: a file of the call's: what root's capabilities would let
		// it do with it, and with its own ids.
		var done []string
		if syscall.Chown(arg, 12345, -1) == nil {
			done = append(done, "chown")
		}
		// A set-gid bit on a file of another group (the test's, as root)
		// sticks only with CAP_FSETID.
		var st syscall.Stat_t
		if syscall.Stat(arg, &st) == nil && !inGroup(int(st.Gid)) && syscall.Chmod(arg, 0o2755) == nil {
			if syscall.Stat(arg, &st) == nil && st.Mode&syscall.S_ISGID != 0 {
				done = append(done, "set-gid")
			}
		}
		if unix.Setresuid(-1, 12345, -1) == nil {
			done = append(done, "setuid")
		}
		if len(done) > 0 {
			return true, fmt.Errorf("did %s", strings.Join(done, ", "))
		}
		return true, nil
	case "netns":
		// The network namespace it is in and, with "-", a port it listens
		// on there (its loopback is up); with a port, whether a connection
		// to it is refused (nothing listens there).
		ns, err := os.Readlink("/proc/self/ns/net")
		if err != nil {
			return true, err
		}
		if arg == "-" {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return true, err
			}
			_, port, _ := net.SplitHostPort(ln.Addr().String())
			fmt.Println(ns, port)
			os.Exit(0)
		}
		if c, err := net.Dial("tcp", "127.0.0.1:"+arg); err == nil {
			c.Close()
			return true, errors.New("something listens on the port of the last call")
		}
		fmt.Println(ns, "free")
		os.Exit(0)
	case "listen":
		// listen() on a TCP socket it never bound; the port it got (0:
		// none) goes to the file arg, then it waits for the test, which
		// tries to connect from outside, and says whether a connection
		// came.
		return true, listenUnbound(arg)
	}
	return false, nil
}

// inGroup tells whether this process is in group gid.
func inGroup(gid int) bool {
	if gid == os.Getegid() {
		return true
	}
	groups, _ := os.Getgroups()
	for _, g := range groups {
		if g == gid {
			return true
		}
	}
	return false
}

// netlinkMessage is one netlink message carrying text.
func netlinkMessage(text string) []byte {
	b := make([]byte, syscall.NLMSG_HDRLEN+len(text))
	binary.NativeEndian.PutUint32(b, uint32(len(b)))
	copy(b[syscall.NLMSG_HDRLEN:], text)
	return b
}

// listenUnbound is the helper's "listen": the port file is written before
// it opens the FIFO go beside it, whose writer (the test) closes it once
// it has tried to connect.
func listenUnbound(portFile string) error {
	port := 0
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err == nil {
		defer syscall.Close(fd)
		if err = syscall.Listen(fd, 8); err != nil {
			err = fmt.Errorf("listen: %w", err)
		} else if sa, e := syscall.Getsockname(fd); e == nil {
			port = sa.(*syscall.SockaddrInet4).Port
		}
	} else {
		err = fmt.Errorf("socket: %w", err)
	}
	if e := os.WriteFile(portFile, []byte(strconv.Itoa(port)), 0o644); e != nil {
		return e
	}
	f, e := os.Open(filepath.Join(filepath.Dir(portFile), "go"))
	if e != nil {
		return e
	}
	buf := make([]byte, 1)
	f.Read(buf) // until the test closes its end
	f.Close()
	if err != nil {
		return err
	}
	syscall.SetNonblock(fd, true)
	if nfd, _, err := syscall.Accept(fd); err == nil {
		syscall.Close(nfd)
		return errors.New("a connection came from outside")
	}
	return nil
}

// TestDefaultDeny: from a confined call, in every mode of the machine, the
// tries above are refused; the unconfined call does each (the test can
// fail).
func TestDefaultDeny(t *testing.T) {
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) { tryDefaultDeny(t, m) })
	}
}

func tryDefaultDeny(t *testing.T, m mode) {
	s := newScratch(t)
	// A short folder: a socket's path has at most 107 bytes.
	sockDir, err := os.MkdirTemp("", "s")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	os.Chmod(sockDir, 0o755)
	// Another program's datagram socket, as /dev/log is.
	logSock := filepath.Join(sockDir, "log.sock")
	logConn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: logSock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer logConn.Close()
	os.Chmod(logSock, 0o777)
	// A daemon's socket in a folder the call may write (its cache): made
	// by another program before the call.
	cache := filepath.Join(s.root, "c")
	mkdir(t, cache)
	daemonSock := filepath.Join(cache, "credential.sock")
	daemon, err := net.Listen("unix", daemonSock)
	if err != nil {
		t.Fatal(err)
	}
	defer daemon.Close()
	// A process listening on NETLINK_USERSOCK.
	nl, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, syscall.NETLINK_USERSOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(nl)
	if err := syscall.Bind(nl, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		t.Fatal(err)
	}
	nlAddr, err := syscall.Getsockname(nl)
	if err != nil {
		t.Fatal(err)
	}
	nlPort := strconv.Itoa(int(nlAddr.(*syscall.SockaddrNetlink).Pid))
	// Another program's System V shared memory (a password in it) and
	// message queue, readable and writable by this user only.
	shmKey, msgKey := 0x7e570000+os.Getpid()%0xffff, 0x7e580000+os.Getpid()%0xffff
	shm, err := unix.SysvShmGet(shmKey, 4096, unix.IPC_CREAT|unix.IPC_EXCL|0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.SysvShmCtl(shm, unix.IPC_RMID, nil)
	if b, err := unix.SysvShmAttach(shm, 0, 0); err == nil {
		copy(b, "PASSWORD")
		unix.SysvShmDetach(b)
	}
	msq, _, e := unix.Syscall(unix.SYS_MSGGET, uintptr(msgKey), unix.IPC_CREAT|unix.IPC_EXCL|0o600, 0)
	if e != 0 {
		t.Fatal(e)
	}
	defer unix.Syscall(unix.SYS_MSGCTL, msq, unix.IPC_RMID, 0)
	mine := filepath.Join(s.tree, "mine")
	writeFile(t, mine, "x\n")
	if os.Geteuid() == 0 {
		os.Chown(mine, 0, 12345) // a group the call is not in
	}

	pol := s.access(s.tree)
	pol.Write = append(pol.Write, Paths("a cache", cache)...)
	c := child{call: &Call{Mode: m.mode, Access: pol, Support: m.sup}, dir: s.tree, tempDir: s.temp}
	ipcWant := "shmget: operation not permitted; msgget: operation not permitted"
	if m.sup.IPCNamespace {
		ipcWant = "shmget: no such file or directory; msgget: no such file or directory"
	}
	c.try(t, []attempt{
		{"another program's socket in a folder it may write", []string{"unix", daemonSock}, "dial unix " + daemonSock + ": connect" + denied},
		{"a raw UNIX socket to another program's", []string{"unixraw", logSock}, "socket" + denied},
		{"NETLINK_USERSOCK to a listening process", []string{"netlink", strconv.Itoa(syscall.NETLINK_USERSOCK) + ":" + nlPort}, "socket" + denied},
		{"NETLINK_SOCK_DIAG", []string{"netlink", strconv.Itoa(unix.NETLINK_SOCK_DIAG)}, "socket" + denied},
		{"another program's System V IPC", []string{"sysvipc", fmt.Sprintf("%d:%d", shmKey, msgKey)}, ipcWant},
		{"root's capabilities", []string{"rootcaps", mine}, "ok"},
		// What goes on.
		{"NETLINK_ROUTE", []string{"netlink", strconv.Itoa(syscall.NETLINK_ROUTE)}, "ok"},
		{"a socket it made in the cache", []string{"unixserve", filepath.Join(cache, "own.sock")}, "ok"},
	})
	tryListen(t, c, "confined", !m.sup.NetNamespace && m.sup.Supervise)
	if n, _, _ := unix.Recvfrom(nl, make([]byte, 64), unix.MSG_DONTWAIT); n > 0 {
		t.Error("a netlink message reached the listening process")
	}
	if pendingDatagram(t, logConn) {
		t.Error("a datagram reached the other program's socket")
	}
	if pendingUnix(t, daemon) {
		t.Error("a connection reached the daemon's socket")
	}
	// msgrcv of any message, without waiting: ENOMSG when none came.
	buf := make([]byte, 8+64)
	if _, _, e := unix.Syscall6(unix.SYS_MSGRCV, msq, uintptr(unsafe.Pointer(&buf[0])), 64, 0, unix.IPC_NOWAIT, 0); e != unix.ENOMSG {
		t.Errorf("the other program's queue: %v (a message came)", e)
	}

	// Unconfined, each gets through (root's capabilities: only to root).
	open := child{call: &Call{Mode: Off}, dir: s.tree}
	open.try(t, []attempt{
		{"unconfined: another program's socket", []string{"unix", daemonSock}, "ok"},
		{"unconfined: a raw UNIX socket", []string{"unixraw", logSock}, "ok"},
		{"unconfined: NETLINK_SOCK_DIAG", []string{"netlink", strconv.Itoa(unix.NETLINK_SOCK_DIAG)}, "ok"},
		{"unconfined: System V IPC", []string{"sysvipc", fmt.Sprintf("%d:%d", shmKey, msgKey)}, "read \"PASSWORD\"\nsent\nok"},
	})
	tryListen(t, open, "unconfined", false)
	if os.Geteuid() == 0 {
		if got, _ := open.run(t, "rootcaps", mine); got != "did chown, set-gid, setuid" {
			t.Errorf("unconfined root: %q", got)
		}
	}
}

// tryListen runs the helper's listen in c and connects, from outside, to
// the port it got, at 127.0.0.1 and at this machine's outside address. A
// confined call (confined) must say no connection came, or, where peal
// decides its listen() (refused), that it was refused; an unconfined one
// gets the connection.
func tryListen(t *testing.T, c child, name string, refused bool) {
	t.Run(name+": listen on a TCP socket never bound", func(t *testing.T) {
		dir := filepath.Join(c.dir, "listen-"+strconv.Itoa(os.Getpid()))
		mkdir(t, dir)
		defer os.RemoveAll(dir)
		if err := unix.Mkfifo(filepath.Join(dir, "go"), 0o666); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o777)
		type result struct {
			out string
			err error
		}
		done := make(chan result, 1)
		go func() {
			out, err := c.run(t, "listen", filepath.Join(dir, "port"))
			done <- result{out, err}
		}()
		// Opening the FIFO waits for the call, which has written its port;
		// or the call ends first, having failed.
		fifo := filepath.Join(dir, "go")
		opened := make(chan *os.File, 1)
		go func() {
			if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				opened <- w
			}
		}()
		var w *os.File
		select {
		case w = <-opened:
		case r := <-done:
			if f, err := os.OpenFile(fifo, os.O_RDONLY|unix.O_NONBLOCK, 0); err == nil {
				f.Close() // lets the opener go
			}
			t.Fatalf("the call ended before it listened: %q (%v)", r.out, r.err)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "port"))
		if port := strings.TrimSpace(string(b)); port != "0" && port != "" {
			hosts := []string{"127.0.0.1"}
			if o := outsideIPv4(); o != "" {
				hosts = append(hosts, o)
			}
			for _, h := range hosts {
				if conn, err := net.Dial("tcp", net.JoinHostPort(h, port)); err == nil {
					conn.Close()
				}
			}
		}
		w.Close()
		r := <-done
		want := "ok"
		switch {
		case c.call.Mode == Off:
			want = "a connection came from outside"
		case refused:
			want = "listen" + denied
		}
		if r.out != want {
			t.Fatalf("got %q (%v), want %q", r.out, r.err, want)
		}
	})
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

// TestNetnsMadeAhead: where peal is root, a call's launcher joins a network
// namespace peal made ahead (its loopback up), never peal's; once the call
// is over, its namespace goes back to be joined by a later call, with
// nothing of the first call left in it (the port it listened on is free).
func TestNetnsMadeAhead(t *testing.T) {
	s := needLandlock(t)
	if !s.NetNamespace || s.UserNamespace || os.Geteuid() != 0 {
		t.Skip("peal makes network namespaces ahead as root only: " + s.String())
	}
	ahead, err := makeNetns()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(ahead.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	// The next call takes it: the only one ready, and none made meanwhile.
	p := madeNetns
	p.mu.Lock()
	saved, failed := p.ready, p.failed
	p.ready, p.failed = []*os.File{ahead}, true
	p.owned++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.ready, p.failed = append(p.ready, saved...), failed
		p.mu.Unlock()
	}()
	sc := newScratch(t)
	pol := sc.access(sc.tree)
	pol.TCP = nil // it listens on its loopback, which is up
	c := child{call: &Call{Mode: On, Access: pol, Support: &s}, dir: sc.tree}
	first, err := c.run(t, "netns", "-")
	ns, port, _ := strings.Cut(first, " ")
	if err != nil || ns != want || port == "" {
		t.Fatalf("the first call: %q (%v), want it in %s, listening", first, err, want)
	}
	// The namespace comes back once the call is over.
	p.mu.Lock()
	for len(p.ready) == 0 {
		p.back.Wait()
	}
	back := p.ready[len(p.ready)-1]
	p.mu.Unlock()
	if got, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(back.Fd()))); got != want {
		t.Fatalf("%s came back, not %s", got, want)
	}
	second, err := c.run(t, "netns", port)
	if err != nil || second != want+" free" {
		t.Fatalf("the second call: %q (%v), want it in %s with the first call's port free", second, err, want)
	}
	if peal, _ := os.Readlink("/proc/thread-self/ns/net"); peal == want {
		t.Fatal("the calls were in peal's network namespace")
	}
}
