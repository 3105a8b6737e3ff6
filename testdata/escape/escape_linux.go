//go:build linux

package main

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// systemEscapes are the tries of what the kernel and peal's supervisor of
// connections keep a call from: sockets, connections around the proxy, the
// terminal.
func systemEscapes(who string) {
	for _, trap := range strings.Split(os.Getenv("ESCAPE_TRAPS"), ",") {
		if trap != "" {
			escape(who+"tcp-to-"+trap, func() error { return dial("tcp", trap) })
		}
	}
	escape(who+"tcp-other-address-proxy-port", func() error {
		u, err := url.Parse(os.Getenv("HTTP_PROXY"))
		if err != nil || u.Port() == "" {
			return fmt.Errorf("no proxy given")
		}
		return dial("tcp", net.JoinHostPort("127.0.0.2", u.Port()))
	})
	if a := os.Getenv("ESCAPE_UDP"); a != "" {
		escape(who+"udp", func() error { return dial("udp", a) })
	}
	escape(who+"raw-socket", func() error { return socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_ICMP) })
	escape(who+"packet-socket", func() error { return socket(syscall.AF_PACKET, syscall.SOCK_RAW, 0) })
	escape(who+"datagram-socketpair", func() error { return socketpair(syscall.SOCK_DGRAM) })
	if p := os.Getenv("ESCAPE_UNIX"); p != "" {
		escape(who+"unix-outside-tree", func() error { return dial("unix", p) })
	}
	if tty := os.Getenv("ESCAPE_TTY"); tty != "" {
		escape(who+"write-terminal", func() error { return writeTerminal(tty) })
		escape(who+"push-terminal-input", func() error { return pushInput(tty) })
	}
	if p := os.Getenv("ESCAPE_DAEMON"); p != "" {
		escape(who+"daemon-socket", func() error { return dial("unix", p) })
	}
	if p := os.Getenv("ESCAPE_DGRAM"); p != "" {
		escape(who+"unix-raw-datagram", func() error { return rawDatagram(p) })
	}
	if keys := os.Getenv("ESCAPE_IPC"); keys != "" {
		escape(who+"sysv-ipc", func() error { return sysvIPC(keys) })
	}
	if port := os.Getenv("ESCAPE_NETLINK"); port != "" {
		escape(who+"netlink-usersock", func() error { return netlinkSend(syscall.NETLINK_USERSOCK, port) })
	}
	escape(who+"netlink-sock-diag", func() error { return netlinkSend(4 /* NETLINK_SOCK_DIAG */, "") })
	escape(who+"root-capabilities", rootCapabilities)
	if dir := os.Getenv("ESCAPE_LISTEN"); dir != "" {
		escape(who+"inbound-port", func() error { return listenUnbound(dir) })
	}
}

// rawDatagram sends a datagram to path through a raw UNIX socket (which
// the kernel makes a datagram one).
func rawDatagram(path string) error {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer syscall.Close(fd)
	return syscall.Sendto(fd, []byte("stolen"), 0, &syscall.SockaddrUnix{Name: path})
}

// sysvIPC reads another program's shared memory segment and sends to its
// message queue ("shmkey:msgkey"), both; nil when either worked.
func sysvIPC(keys string) error {
	shm, msq, _ := strings.Cut(keys, ":")
	sk, _ := strconv.Atoi(shm)
	mk, _ := strconv.Atoi(msq)
	var errs []string
	if id, _, e := syscall.Syscall(syscall.SYS_SHMGET, uintptr(sk), 0, 0); e != 0 {
		errs = append(errs, "shmget: "+e.Error())
	} else if addr, _, e := syscall.Syscall(syscall.SYS_SHMAT, id, 0, 0o10000 /* SHM_RDONLY */); e != 0 {
		errs = append(errs, "shmat: "+e.Error())
	} else {
		syscall.Syscall(syscall.SYS_SHMDT, addr, 0, 0)
	}
	if id, _, e := syscall.Syscall(syscall.SYS_MSGGET, uintptr(mk), 0, 0); e != 0 {
		errs = append(errs, "msgget: "+e.Error())
	} else {
		msg := append([]byte{1, 0, 0, 0, 0, 0, 0, 0}, "stolen"...)
		if _, _, e := syscall.Syscall6(syscall.SYS_MSGSND, id, uintptr(unsafe.Pointer(&msg[0])), 6, 0o4000 /* IPC_NOWAIT */, 0, 0); e != 0 {
			errs = append(errs, "msgsnd: "+e.Error())
		}
	}
	if len(errs) == 2 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// netlinkSend makes a netlink socket of proto and, with a port, sends a
// message to the process listening there.
func netlinkSend(proto int, port string) error {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, proto)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer syscall.Close(fd)
	if port == "" {
		return nil
	}
	pid, _ := strconv.Atoi(port)
	msg := make([]byte, syscall.NLMSG_HDRLEN+6)
	*(*uint32)(unsafe.Pointer(&msg[0])) = uint32(len(msg))
	copy(msg[syscall.NLMSG_HDRLEN:], "stolen")
	return syscall.Sendto(fd, msg, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK, Pid: uint32(pid)})
}

// rootCapabilities tries what root's capabilities let a process do: give
// a file of its own to another user, take another user's id.
func rootCapabilities() error {
	f, err := os.CreateTemp("", "caps-")
	if err != nil {
		return err
	}
	f.Close()
	defer os.Remove(f.Name())
	if err := os.Chown(f.Name(), 12345, -1); err == nil {
		return nil
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, ^uintptr(0), 12345, ^uintptr(0)); e == 0 {
		return nil
	}
	return fmt.Errorf("chown and setresuid refused")
}

// listenUnbound listens on a TCP socket it never bound, writes the port
// (0: none) to dir/port, and waits until the writer of the FIFO dir/go
// closes it; nil when a connection came meanwhile.
func listenUnbound(dir string) error {
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
	if e := os.WriteFile(filepath.Join(dir, "port"), []byte(strconv.Itoa(port)), 0o644); e != nil {
		return e
	}
	if f, e := os.Open(filepath.Join(dir, "go")); e == nil {
		f.Read(make([]byte, 1))
		f.Close()
	}
	if err != nil {
		return err
	}
	syscall.SetNonblock(fd, true)
	if nfd, _, err := syscall.Accept(fd); err == nil {
		syscall.Close(nfd)
		return nil
	}
	return fmt.Errorf("no connection came")
}

// systemWork is the work with sockets a task does.
func systemWork(who string) {
	work(who+"unix-socket-in-tree", func() error { return serveAndDial("unix", fmt.Sprintf("s%d.sock", os.Getpid())) })
	// Named apart from every other call's: a call's pid is its PID
	// namespace's, which other calls' repeat.
	work(who+"abstract-socket-own", func() error {
		return serveAndDial("unix", fmt.Sprintf("@peal-escape-%d-%d", os.Getpid(), time.Now().UnixNano()))
	})
	work(who+"stream-socketpair", func() error { return socketpair(syscall.SOCK_STREAM) })
	if os.Getenv("ESCAPE_TCP_ANY") != "" {
		work(who+"tcp-server", func() error { return serveAndDial("tcp", "127.0.0.1:0") })
	}
	if lock := os.Getenv("ESCAPE_LOCK"); lock != "" {
		work(who+"start-daemon", func() error { return startDaemon(lock) })
	}
}

func socket(domain, typ, proto int) error {
	fd, err := syscall.Socket(domain, typ, proto)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	return syscall.Close(fd)
}

func socketpair(typ int) error {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, typ, 0)
	if err != nil {
		return fmt.Errorf("socketpair: %w", err)
	}
	syscall.Close(fds[0])
	return syscall.Close(fds[1])
}

// writeTerminal writes to the terminal peal runs on: through /dev/tty, and
// through the terminal's own device.
func writeTerminal(tty string) error {
	for _, path := range []string{"/dev/tty", tty} {
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NOCTTY, 0); err == nil {
			_, err = f.WriteString("ESCAPED-TERMINAL-WRITE\n")
			f.Close()
			if err == nil {
				return nil
			}
		}
	}
	return fmt.Errorf("no terminal could be written")
}

// pushInput pushes a command line into the terminal's input (TIOCSTI), as
// if the user had typed it: through /dev/tty, the terminal's device, and
// the standard streams.
func pushInput(tty string) error {
	var fds []int
	for _, path := range []string{"/dev/tty", tty} {
		if f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOCTTY, 0); err == nil {
			defer f.Close()
			fds = append(fds, int(f.Fd()))
		}
	}
	fds = append(fds, 0, 1, 2)
	line := "echo ESCAPED-TERMINAL-INPUT\n"
	for _, fd := range fds {
		ok := true
		for i := 0; i < len(line) && ok; i++ {
			b := line[i]
			_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCSTI, uintptr(unsafe.Pointer(&b)))
			ok = errno == 0
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("no terminal took input")
}

// startDaemon starts a daemon that hides from its call as well as it can:
// a session of its own, its environment cleared, a double fork, SIGTERM
// and SIGHUP ignored. It holds a shared lock on lock while it lives, and
// returns once it holds it.
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
// second and exits; the second takes the lock, says so on fd 3, and lives
// (two minutes at most, should nothing end it).
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
	time.Sleep(2 * time.Minute)
	return 0
}
