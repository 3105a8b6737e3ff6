//go:build linux

package launch

import (
	"errors"
	"syscall"
	"unsafe"
)

// The filter every confined call runs under. Its rules, checked on the
// system call's number and arguments (registers: seccomp cannot read the
// memory they point at):
//
//   - socket(): UNIX sockets but datagram ones, netlink, and TCP (stream
//     sockets of IPv4 and IPv6 with protocol 0 or TCP) are made; UDP, raw
//     and packet sockets, and every other family, are refused (EACCES); so
//     are other stream protocols (SCTP, MPTCP: EPROTONOSUPPORT, on which
//     programs fall back to TCP). A datagram UNIX socket is refused
//     because it names its peer by path in every send (sendto, sendmsg),
//     where the filter cannot see it; socketpair() is refused datagram
//     pairs for the same reason, and makes stream and seqpacket ones.
//   - connect(): handed to peal (with Supervise), which reads the address
//     once, decides, and connects the socket itself.
//   - sendto(), sendmsg(), sendmmsg() with MSG_FASTOPEN (a TCP connection
//     opened by its first send, which is no connect()): refused.
//   - io_uring: refused (ENOSYS, on which programs fall back to plain
//     system calls): its operations open and connect sockets without
//     system calls.
//   - the 32-bit ABI: no socket at all; the x32 ABI: nothing (ENOSYS).
//
// Everything else is allowed: the filter decides what leaves the call,
// Landlock what it touches.

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
	retENOSYS  = seccompRetErrno | enosys
	retNoProto = seccompRetErrno | eprotonosupport
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

// Filter is the call's filter; supervise hands connect() to peal.
func Filter(supervise bool) ([]SockFilter, error) {
	if !seccompReady {
		return nil, errNoFilter
	}
	var a asm
	a.ld(offArch)
	a.jeq(NativeArch, "native", "")
	if hasCompat {
		a.jeq(compatArch, "compat", "")
	}
	a.ret(retENOSYS)

	a.label("native")
	a.ld(offNr)
	if x32Bit != 0 {
		a.jge(x32Bit, "enosys", "")
	}
	a.jeq(sysSocket, "socket", "")
	a.jeq(sysSocketpair, "socketpair", "")
	a.jeq(sysConnect, "connect", "")
	a.jeq(sysSendto, "flags3", "")
	a.jeq(sysSendmmsg, "flags3", "")
	a.jeq(sysSendmsg, "flags2", "")
	a.jeq(sysIoUringSetup, "enosys", "")
	a.jeq(sysIoUringEnter, "enosys", "")
	a.jeq(sysIoUringRegister, "enosys", "")
	a.ret(retAllow)

	a.label("socket")
	a.ld(offArg(0))
	a.jeq(afUnix, "unixtype", "")
	a.jeq(afNetlink, "allow", "")
	a.jeq(afInet, "inet", "")
	a.jeq(afInet6, "inet", "eacces")
	a.label("inet")
	a.ld(offArg(1))
	a.and(sockTypeMask)
	a.jeq(sockStream, "", "eacces")
	a.ld(offArg(2))
	a.jeq(0, "allow", "")
	a.jeq(ipprotoTCP, "allow", "noproto")

	a.label("socketpair")
	a.ld(offArg(0))
	a.jeq(afUnix, "unixtype", "allow")
	a.label("unixtype")
	a.ld(offArg(1))
	a.and(sockTypeMask)
	a.jeq(sockDgram, "eacces", "allow")

	a.label("connect")
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

	if hasCompat {
		a.label("compat")
		a.ld(offNr)
		for _, nr := range compatNetwork {
			a.jeq(nr, "eacces", "")
		}
		a.jeq(sysIoUringSetup, "enosys", "")
		a.jeq(sysIoUringEnter, "enosys", "")
		a.jeq(sysIoUringRegister, "enosys", "")
		a.ret(retAllow)
	}

	a.label("allow")
	a.ret(retAllow)
	a.label("eacces")
	a.ret(retEACCES)
	a.label("enosys")
	a.ret(retENOSYS)
	a.label("noproto")
	a.ret(retNoProto)
	return a.assemble()
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
	err    error
}

type jump struct {
	at     int
	jt, jf string
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
func (a *asm) jge(k uint32, jt, jf string)  { a.cond(bpfJgeK, k, jt, jf) }
func (a *asm) jset(k uint32, jt, jf string) { a.cond(bpfJsetK, k, jt, jf) }

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
	offset := func(from int, to string) (uint8, error) {
		if to == "" {
			return 0, nil
		}
		at, ok := a.labels[to]
		if !ok {
			return 0, errors.New("seccomp: no label " + to)
		}
		d := at - from - 1
		if d < 0 || d > 255 {
			return 0, errors.New("seccomp: jump to " + to + " out of reach")
		}
		return uint8(d), nil
	}
	for _, j := range a.jumps {
		var err error
		if a.ins[j.at].Jt, err = offset(j.at, j.jt); err != nil {
			return nil, err
		}
		if a.ins[j.at].Jf, err = offset(j.at, j.jf); err != nil {
			return nil, err
		}
	}
	return a.ins, nil
}
