//go:build linux

package launch

import (
	"errors"
	"syscall"
	"unsafe"
)

// The filter every confined call runs under is an allow list: each system
// call a program may make is listed (syscalls, in syscalls_linux.go), and
// one nobody listed is refused. What it allows was measured with the real
// agent CLIs (Node and Rust programs, their shell tools) and the common
// toolchains (Go's build and tests, npm installing from a tarball, a Python
// virtual environment and pip, git) under strace: every call they make is
// listed, and none of those refused. The rules, on the system call's number and
// arguments (registers: seccomp cannot read the memory they point at):
//
//   - socket(): UNIX stream and seqpacket sockets, TCP (stream sockets of
//     IPv4 and IPv6, protocol 0 or TCP), and NETLINK_ROUTE (the interfaces
//     and addresses: npm, glibc's getaddrinfo; in the call's network
//     namespace, its loopback only). Everything else is refused (EACCES),
//     whatever its flags: UDP, raw and packet sockets, datagram and raw UNIX
//     sockets (a datagram names its peer by path in every send, out of the
//     filter's sight: the kernel makes a raw UNIX socket a datagram one),
//     every other netlink protocol (the socket lists of sock_diag, the
//     messages of NETLINK_USERSOCK between processes), every other family;
//     other stream protocols (SCTP, MPTCP) get EPROTONOSUPPORT, on which
//     programs fall back to TCP. socketpair() makes UNIX stream and
//     seqpacket pairs only.
//   - connect(): handed to peal (with Supervise), which reads the address
//     once, decides, and connects the socket itself.
//   - listen(): without a network namespace of the call's own, handed to
//     peal too, which lets a TCP socket listen only on a loopback address:
//     listen() on an unbound socket would pick a port on every address of
//     the machine (no bind(), which Landlock checks).
//   - sendto(), sendmsg(), sendmmsg() with MSG_FASTOPEN (a TCP connection
//     opened by its first send, which is no connect()): refused.
//   - clone() and unshare() asking for a new namespace, setns(), mount()
//     and the other mount calls: refused (EPERM); clone3(), whose flags are
//     in memory, gets ENOSYS, on which the C library falls back to clone().
//   - System V IPC and POSIX message queues: allowed in the call's own IPC
//     namespace, refused (EPERM) without one.
//   - What reaches other processes or the kernel itself is refused
//     (EPERM): ptrace, process_vm_readv and _writev, pidfd_getfd, kcmp,
//     keyctl, add_key, request_key, bpf, perf_event_open, userfaultfd,
//     fanotify, open_by_handle_at, the kernel's modules, kexec, the clock,
//     swap, reboot, quotas, syslog.
//   - A set-user-ID or set-group-ID bit in a mode: refused (EPERM) in
//     chmod(), fchmod(), fchmodat(), fchmodat2(), open(), openat(), creat(),
//     mknod() and mknodat(), so that no file a call made runs with its
//     owner's rights once the call is over (a file it writes in a folder
//     of the user's stays there as it left it). openat2(), whose mode is in
//     memory, gets ENOSYS, on which programs fall back to openat().
//   - io_uring: refused (ENOSYS, on which programs fall back to plain
//     system calls): its operations open and connect sockets without
//     system calls.
//   - Every other ABI than the native one (the 32-bit ABI a program may
//     still enter, x32): nothing (ENOSYS). A 32-bit program does not run
//     confined.

// sysRule is what the filter does with a system call.
type sysRule uint8

const (
	sysAllow      sysRule = iota
	sysRefuse             // EPERM
	sysMissing            // ENOSYS
	sysSocket             // by family, type and protocol
	sysSocketpair         // UNIX stream and seqpacket pairs
	sysConnect            // peal decides (Supervise)
	sysListen             // peal decides without a network namespace
	sysSendFlags3         // no MSG_FASTOPEN in the fourth argument
	sysSendFlags2         // no MSG_FASTOPEN in the third argument
	sysClone              // no namespace flag
	sysUnshare            // no namespace flag
	sysIPC                // in the call's IPC namespace only
	sysMode1              // no set-user-ID or set-group-ID bit in the mode, the second argument
	sysMode2              // … the third
	sysMode3              // … the fourth
)

// syscallRule is one system call of the filter.
type syscallRule struct {
	name         string
	amd64, arm64 int16
	rule         sysRule
}

// Offsets in struct seccomp_data; the arguments' low halves on a
// little-endian machine (both of the supported ones).
const (
	offNr   = 0
	offArch = 4
)

func offArg(i int) uint32 { return 16 + 8*uint32(i) }

const (
	retAllow   = seccompRetAllow
	retNotify  = seccompRetUserNotif
	retEACCES  = seccompRetErrno | eacces
	retEPERM   = seccompRetErrno | eperm
	retENOSYS  = seccompRetErrno | enosys
	retNoProto = seccompRetErrno | eprotonosupport
)

// The clone flags that make namespaces: clone()'s (whose low byte is the
// exit signal), and unshare()'s, which also takes CLONE_NEWTIME.
const (
	cloneNamespaces   = cloneNewNS | cloneNewCgroup | cloneNewUTS | cloneNewIPC | cloneNewUser | cloneNewPID | cloneNewNet
	unshareNamespaces = cloneNamespaces | cloneNewTime
)

// SockFilter is one instruction of a classic BPF program (struct
// sock_filter).
type SockFilter struct {
	Code uint16
	Jt   uint8
	Jf   uint8
	K    uint32
}

var errNoFilter = errors.New("seccomp filters are made for amd64 and arm64 only")

// Filter is the call's filter for a launcher of these flags: Supervise
// hands connect() (and, without Network, listen()) to peal; IPC allows
// System V IPC and POSIX message queues.
func Filter(flags uint32) ([]SockFilter, error) {
	if !seccompReady {
		return nil, errNoFilter
	}
	supervise := flags&Supervise != 0
	var a asm
	a.ld(offArch)
	a.jeq(NativeArch, "native", "")
	a.ret(retENOSYS)

	a.label("native")
	a.ld(offNr)
	if x32Bit != 0 {
		// The x32 ABI: its numbers have x32Bit set.
		a.ins = append(a.ins, SockFilter{Code: bpfJgeK, Jt: 0, Jf: 1, K: x32Bit})
		a.ret(retENOSYS)
	}
	a.tree(ranges(flags))

	a.label("socket")
	a.ld(offArg(0))
	a.jeq(afUnix, "unixtype", "")
	a.jeq(afInet, "inet", "")
	a.jeq(afInet6, "inet", "")
	a.jeq(afNetlink, "", "eacces")
	a.ld(offArg(2))
	a.jeq(netlinkRoute, "", "eacces")
	a.ld(offArg(1))
	a.and(sockTypeMask)
	a.jeq(sockRaw, "allow", "")
	a.jeq(sockDgram, "allow", "eacces")
	a.label("inet")
	a.ld(offArg(1))
	a.and(sockTypeMask)
	a.jeq(sockStream, "", "eacces")
	a.ld(offArg(2))
	a.jeq(0, "allow", "")
	a.jeq(ipprotoTCP, "allow", "noproto")

	a.label("socketpair")
	a.ld(offArg(0))
	a.jeq(afUnix, "", "eacces")
	a.label("unixtype")
	a.ld(offArg(1))
	a.and(sockTypeMask)
	a.jeq(sockStream, "allow", "")
	a.jeq(sockSeqpacket, "allow", "eacces")

	a.label("notify")
	if supervise {
		a.ret(retNotify)
	} else {
		a.ret(retAllow)
	}

	a.label("flags3")
	a.ld(offArg(3))
	a.jset(msgFastopen, "eacces", "allow")
	a.label("flags2")
	a.ld(offArg(2))
	a.jset(msgFastopen, "eacces", "allow")

	a.label("clone")
	a.ld(offArg(0))
	a.jset(cloneNamespaces, "eperm", "allow")
	a.label("unshare")
	a.ld(offArg(0))
	a.jset(unshareNamespaces, "eperm", "allow")

	// A file's mode never gets a set-user-ID or set-group-ID bit: the
	// file would run with its owner's rights (root's, where peal runs as
	// root) for anyone, once the call is over.
	for i, l := range []string{"mode1", "mode2", "mode3"} {
		a.label(l)
		a.ld(offArg(i + 1))
		a.jset(setIDBits, "eperm", "allow")
	}

	a.label("allow")
	a.ret(retAllow)
	a.label("eacces")
	a.ret(retEACCES)
	a.label("eperm")
	a.ret(retEPERM)
	a.label("enosys")
	a.ret(retENOSYS)
	a.label("noproto")
	a.ret(retNoProto)
	return a.assemble()
}

// span is a run of system call numbers the filter treats alike: from lo
// up to the next span's lo, to label.
type span struct {
	lo    uint32
	label string
}

// ranges are the filter's spans of system call numbers, for a launcher of
// flags, in order, the first from 0: a number nobody listed is "enosys".
func ranges(flags uint32) []span {
	max := int16(-1)
	for _, s := range syscalls {
		max = maxNr(max, nativeNr(s))
	}
	labels := make([]string, int(max)+2)
	for i := range labels {
		labels[i] = "enosys"
	}
	for _, s := range syscalls {
		if nr := nativeNr(s); nr >= 0 {
			labels[nr] = labelOf(s.rule, flags)
		}
	}
	var out []span
	for nr, l := range labels {
		if len(out) == 0 || out[len(out)-1].label != l {
			out = append(out, span{uint32(nr), l})
		}
	}
	return out
}

func maxNr(a, b int16) int16 {
	if b > a {
		return b
	}
	return a
}

// labelOf is where the filter goes for a system call of rule r.
func labelOf(r sysRule, flags uint32) string {
	switch r {
	case sysAllow:
		return "allow"
	case sysRefuse:
		return "eperm"
	case sysSocket:
		return "socket"
	case sysSocketpair:
		return "socketpair"
	case sysConnect:
		return "notify"
	case sysListen:
		if flags&Network != 0 {
			return "allow" // in the call's own namespace: no port of the machine's
		}
		return "notify"
	case sysSendFlags3:
		return "flags3"
	case sysSendFlags2:
		return "flags2"
	case sysClone:
		return "clone"
	case sysUnshare:
		return "unshare"
	case sysIPC:
		if flags&IPC != 0 {
			return "allow"
		}
		return "eperm"
	case sysMode1:
		return "mode1"
	case sysMode2:
		return "mode2"
	case sysMode3:
		return "mode3"
	}
	return "enosys"
}

// installFilter installs prog on the calling thread (which must have
// no_new_privs) and returns the listener of its notifications, or -1
// without supervise.
func installFilter(prog []SockFilter, supervise bool) (int, error) {
	fprog := struct {
		len    uint16
		filter *SockFilter
	}{uint16(len(prog)), &prog[0]}
	var flags uintptr
	if supervise {
		flags = seccompFlagNewListener
	}
	r, _, errno := syscall.RawSyscall(sysSeccomp, seccompSetModeFilter, flags, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return -1, errno
	}
	if !supervise {
		return -1, nil
	}
	syscall.CloseOnExec(int(r))
	return int(r), nil
}

// UserNotifications tells whether seccomp can hand system calls to a
// supervisor here (Linux 5.0).
func UserNotifications() bool {
	action := uint32(retNotify)
	_, _, errno := syscall.Syscall(sysSeccomp, seccompGetActionAvail, 0, uintptr(unsafe.Pointer(&action)))
	return seccompReady && errno == 0
}

// asm assembles a classic BPF program with named, forward-only jump
// targets ("" is the next instruction).
type asm struct {
	ins    []SockFilter
	jumps  []jump
	labels map[string]int
	trees  int
	err    error
}

type jump struct {
	at     int
	jt, jf string
	always bool // BPF_JA: its 32-bit offset is in K
}

func (a *asm) ld(off uint32) {
	a.ins = append(a.ins, SockFilter{Code: bpfLdWAbs, K: off})
}

func (a *asm) and(k uint32) {
	a.ins = append(a.ins, SockFilter{Code: bpfAndK, K: k})
}

func (a *asm) ret(k uint32) {
	a.ins = append(a.ins, SockFilter{Code: bpfRetK, K: k})
}

func (a *asm) cond(op uint16, k uint32, jt, jf string) {
	a.jumps = append(a.jumps, jump{at: len(a.ins), jt: jt, jf: jf})
	a.ins = append(a.ins, SockFilter{Code: op, K: k})
}

func (a *asm) jeq(k uint32, jt, jf string)  { a.cond(bpfJeqK, k, jt, jf) }
func (a *asm) jset(k uint32, jt, jf string) { a.cond(bpfJsetK, k, jt, jf) }

// ja jumps to label, however far.
func (a *asm) ja(label string) {
	a.jumps = append(a.jumps, jump{at: len(a.ins), jt: label, always: true})
	a.ins = append(a.ins, SockFilter{Code: bpfJa})
}

// tree goes, on the system call's number (loaded), to the label of its
// span: a binary search, a few comparisons for any number. A comparison
// jumps over the one unconditional jump to its upper half, which may lie
// beyond a conditional jump's reach.
func (a *asm) tree(spans []span) {
	if len(spans) == 1 {
		switch spans[0].label {
		case "allow":
			a.ret(retAllow)
		case "eperm":
			a.ret(retEPERM)
		case "enosys":
			a.ret(retENOSYS)
		default:
			a.ja(spans[0].label)
		}
		return
	}
	mid := len(spans) / 2
	a.trees++
	upper := "tree" + string(itoa(nil, int64(a.trees)))
	a.ins = append(a.ins, SockFilter{Code: bpfJgeK, Jt: 0, Jf: 1, K: spans[mid].lo})
	a.ja(upper)
	a.tree(spans[:mid])
	a.label(upper)
	a.tree(spans[mid:])
}

func (a *asm) label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	if _, dup := a.labels[name]; dup {
		a.err = errors.New("seccomp: label " + name + " twice")
	}
	a.labels[name] = len(a.ins)
}

func (a *asm) assemble() ([]SockFilter, error) {
	if a.err != nil {
		return nil, a.err
	}
	offset := func(from int, to string) (int, error) {
		if to == "" {
			return 0, nil
		}
		at, ok := a.labels[to]
		if !ok {
			return 0, errors.New("seccomp: no label " + to)
		}
		if d := at - from - 1; d >= 0 {
			return d, nil
		}
		return 0, errors.New("seccomp: jump back to " + to)
	}
	for _, j := range a.jumps {
		jt, err := offset(j.at, j.jt)
		if err != nil {
			return nil, err
		}
		if j.always {
			a.ins[j.at].K = uint32(jt)
			continue
		}
		jf, err := offset(j.at, j.jf)
		if err != nil {
			return nil, err
		}
		if jt > 255 || jf > 255 {
			return nil, errors.New("seccomp: a jump out of reach")
		}
		a.ins[j.at].Jt, a.ins[j.at].Jf = uint8(jt), uint8(jf)
	}
	if len(a.ins) > bpfMaxInsns {
		return nil, errors.New("seccomp: the filter is too long")
	}
	return a.ins, nil
}
