package launch

import (
	"errors"
	"runtime"
	"syscall"
)

// The launcher's life: peal starts its own binary (/proc/self/exe) with
// Env set, in a session of its own (no terminal) and, where the system
// allows, in new PID, mount, network, IPC and UTS namespaces (and a user
// namespace when peal is not root). Before anything else of peal
// initialises, it
//
//  1. ignores the signals peal sends the call's process group (SIGTERM,
//     and the terminal's), which the program gets and the launcher must
//     outlive;
//  2. brings the namespace's loopback up, listens on the ports peal serves
//     there and opens the namespace's sock_diag socket (Network), and
//     mounts the PID namespace's /proc (Init);
//  3. waits for the Landlock ruleset, which peal builds meanwhile and sends
//     over the control socket (it starts nothing without it); on its main
//     thread, sets no_new_privs, applies that ruleset, drops every
//     capability, installs the seccomp filter, and starts the program from that thread: the rules
//     are the thread's, and the program inherits them. Nothing of the call
//     can trace the launcher (it is not dumpable and the call holds no
//     CAP_SYS_PTRACE), nor signal it as the init of its PID namespace;
//     without one, a call that kills its launcher ends itself, and what it
//     started comes to peal;
//  4. hands peal the filter's listener and the namespace's sockets;
//  5. reaps every process of the call until none is left: as the init of
//     the PID namespace (whose end makes the kernel kill every process of
//     the namespace) or as the subreaper of the call's processes; it tells
//     peal when the program exits.

func init() {
	if v, ok := syscall.Getenv(Env); ok {
		syscall.Exit(launcher(v))
	}
}

func launcher(v string) int {
	cfg, err := Parse(v)
	if err != nil {
		syscall.Write(2, []byte("peal: "+Env+" is set but malformed; peal sets it for its confined calls only\n"))
		return ExitSetup
	}
	for _, s := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT} {
		ignore(s)
	}
	ctl := cfg.Control
	syscall.CloseOnExec(ctl)
	fail := func(code int, msg string, err error) int {
		send(ctl, MsgFailed, "confine: "+msg+": "+err.Error(), nil)
		return code
	}
	argv, err := cmdline()
	if err != nil {
		return fail(ExitSetup, "the launcher could not read its arguments", err)
	}
	// The rules are the calling thread's, and the program starts from it:
	// the main goroutine keeps its thread, and is never unlocked.
	runtime.LockOSThread()
	var fds []int
	if cfg.Flags&JoinNetwork != 0 {
		// The network namespace is the thread's: the program, forked from
		// this thread, and the sockets made here are in it.
		netns := ctl + 1
		_, _, errno := syscall.RawSyscall(sysSetns, uintptr(netns), cloneNewNet, 0)
		syscall.Close(netns)
		if errno != 0 {
			return fail(ExitSetup, "the launcher could not join the call's network namespace", errno)
		}
	}
	if cfg.Flags&Network != 0 {
		if err := loopbackUp(); err != nil {
			return fail(ExitSetup, "the launcher could not bring up the loopback interface of the call's network namespace", err)
		}
		diag, err := syscall.Socket(afNetlink, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, netlinkSockDiag)
		if err != nil {
			return fail(ExitSetup, "the launcher could not open the sock_diag socket of the call's network namespace", err)
		}
		fds = append(fds, diag)
		for _, p := range cfg.Ports {
			fd, err := listenLoopback(p)
			if err != nil {
				return fail(ExitSetup, "the launcher could not listen on 127.0.0.1:"+string(itoa(nil, int64(p)))+" in the call's network namespace", err)
			}
			fds = append(fds, fd)
		}
	}
	if cfg.Flags&Init != 0 {
		if err := mountProc(); err != nil {
			return fail(ExitSetup, "the launcher could not mount the /proc of the call's PID namespace", err)
		}
	}
	if cfg.Flags&Probe != 0 {
		send(ctl, MsgStarted, "", nil)
		return 0
	}
	// Nothing of the call may trace the launcher, nor read its memory.
	prctl(prSetDumpable, 0)
	if cfg.Flags&Subreaper != 0 {
		if _, errno := prctl(prSetChildSubreaper, 1); errno != 0 {
			return fail(ExitSetup, "the launcher could not adopt the call's orphans", errno)
		}
	}
	var env []string
	for _, kv := range syscall.Environ() {
		if len(kv) <= len(Env) || kv[:len(Env)+1] != Env+"=" {
			env = append(env, kv)
		}
	}
	files := []uintptr{0, 1, 2}
	for i := range cfg.Extra {
		files = append(files, uintptr(3+i))
	}
	// peal builds the ruleset while the launcher starts: the launcher
	// waits for it here, and starts nothing without it.
	rs := ruleset{fd: -1}
	if cfg.Flags&Landlock != 0 {
		if rs, err = recvRuleset(ctl); err != nil {
			return fail(ExitSetup, "the launcher did not get the Landlock rules", err)
		}
		// peal's rules name the /proc peal sees; the call reads its own.
		if cfg.Flags&Init != 0 {
			if err := readable(rs.fd, "/proc"); err != nil {
				syscall.Close(rs.fd)
				return fail(ExitSetup, "the launcher could not let the call read its /proc", err)
			}
		}
	}
	st := confineAndStart(cfg, rs, argv, env, files)
	if st.err != nil {
		return fail(st.code, st.msg, st.err)
	}
	if st.listener >= 0 {
		fds = append([]int{st.listener}, fds...)
	}
	send(ctl, MsgStarted, "", fds)
	for _, fd := range fds {
		syscall.Close(fd)
	}
	// The launcher holds none of the call's output: the call's end of the
	// pipes closes when its processes are done with them.
	if null, err := syscall.Open("/dev/null", syscall.O_RDWR|syscall.O_CLOEXEC, 0); err == nil {
		for fd := range 3 {
			syscall.Dup3(null, fd, 0)
		}
		syscall.Close(null)
	}
	return reap(st.pid, ctl)
}

// start is what confineAndStart did.
type start struct {
	pid, listener int
	code          int
	msg           string
	err           error
}

// confineAndStart confines the calling thread and starts the program from
// it.
func confineAndStart(cfg Config, rs ruleset, argv, env []string, files []uintptr) start {
	failed := func(msg string, err error) start { return start{code: ExitSetup, msg: msg, err: err, listener: -1} }
	if cfg.Flags&Landlock != 0 {
		defer syscall.Close(rs.fd)
	}
	if _, errno := prctl(prSetNoNewPrivs, 1); errno != 0 {
		return failed("the launcher could not set no_new_privs", errno)
	}
	if cfg.Flags&Landlock != 0 {
		if _, _, errno := syscall.RawSyscall(sysLandlockRestrictSelf, uintptr(rs.fd), uintptr(rs.flags), 0); errno != 0 {
			return failed("the kernel refused the Landlock rules", errno)
		}
	}
	// What is kept for want of CAP_SETPCAP, the start line names.
	if err := dropCaps(); err != nil {
		return failed("the launcher could not drop the call's capabilities", err)
	}
	listener := -1
	if cfg.Flags&Seccomp != 0 {
		prog, err := Filter(cfg.Flags)
		if err == nil {
			listener, err = installFilter(prog, cfg.Flags&Supervise != 0)
		}
		if err != nil {
			return failed("the kernel refused the seccomp filter", err)
		}
	}
	pid, err := syscall.ForkExec(cfg.Program, argv, &syscall.ProcAttr{Env: env, Files: files})
	if err != nil {
		if listener >= 0 {
			syscall.Close(listener)
		}
		return start{code: ExitNotFound, msg: "cannot run " + cfg.Program, err: err, listener: -1}
	}
	return start{pid: pid, listener: listener}
}

// ruleset is the Landlock ruleset peal sent, and the flags to apply it
// with.
type ruleset struct {
	fd    int
	flags uint32
}

var errNoRuleset = errors.New("peal sent no ruleset")

// recvRuleset waits for peal's MsgRuleset on the control socket.
func recvRuleset(ctl int) (ruleset, error) {
	buf := make([]byte, 64)
	oob := make([]byte, syscall.CmsgSpace(4*4))
	for {
		n, oobn, _, _, err := syscall.Recvmsg(ctl, buf, oob, syscall.MSG_CMSG_CLOEXEC)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return ruleset{}, err
		}
		var fds []int
		if msgs, err := syscall.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for i := range msgs {
				if r, err := syscall.ParseUnixRights(&msgs[i]); err == nil {
					fds = append(fds, r...)
				}
			}
		}
		flags, ok := int64(0), false
		if n > 0 && buf[0] == MsgRuleset {
			flags, ok = atoi(string(buf[1:n]))
		}
		if !ok || flags < 0 || flags > 1<<32-1 || len(fds) != 1 {
			for _, fd := range fds {
				syscall.Close(fd)
			}
			return ruleset{}, errNoRuleset
		}
		return ruleset{fd: fds[0], flags: uint32(flags)}, nil
	}
}

// cmdline is the launcher's own arguments, which are the program's.
func cmdline() ([]string, error) {
	b, err := readFile("/proc/self/cmdline")
	if err != nil {
		return nil, err
	}
	var argv []string
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != 0 {
			i++
		}
		argv = append(argv, string(b[:i]))
		if i < len(b) {
			i++
		}
		b = b[i:]
	}
	return argv, nil
}

// reap waits for every process of the call, telling peal when the
// program exits, until none is left; it returns the program's exit code.
func reap(program int, ctl int) int {
	code := 0
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return code // ECHILD: nothing is left
		}
		if pid != program {
			continue
		}
		send(ctl, MsgExited, string(itoa(nil, int64(ws))), nil)
		switch {
		case ws.Exited():
			code = ws.ExitStatus()
		case ws.Signaled():
			code = 128 + int(ws.Signal())
		}
	}
}

// Descendants lists the processes below pid, as /proc shows them: each
// thread's children, then theirs.
func Descendants(pid int) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		dir := "/proc/" + string(itoa(nil, int64(p))) + "/task/"
		for _, t := range readDirNames(dir) {
			b, err := readFile(dir + t + "/children")
			if err != nil {
				continue
			}
			for len(b) > 0 {
				i := 0
				for i < len(b) && b[i] != ' ' && b[i] != '\n' {
					i++
				}
				if c, ok := atoi(string(b[:i])); ok && c > 0 {
					out = append(out, int(c))
					queue = append(queue, int(c))
				}
				if i < len(b) {
					i++
				}
				b = b[i:]
			}
		}
	}
	return out
}

// readFile reads a small file of /proc.
func readFile(path string) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := syscall.Read(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return out, err
		}
		if n <= 0 {
			return out, nil
		}
		out = append(out, buf[:n]...)
	}
}

// readDirNames lists the names in a folder of /proc.
func readDirNames(dir string) []string {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer syscall.Close(fd)
	var names []string
	buf := make([]byte, 8192)
	for {
		n, err := syscall.ReadDirent(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return names
		}
		_, _, names = syscall.ParseDirent(buf[:n], -1, names)
	}
}

// send writes one message, with fds, to peal.
func send(ctl int, kind byte, text string, fds []int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	return syscall.Sendmsg(ctl, append([]byte{kind}, text...), oob, nil, syscall.MSG_NOSIGNAL)
}
