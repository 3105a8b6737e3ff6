package confine

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"peal/confine/launch"
)

func probe() Support {
	var s Support
	abi, err := ll.LandlockGetABIVersion()
	switch {
	case errors.Is(err, syscall.ENOSYS):
		s = supportOf(0, "this Linux has no Landlock (it needs Linux 5.13 built with Landlock)")
	case errors.Is(err, syscall.EOPNOTSUPP):
		s = supportOf(0, "Landlock is disabled in this Linux (add landlock to the lsm= boot parameter)")
	case err != nil:
		s = supportOf(0, "Landlock cannot be asked for its version: "+err.Error())
	default:
		s = supportOf(abi, "")
		s.CapsKept = keptCaps()
	}
	s.Seccomp, s.Supervise, s.SeccompWhy = probeSeccomp()
	var pid bool
	pid, s.NetNamespaceAllowed, s.UserNamespace, s.NamespaceWhy = probeNamespaces()
	s.PIDNamespace, s.IPCNamespace, s.UTSNamespace = pid, pid, pid
	s.NetNamespace = s.NetNamespaceAllowed
	return s
}

// probeSeccomp tells whether calls can run under the filter, and whether
// peal can decide their connections: that takes seccomp's user
// notifications (Linux 5.0) and pidfd_getfd (Linux 5.6), and the right to
// take a descendant's socket (which Yama's ptrace_scope 3 refuses).
func probeSeccomp() (filter, supervise bool, why string) {
	if _, err := launch.Filter(launch.Supervise); err != nil {
		return false, false, err.Error()
	}
	if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil {
		return false, false, "this Linux has no seccomp"
	}
	action := uint32(unix.SECCOMP_RET_USER_NOTIF)
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action))); errno != 0 {
		return true, false, "seccomp has no user notifications (Linux 5.0)"
	}
	pidfd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return true, false, "no pidfd (Linux 5.3): " + err.Error()
	}
	defer unix.Close(pidfd)
	fd, err := unix.PidfdGetfd(pidfd, 2, 0)
	switch {
	case errors.Is(err, unix.ENOSYS):
		return true, false, "no pidfd_getfd (Linux 5.6)"
	case err == nil:
		unix.Close(fd)
	case !errors.Is(err, unix.EBADF):
		// A container's own filter may refuse it.
		return true, false, "pidfd_getfd is refused: " + err.Error()
	}
	// The supervisor reads a call's address with process_vm_readv.
	var b, probe [1]byte
	local := []unix.Iovec{{Base: &b[0]}}
	local[0].SetLen(1)
	remote := []unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&probe[0])), Len: 1}}
	if _, err := unix.ProcessVMReadv(os.Getpid(), local, remote, 0); err != nil {
		return true, false, "process_vm_readv is refused: " + err.Error()
	}
	scope, _ := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	switch strings.TrimSpace(string(scope)) {
	case "3":
		return true, false, "Yama's ptrace_scope is 3: peal may not take a call's socket"
	case "2":
		if !effectiveCap(unix.CAP_SYS_PTRACE) {
			return true, false, "Yama's ptrace_scope is 2 and peal lacks CAP_SYS_PTRACE: it may not take a call's socket"
		}
	}
	return true, true, ""
}

func effectiveCap(c int) bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	return unix.Capget(&hdr, &data[0]) == nil && data[c/32].Effective&(1<<(c%32)) != 0
}

// probeNamespaces starts the launcher, with nothing to run, in the
// namespaces a call would get, to learn which the system allows: PID
// (with its mount namespace and /proc, IPC and UTS) and network together,
// else network alone, else PID alone; as root in peal's own user
// namespace, else in a user namespace of the call's.
func probeNamespaces() (pid, net, user bool, why string) {
	users := []bool{true}
	if os.Geteuid() == 0 {
		users = []bool{false, true}
	}
	var first error
	for _, t := range []struct{ pid, net bool }{{true, true}, {false, true}, {true, false}} {
		for _, u := range users {
			err := probeLauncher(t.pid, t.net, u)
			if err == nil {
				if first != nil {
					why = namespaceWhy(first, u)
				}
				return t.pid, t.net, u, why
			}
			if first == nil {
				first = err
			}
		}
	}
	return false, false, false, namespaceWhy(first, users[len(users)-1])
}

// namespaceWhy says why the system refused the namespaces.
func namespaceWhy(err error, user bool) string {
	if (user && errors.Is(err, unix.EPERM)) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EACCES) {
		for _, s := range []struct{ file, want, why string }{
			{"/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1", "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)"},
			{"/proc/sys/kernel/unprivileged_userns_clone", "0", "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0)"},
			{"/proc/sys/user/max_user_namespaces", "0", "user namespaces are disabled (user.max_user_namespaces = 0)"},
		} {
			if b, e := os.ReadFile(s.file); e == nil && strings.TrimSpace(string(b)) == s.want {
				return s.why
			}
		}
	}
	var le *LaunchError
	if errors.As(err, &le) {
		return le.Msg
	}
	return "the kernel refused them: " + err.Error()
}

// probeLauncher runs the launcher in probe mode in the namespaces asked.
func probeLauncher(pid, net, user bool) error {
	cfg := launch.Config{Flags: launch.Probe}
	if pid {
		cfg.Flags |= launch.Init | launch.IPC | launch.UTS
	}
	if net {
		cfg.Flags |= launch.Network
	}
	ctl, theirs, err := controlPair()
	if err != nil {
		return err
	}
	defer ctl.Close()
	cfg.Control = 3
	attr := &syscall.SysProcAttr{Setsid: true}
	nsAttr(attr, pid, net, user)
	// A launcher stuck in its set-up would hold the probe: it answers in
	// milliseconds, and is given five seconds.
	unix.SetsockoptTimeval(int(ctl.Fd()), unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5})
	p, err := os.StartProcess("/proc/self/exe", []string{"peal-launch-probe"}, &os.ProcAttr{
		Env: []string{launch.Env + "=" + cfg.Encode()}, Files: []*os.File{nil, nil, os.Stderr, theirs}, Sys: attr})
	theirs.Close()
	if err != nil {
		return unwrapSyscall(err)
	}
	kind, text, _, err := recvRaw(int(ctl.Fd()))
	if err != nil || kind != launch.MsgStarted {
		p.Kill()
	}
	p.Wait()
	switch {
	case err != nil:
		return err
	case kind == launch.MsgFailed:
		return &LaunchError{Msg: text}
	case kind != launch.MsgStarted:
		return errors.New("the launcher answered " + strconv.Quote(string(kind)))
	}
	return nil
}

// unwrapSyscall is the errno beneath a failed start.
func unwrapSyscall(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}
