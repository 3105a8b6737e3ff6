package launch

import (
	"encoding/binary"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// run is the kernel's classic BPF interpreter, as far as the filter uses
// it, run on one system call: what the filter returns.
func run(t *testing.T, prog []SockFilter, arch uint32, nr int, args ...uint64) uint32 {
	t.Helper()
	var data [64]byte
	binary.LittleEndian.PutUint32(data[0:], uint32(nr))
	binary.LittleEndian.PutUint32(data[4:], arch)
	for i, a := range args {
		binary.LittleEndian.PutUint64(data[16+8*i:], a)
	}
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case bpfLdWAbs:
			acc = binary.LittleEndian.Uint32(data[in.K:])
		case bpfAndK:
			acc &= in.K
		case bpfRetK:
			return in.K
		case bpfJa:
			pc += int(in.K)
		case bpfJeqK, bpfJgeK, bpfJsetK:
			var ok bool
			switch in.Code {
			case bpfJeqK:
				ok = acc == in.K
			case bpfJgeK:
				ok = acc >= in.K
			default:
				ok = acc&in.K != 0
			}
			if ok {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		default:
			t.Fatalf("instruction %d: code %#x", pc, in.Code)
		}
	}
	t.Fatal("the program ran off its end")
	return 0
}

// TestFilterDecides: what the filter answers each system call, by its
// number and arguments, for each kind of launch.
func TestFilterDecides(t *testing.T) {
	if !seccompReady {
		t.Skip("no filter is made on " + runtime.GOARCH)
	}
	const (
		allow  = retAllow
		notify = retNotify
		eacces = retEACCES
		eperm  = retEPERM
		enosys = retENOSYS
		proto  = retNoProto
	)
	type call struct {
		name string
		nr   int
		args []uint64
	}
	c := func(name string, nr int, args ...uint64) call { return call{name, nr, args} }
	threads := uint64(unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS)
	for _, tc := range []struct {
		call  call
		flags uint32
		want  uint32
	}{
		{c("read", unix.SYS_READ, 0), Supervise, allow},
		{c("unix stream socket", unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK), Supervise, allow},
		{c("unix seqpacket socket", unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_SEQPACKET), Supervise, allow},
		{c("unix datagram socket", unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_DGRAM), Supervise, eacces},
		{c("unix raw socket", unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_RAW|unix.SOCK_CLOEXEC), Supervise, eacces},
		{c("TCP", unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0), Supervise, allow},
		{c("TCP by its protocol", unix.SYS_SOCKET, unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_TCP), Supervise, allow},
		{c("MPTCP", unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP), Supervise, proto},
		{c("UDP", unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_DGRAM, 0), Supervise, eacces},
		{c("raw IP", unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP), Supervise, eacces},
		{c("packet", unix.SYS_SOCKET, unix.AF_PACKET, unix.SOCK_RAW, 0), Supervise, eacces},
		{c("vsock", unix.SYS_SOCKET, unix.AF_VSOCK, unix.SOCK_STREAM, 0), Supervise, eacces},
		{c("NETLINK_ROUTE", unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE), Supervise, allow},
		{c("NETLINK_SOCK_DIAG", unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_SOCK_DIAG), Supervise, eacces},
		{c("NETLINK_USERSOCK", unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_USERSOCK), Supervise, eacces},
		{c("NETLINK_AUDIT", unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT), Supervise, eacces},
		{c("stream socketpair", unix.SYS_SOCKETPAIR, unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC), Supervise, allow},
		{c("datagram socketpair", unix.SYS_SOCKETPAIR, unix.AF_UNIX, unix.SOCK_DGRAM), Supervise, eacces},
		{c("raw socketpair", unix.SYS_SOCKETPAIR, unix.AF_UNIX, unix.SOCK_RAW), Supervise, eacces},
		{c("connect", unix.SYS_CONNECT, 3), Supervise, notify},
		{c("connect, unsupervised", unix.SYS_CONNECT, 3), 0, allow},
		{c("listen", unix.SYS_LISTEN, 3, 128), Supervise, notify},
		{c("listen in a network namespace", unix.SYS_LISTEN, 3, 128), Supervise | Network, allow},
		{c("bind", unix.SYS_BIND, 3), Supervise, allow},
		{c("sendto", unix.SYS_SENDTO, 3, 0, 0, 0), Supervise, allow},
		{c("sendto, fast open", unix.SYS_SENDTO, 3, 0, 0, unix.MSG_FASTOPEN), Supervise, eacces},
		{c("sendmsg, fast open", unix.SYS_SENDMSG, 3, 0, unix.MSG_FASTOPEN|unix.MSG_NOSIGNAL), Supervise, eacces},
		{c("sendmmsg, fast open", unix.SYS_SENDMMSG, 3, 0, 1, unix.MSG_FASTOPEN), Supervise, eacces},
		{c("a thread", unix.SYS_CLONE, threads), Supervise, allow},
		{c("a fork", unix.SYS_CLONE, uint64(unix.SIGCHLD)), Supervise, allow},
		{c("clone into a user namespace", unix.SYS_CLONE, unix.CLONE_NEWUSER|uint64(unix.SIGCHLD)), Supervise, eperm},
		{c("clone into a network namespace", unix.SYS_CLONE, unix.CLONE_NEWNET|uint64(unix.SIGCHLD)), Supervise, eperm},
		{c("clone3", unix.SYS_CLONE3, 0, 88), Supervise, enosys},
		{c("unshare of files", unix.SYS_UNSHARE, unix.CLONE_FILES|unix.CLONE_FS), Supervise, allow},
		{c("unshare of mounts", unix.SYS_UNSHARE, unix.CLONE_NEWNS), Supervise, eperm},
		{c("unshare of time", unix.SYS_UNSHARE, unix.CLONE_NEWTIME), Supervise, eperm},
		{c("setns", unix.SYS_SETNS, 3, 0), Supervise, eperm},
		{c("mount", unix.SYS_MOUNT), Supervise, eperm},
		{c("open_tree", unix.SYS_OPEN_TREE), Supervise, eperm},
		{c("shmget", unix.SYS_SHMGET), Supervise, eperm},
		{c("shmget in an IPC namespace", unix.SYS_SHMGET), Supervise | IPC, allow},
		{c("msgsnd", unix.SYS_MSGSND), Supervise, eperm},
		{c("mq_open", unix.SYS_MQ_OPEN), Supervise, eperm},
		{c("semop in an IPC namespace", unix.SYS_SEMOP), IPC, allow},
		{c("ptrace", unix.SYS_PTRACE), Supervise, eperm},
		{c("process_vm_readv", unix.SYS_PROCESS_VM_READV), Supervise, eperm},
		{c("pidfd_getfd", unix.SYS_PIDFD_GETFD), Supervise, eperm},
		{c("keyctl", unix.SYS_KEYCTL), Supervise, eperm},
		{c("add_key", unix.SYS_ADD_KEY), Supervise, eperm},
		{c("bpf", unix.SYS_BPF), Supervise, eperm},
		{c("perf_event_open", unix.SYS_PERF_EVENT_OPEN), Supervise, eperm},
		{c("userfaultfd", unix.SYS_USERFAULTFD), Supervise, eperm},
		{c("finit_module", unix.SYS_FINIT_MODULE), Supervise, eperm},
		{c("open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT), Supervise, eperm},
		{c("io_uring_setup", unix.SYS_IO_URING_SETUP), Supervise, enosys},
		{c("fchmod 0755", unix.SYS_FCHMOD, 3, 0o755), Supervise, allow},
		{c("fchmod set-user-ID", unix.SYS_FCHMOD, 3, 0o4755), Supervise, eperm},
		{c("fchmod set-group-ID", unix.SYS_FCHMOD, 3, 0o2755), 0, eperm},
		{c("fchmodat sticky", unix.SYS_FCHMODAT, 3, 0, 0o1777), Supervise, allow},
		{c("fchmodat set-user-ID", unix.SYS_FCHMODAT, 3, 0, 0o4700), Supervise, eperm},
		{c("fchmodat2 set-group-ID", unix.SYS_FCHMODAT2, 3, 0, 0o2700, 0), Supervise, eperm},
		{c("openat 0644", unix.SYS_OPENAT, 3, 0, unix.O_CREAT|unix.O_WRONLY, 0o644), Supervise, allow},
		{c("openat set-user-ID", unix.SYS_OPENAT, 3, 0, unix.O_CREAT|unix.O_WRONLY, 0o4755), Supervise, eperm},
		{c("mknodat a FIFO", unix.SYS_MKNODAT, 3, 0, unix.S_IFIFO|0o644, 0), Supervise, allow},
		{c("mknodat set-user-ID", unix.SYS_MKNODAT, 3, 0, unix.S_IFREG|0o4755, 0), Supervise, eperm},
		{c("openat2", unix.SYS_OPENAT2, 3, 0, 0, 24), Supervise, enosys},
		{c("a number nobody has", 1039), Supervise, enosys},
		{c("a number beyond them", 1<<20), Supervise, enosys},
	} {
		prog, err := Filter(tc.flags)
		if err != nil {
			t.Fatal(err)
		}
		if got := run(t, prog, NativeArch, tc.call.nr, tc.call.args...); got != tc.want {
			t.Errorf("%s (flags %#x): %#x, want %#x", tc.call.name, tc.flags, got, tc.want)
		}
	}
	prog, err := Filter(Supervise)
	if err != nil {
		t.Fatal(err)
	}
	// Every system call the table allows is allowed, with any arguments.
	for _, s := range syscalls {
		if nr := nativeNr(s); nr >= 0 && s.rule == sysAllow {
			if got := run(t, prog, NativeArch, int(nr), 1<<40|7, 3, 5); got != allow {
				t.Errorf("%s: %#x, want it allowed", s.name, got)
			}
		}
	}
	// Another ABI gets nothing.
	other := map[string]uint32{"amd64": unix.AUDIT_ARCH_I386, "arm64": unix.AUDIT_ARCH_ARM}[runtime.GOARCH]
	if got := run(t, prog, other, 3); got != enosys {
		t.Errorf("the 32-bit ABI's read: %#x", got)
	}
	if x32Bit != 0 {
		if got := run(t, prog, NativeArch, x32Bit|unix.SYS_READ); got != enosys {
			t.Errorf("the x32 ABI's read: %#x", got)
		}
	}
}
