package confine

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"peal/confine/launch"
)

// peal's side of the launcher (package launch): peal builds the call's
// Landlock ruleset itself, so that a path that cannot be used fails the
// call in peal, with its key, before anything starts; it hands the
// launcher its end of the control socket and starts it in the namespaces
// this machine allows, listing the folders the access narrows and building
// the ruleset meanwhile, which it then sends the launcher. Once the launcher has started the program, peal serves what it
// handed over: the seccomp listener (every connect of the call, decided
// and made by peal) and the listeners of the call's network namespace (the
// proxy, and the loopback ports the call may reach, bridged to peal's).

// Access rights of each kind of rule.
const (
	readFileRights  = ll.AccessFSExecute | ll.AccessFSReadFile
	readDirRights   = readFileRights | ll.AccessFSReadDir
	writeFileRights = readFileRights | ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev
)

// launcher makes cmd start as the launcher of its program under pol, with
// what sup enforces.
func (l *Launch) launcher(cmd *exec.Cmd, c *Call, pol Access, sup Support) error {
	cfg := launch.Config{Program: cmd.Path, Extra: len(cmd.ExtraFiles)}
	if sup.Files {
		// What fails in the access fails here; the rest of the expansion
		// (listing the folders it narrows) and the ruleset (an open and a
		// rule per path) are made while the launcher starts, which waits
		// for them (Wait sends the ruleset).
		x, err := check(pol, OS)
		if err != nil {
			return err
		}
		built := make(chan builtRuleset, 1)
		go func() {
			llc, rules := rulesOf(x.plan(), pol.TCP, sup)
			fd, flags, err := llc.BestEffort().NewRulesetFD(rules...)
			switch {
			case err != nil:
				err = fmt.Errorf("confine: cannot build the Landlock rules: %w", err)
			case fd < 0:
				err = errNoRules
			}
			built <- builtRuleset{fd: fd, flags: flags, err: err}
		}()
		l.ruleset = built
		cfg.Flags |= launch.Landlock
	}
	if sup.Seccomp {
		cfg.Flags |= launch.Seccomp
		if sup.Supervise {
			cfg.Flags |= launch.Supervise
		}
	}
	if sup.PIDNamespace {
		cfg.Flags |= launch.Init | launch.IPC | launch.UTS
	} else {
		cfg.Flags |= launch.Subreaper
	}
	l.rules = newNetRules(pol, c.Allow, sup.NetNamespace, doorPorts(l.doors)...)
	// A network namespace made ahead, where peal may (root).
	var netns *os.File
	if sup.NetNamespace {
		cfg.Flags |= launch.Network
		cfg.Ports = l.rules.bridged
		if !sup.UserNamespace && os.Geteuid() == 0 {
			if netns = takeNetns(); netns != nil {
				cfg.Flags |= launch.JoinNetwork
			}
		}
	}
	ctl, theirs, err := controlPair()
	if err != nil {
		if netns != nil {
			madeNetns.letGo(netns)
		}
		return err
	}
	conn, err := net.FileConn(ctl)
	ctl.Close()
	if err != nil {
		theirs.Close()
		if netns != nil {
			madeNetns.letGo(netns)
		}
		return err
	}
	l.ctl, l.flags, l.cmd = conn.(*net.UnixConn), cfg.Flags, cmd
	cfg.Control = 3 + len(cmd.ExtraFiles)
	l.child = []*os.File{theirs}
	cmd.ExtraFiles = append(cmd.ExtraFiles, l.child...)
	if netns != nil {
		// The file after the control socket; peal keeps its own, to use the
		// namespace again once the call is over (recycleNetns).
		cmd.ExtraFiles = append(cmd.ExtraFiles, netns)
		l.netns = netns
	}
	cmd.Env = append(cmd.Env, launch.Env+"="+cfg.Encode())
	cmd.Path = "/proc/self/exe"
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// A session of its own: no terminal. (phase signals the launcher's
	// process group, which the program is in too.)
	cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setpgid = true, false
	nsAttr(cmd.SysProcAttr, sup.PIDNamespace, sup.NetNamespace && netns == nil, sup.UserNamespace)
	return nil
}

// nsAttr makes a child start in the namespaces asked: PID (with a mount
// namespace, for its /proc, and IPC and UTS ones) and network; in a user
// namespace of its own where peal is not root, mapping peal's user and
// group to themselves, the launcher keeping the capabilities it needs to
// set them up, and CAP_SETPCAP to empty its program's bounding set (its
// program gets none).
func nsAttr(a *syscall.SysProcAttr, pid, network, user bool) {
	if pid {
		a.Cloneflags |= unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS
	}
	if network {
		a.Cloneflags |= unix.CLONE_NEWNET
	}
	if a.Cloneflags == 0 || !user {
		return
	}
	a.Cloneflags |= unix.CLONE_NEWUSER
	a.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}}
	a.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}}
	a.GidMappingsEnableSetgroups = false
	a.AmbientCaps = append(a.AmbientCaps, unix.CAP_SETPCAP)
	if network {
		a.AmbientCaps = append(a.AmbientCaps, unix.CAP_NET_ADMIN)
	}
	if pid {
		a.AmbientCaps = append(a.AmbientCaps, unix.CAP_SYS_ADMIN)
	}
}

// controlPair is a control socket: peal's end and the launcher's.
func controlPair() (mine, theirs *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, os.NewSyscallError("socketpair", err)
	}
	return os.NewFile(uintptr(fds[0]), "launch-control"), os.NewFile(uintptr(fds[1]), "launch-control"), nil
}

// recvRaw reads one of the launcher's messages from fd.
func recvRaw(fd int) (kind byte, text string, fds []int, err error) {
	buf := make([]byte, 1024)
	oob := make([]byte, unix.CmsgSpace(4*64))
	for {
		n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, "", nil, err
		}
		return message(buf[:n], oob[:oobn])
	}
}

// message reads a packet of the launcher.
func message(b, oob []byte) (kind byte, text string, fds []int, err error) {
	if len(oob) > 0 {
		cmsgs, err := unix.ParseSocketControlMessage(oob)
		if err == nil {
			for _, m := range cmsgs {
				if r, err := unix.ParseUnixRights(&m); err == nil {
					fds = append(fds, r...)
				}
			}
		}
	}
	if len(b) == 0 {
		closeFDs(fds)
		return 0, "", nil, io.EOF
	}
	return b[0], string(b[1:]), fds, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// recv reads the launcher's next message.
func (l *Launch) recv() (kind byte, text string, fds []int, err error) {
	buf := make([]byte, 1024)
	oob := make([]byte, unix.CmsgSpace(4*64))
	n, oobn, _, _, err := l.ctl.ReadMsgUnix(buf, oob)
	if err != nil {
		return 0, "", nil, err
	}
	return message(buf[:n], oob[:oobn])
}

// Wait, once the launcher has started, sends it the call's Landlock
// ruleset and waits until it has started the program confined (nil) or
// has exited without running it (a *LaunchError). The launcher answers within a few milliseconds. Then
// peal serves the call's connections and network namespace, and hears of
// the program's exit (Done). A launch without a launcher has nothing to
// wait for.
func (l *Launch) Wait() error {
	if l == nil || l.ctl == nil {
		return nil
	}
	l.closeChild()
	if err := l.sendRuleset(); err != nil {
		// The launcher, which waits for the ruleset, ends without running
		// the program.
		l.ctl.Close()
		return err
	}
	kind, text, fds, err := l.recv()
	switch {
	case err != nil:
		return &LaunchError{Msg: "confine: the launcher ended before it started the program"}
	case kind == launch.MsgFailed:
		closeFDs(fds)
		return &LaunchError{Msg: text}
	case kind != launch.MsgStarted:
		closeFDs(fds)
		return &LaunchError{Msg: "confine: the launcher said " + strconv.Quote(string(kind)+text)}
	}
	l.serveHanded(fds)
	if l.netns != nil {
		// Its end says when the namespace is empty again.
		if fd, err := unix.PidfdOpen(l.cmd.Process.Pid, 0); err == nil {
			l.launcherFD = fd
		}
	}
	l.done = make(chan struct{})
	go l.watch()
	return nil
}

// builtRuleset is the call's Landlock ruleset, built, or why it could
// not be.
type builtRuleset struct {
	fd    int
	flags uint32
	err   error
}

// sendRuleset sends the launcher the call's ruleset (with Landlock), once
// built; peal's copy is closed.
func (l *Launch) sendRuleset() error {
	if l.ruleset == nil {
		return nil
	}
	r := <-l.ruleset
	l.ruleset = nil
	if r.err != nil {
		return &LaunchError{Msg: r.err.Error()}
	}
	defer unix.Close(r.fd)
	msg := strconv.AppendUint([]byte{launch.MsgRuleset}, uint64(r.flags), 10)
	if _, _, err := l.ctl.WriteMsgUnix(msg, unix.UnixRights(r.fd), nil); err != nil {
		return &LaunchError{Msg: "confine: the launcher ended before it got the Landlock rules"}
	}
	return nil
}

// dropRuleset closes the call's ruleset should it never be sent.
func (l *Launch) dropRuleset() {
	if l.ruleset == nil {
		return
	}
	if r := <-l.ruleset; r.err == nil {
		unix.Close(r.fd)
	}
	l.ruleset = nil
}

// serveHanded takes up what the launcher handed over: the seccomp
// listener, then the network namespace's sock_diag socket and listeners,
// in this order.
func (l *Launch) serveHanded(fds []int) {
	listener, diag := -1, -1
	if l.flags&launch.Supervise != 0 && len(fds) > 0 {
		listener, fds = fds[0], fds[1:]
	}
	if l.flags&launch.Network != 0 && len(fds) > 0 {
		diag, fds = fds[0], fds[1:]
	}
	switch {
	case listener >= 0:
		l.sup = supervise(listener, l.rules, l.cmd.Process.Pid, diag)
	case diag >= 0:
		unix.Close(diag) // nobody asks it without the supervisor
	}
	if l.flags&launch.Network == 0 {
		closeFDs(fds)
		return
	}
	for i, fd := range fds {
		if i >= len(l.rules.bridged) {
			unix.Close(fd)
			continue
		}
		f := os.NewFile(uintptr(fd), "namespace-listener")
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			continue
		}
		port := l.rules.bridged[i]
		l.mu.Lock()
		l.listeners = append(l.listeners, ln)
		l.mu.Unlock()
		if d := l.door(port); d != nil {
			d.Serve(ln)
		} else {
			go l.bridge(ln, port)
		}
	}
}

// door is the call's door on port, nil if none.
func (l *Launch) door(port uint16) Door {
	for _, d := range l.doors {
		if d.Port() == port {
			return d
		}
	}
	return nil
}

// watch hears of the program's exit, or of the launcher's end.
func (l *Launch) watch() {
	kind, text, fds, err := l.recv()
	closeFDs(fds)
	if err == nil && kind == launch.MsgExited {
		if ws, err := strconv.ParseUint(text, 10, 32); err == nil {
			l.status, l.exited = syscall.WaitStatus(ws), true
		}
	}
	close(l.done)
}

// bridge accepts the call's connections to port in its network namespace
// and joins each to the same port of peal's loopback.
func (l *Launch) bridge(ln net.Listener, port uint16) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			d := net.Dialer{Timeout: 30 * time.Second}
			up, err := d.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
			if err != nil {
				up, err = d.Dial("tcp", net.JoinHostPort("::1", strconv.Itoa(int(port))))
			}
			if err != nil {
				c.Close()
				return
			}
			if !l.track(c, up) {
				return
			}
			defer l.untrack(c, up)
			join(c, up)
		}()
	}
}

// join copies both ways between a and b until both sides are done.
func join(a, b net.Conn) {
	defer a.Close()
	defer b.Close()
	done := make(chan struct{})
	go func() {
		io.Copy(a, b)
		closeWrite(a)
		close(done)
	}()
	io.Copy(b, a)
	closeWrite(b)
	<-done
}

func (l *Launch) track(conns ...net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	if l.conns == nil {
		l.conns = map[net.Conn]struct{}{}
	}
	for _, c := range conns {
		l.conns[c] = struct{}{}
	}
	return true
}

func (l *Launch) untrack(conns ...net.Conn) {
	l.mu.Lock()
	for _, c := range conns {
		delete(l.conns, c)
	}
	l.mu.Unlock()
}

// closeServed stops what peal serves for the call.
func (l *Launch) closeServed() {
	l.mu.Lock()
	l.closed = true
	for _, ln := range l.listeners {
		ln.Close()
	}
	for c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	if l.sup != nil {
		l.sup.close()
	}
	if l.ctl != nil {
		l.ctl.Close()
	}
	if l.netns != nil {
		go recycleNetns(l.netns, l.launcherFD, l.flags&launch.Init != 0)
		l.netns, l.launcherFD = nil, -1
	}
}

// rulesOf is the Landlock configuration and rules of a plan, at the
// kernel's ABI: every file-system right and IPC scope the kernel has,
// TCP when asked. Renames between folders need the "refer" right, which
// ABI 1 lacks; asking for it there would make the library enforce nothing,
// so it is asked for only from ABI 2.
func rulesOf(plan Plan, tcp *TCP, sup Support) (landlock.Config, []landlock.Rule) {
	cfg := landlock.Config{HandledAccessFS: landlock.V11.HandledAccessFS, Scoped: landlock.V11.Scoped}
	// No call makes a device node, even in its tree: one of the disk
	// would read what the rules keep out.
	writeDir := landlock.V11.HandledAccessFS &^ (ll.AccessFSMakeChar | ll.AccessFSMakeBlock)
	if sup.ABI < referABI {
		writeDir &^= ll.AccessFSRefer
		cfg.HandledAccessFS &^= ll.AccessFSRefer
	}
	var groups [5][]string // write dir, write file, read dir, read file, write dir as data
	for _, r := range plan.Rules {
		i := 0
		if !r.Write {
			i = 2
		}
		if !r.Dir {
			i++
		} else if r.Write && r.Data {
			i = 4
		}
		groups[i] = append(groups[i], r.Path)
	}
	// An entry that vanished since the expansion listed it grants nothing
	// (it cannot be granted more than it had): another process may remove
	// files in a narrowed folder (/tmp) at any time.
	var rules []landlock.Rule
	dataDir := writeDir &^ (ll.AccessFSMakeFifo | ll.AccessFSMakeSock)
	for i, access := range []landlock.AccessFSSet{writeDir, writeFileRights, readDirRights, readFileRights, dataDir} {
		if len(groups[i]) > 0 {
			rules = append(rules, landlock.PathAccess(access, groups[i]...).IgnoreIfMissing())
		}
	}
	if tcp != nil {
		cfg.HandledAccessNet = ll.AccessNetBindTCP | ll.AccessNetConnectTCP
		for _, p := range tcp.Connect {
			rules = append(rules, landlock.ConnectTCP(p))
		}
		for _, p := range tcp.Bind {
			rules = append(rules, landlock.BindTCP(p))
		}
	}
	return cfg, rules
}
