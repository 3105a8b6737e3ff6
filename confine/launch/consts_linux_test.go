package launch

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// The launcher's constants are the kernel's, as golang.org/x/sys/unix
// has them.
func TestConstants(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"PR_SET_DUMPABLE", prSetDumpable, unix.PR_SET_DUMPABLE},
		{"PR_CAPBSET_READ", prCapbsetRead, unix.PR_CAPBSET_READ},
		{"PR_CAPBSET_DROP", prCapbsetDrop, unix.PR_CAPBSET_DROP},
		{"PR_SET_CHILD_SUBREAPER", prSetChildSubreaper, unix.PR_SET_CHILD_SUBREAPER},
		{"PR_SET_NO_NEW_PRIVS", prSetNoNewPrivs, unix.PR_SET_NO_NEW_PRIVS},
		{"PR_CAP_AMBIENT", prCapAmbient, unix.PR_CAP_AMBIENT},
		{"PR_CAP_AMBIENT_CLEAR_ALL", prCapAmbientClearAll, unix.PR_CAP_AMBIENT_CLEAR_ALL},
		{"CAP_SYS_ADMIN", capSysAdmin, unix.CAP_SYS_ADMIN},
		{"CAP_PERFMON", capPerfmon, unix.CAP_PERFMON},
		{"CAP_SYS_PTRACE", capSysPtrace, unix.CAP_SYS_PTRACE},
		{"CAP_DAC_READ_SEARCH", capDacReadSearch, unix.CAP_DAC_READ_SEARCH},
		{"CAP_MKNOD", capMknod, unix.CAP_MKNOD},
		{"CAP_NET_RAW", capNetRaw, unix.CAP_NET_RAW},
		{"CAP_NET_ADMIN", capNetAdmin, unix.CAP_NET_ADMIN},
		{"CAP_BPF", capBPF, unix.CAP_BPF},
		{"CAP_SYS_MODULE", capSysModule, unix.CAP_SYS_MODULE},
		{"CAP_SYS_RAWIO", capSysRawio, unix.CAP_SYS_RAWIO},
		{"CAP_SYS_BOOT", capSysBoot, unix.CAP_SYS_BOOT},
		{"CAP_SYS_TIME", capSysTime, unix.CAP_SYS_TIME},
		{"CAP_SYSLOG", capSyslog, unix.CAP_SYSLOG},
		{"CAP_MAC_ADMIN", capMacAdmin, unix.CAP_MAC_ADMIN},
		{"CAP_MAC_OVERRIDE", capMacOverride, unix.CAP_MAC_OVERRIDE},
		{"CAP_AUDIT_CONTROL", capAuditControl, unix.CAP_AUDIT_CONTROL},
		{"CAP_LINUX_IMMUTABLE", capLinuxImmutable, unix.CAP_LINUX_IMMUTABLE},
		{"CAP_SYS_PACCT", capSysPacct, unix.CAP_SYS_PACCT},
		{"CAP_CHECKPOINT_RESTORE", capCheckpointRestore, unix.CAP_CHECKPOINT_RESTORE},
		{"CAP_SETPCAP", capSetpcap, unix.CAP_SETPCAP},
		{"LINUX_CAPABILITY_VERSION_3", capVersion3, unix.LINUX_CAPABILITY_VERSION_3},
		{"SECCOMP_SET_MODE_FILTER", seccompSetModeFilter, unix.SECCOMP_SET_MODE_FILTER},
		{"SECCOMP_GET_ACTION_AVAIL", seccompGetActionAvail, unix.SECCOMP_GET_ACTION_AVAIL},
		{"SECCOMP_FILTER_FLAG_NEW_LISTENER", seccompFlagNewListener, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER},
		{"SECCOMP_RET_ALLOW", seccompRetAllow, unix.SECCOMP_RET_ALLOW},
		{"SECCOMP_RET_ERRNO", seccompRetErrno, unix.SECCOMP_RET_ERRNO},
		{"SECCOMP_RET_USER_NOTIF", seccompRetUserNotif, unix.SECCOMP_RET_USER_NOTIF},
		{"BPF_LD|BPF_W|BPF_ABS", bpfLdWAbs, unix.BPF_LD | unix.BPF_W | unix.BPF_ABS},
		{"BPF_JMP|BPF_JEQ|BPF_K", bpfJeqK, unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K},
		{"BPF_JMP|BPF_JGE|BPF_K", bpfJgeK, unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K},
		{"BPF_JMP|BPF_JSET|BPF_K", bpfJsetK, unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K},
		{"BPF_ALU|BPF_AND|BPF_K", bpfAndK, unix.BPF_ALU | unix.BPF_AND | unix.BPF_K},
		{"BPF_RET|BPF_K", bpfRetK, unix.BPF_RET | unix.BPF_K},
		{"AF_UNIX", afUnix, unix.AF_UNIX},
		{"AF_INET", afInet, unix.AF_INET},
		{"AF_INET6", afInet6, unix.AF_INET6},
		{"AF_NETLINK", afNetlink, unix.AF_NETLINK},
		{"SOCK_STREAM", sockStream, unix.SOCK_STREAM},
		{"SOCK_DGRAM", sockDgram, unix.SOCK_DGRAM},
		{"IPPROTO_TCP", ipprotoTCP, unix.IPPROTO_TCP},
		{"MSG_FASTOPEN", msgFastopen, unix.MSG_FASTOPEN},
		{"EACCES", eacces, uint64(unix.EACCES)},
		{"ENOSYS", enosys, uint64(unix.ENOSYS)},
		{"EPROTONOSUPPORT", eprotonosupport, uint64(unix.EPROTONOSUPPORT)},
		{"SYS_LANDLOCK_ADD_RULE", sysLandlockAddRule, unix.SYS_LANDLOCK_ADD_RULE},
		{"SYS_LANDLOCK_RESTRICT_SELF", sysLandlockRestrictSelf, unix.SYS_LANDLOCK_RESTRICT_SELF},
		{"LANDLOCK_RULE_PATH_BENEATH", landlockRulePathBeneath, unix.LANDLOCK_RULE_PATH_BENEATH},
		{"LANDLOCK_ACCESS_FS_EXECUTE", landlockAccessFSExecute, unix.LANDLOCK_ACCESS_FS_EXECUTE},
		{"LANDLOCK_ACCESS_FS_READ_FILE", landlockAccessFSReadFile, unix.LANDLOCK_ACCESS_FS_READ_FILE},
		{"LANDLOCK_ACCESS_FS_READ_DIR", landlockAccessFSReadDir, unix.LANDLOCK_ACCESS_FS_READ_DIR},
		{"O_PATH", oPath, unix.O_PATH},
		{"SIOCGIFFLAGS", siocgifflags, unix.SIOCGIFFLAGS},
		{"SIOCSIFFLAGS", siocsifflags, unix.SIOCSIFFLAGS},
		{"IFF_UP", iffUp, unix.IFF_UP},
		{"SYS_PRCTL", sysPrctl, unix.SYS_PRCTL},
		{"SYS_CAPGET", sysCapget, unix.SYS_CAPGET},
		{"SYS_CAPSET", sysCapset, unix.SYS_CAPSET},
		{"SYS_RT_SIGACTION", sysRtSigaction, unix.SYS_RT_SIGACTION},
		{"SYS_IOCTL", sysIoctl, unix.SYS_IOCTL},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
	if !seccompReady {
		return
	}
	native := map[string]uint64{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}[runtime.GOARCH]
	compat := map[string]uint64{"amd64": unix.AUDIT_ARCH_I386, "arm64": unix.AUDIT_ARCH_ARM}[runtime.GOARCH]
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"native arch", NativeArch, native},
		{"compat arch", compatArch, compat},
		{"SYS_SOCKET", sysSocket, unix.SYS_SOCKET},
		{"SYS_CONNECT", sysConnect, unix.SYS_CONNECT},
		{"SYS_SENDTO", sysSendto, unix.SYS_SENDTO},
		{"SYS_SENDMSG", sysSendmsg, unix.SYS_SENDMSG},
		{"SYS_SOCKETPAIR", sysSocketpair, unix.SYS_SOCKETPAIR},
		{"SYS_SENDMMSG", sysSendmmsg, unix.SYS_SENDMMSG},
		{"SYS_SECCOMP", sysSeccomp, unix.SYS_SECCOMP},
		{"SYS_IO_URING_SETUP", sysIoUringSetup, unix.SYS_IO_URING_SETUP},
		{"SYS_IO_URING_ENTER", sysIoUringEnter, unix.SYS_IO_URING_ENTER},
		{"SYS_IO_URING_REGISTER", sysIoUringRegister, unix.SYS_IO_URING_REGISTER},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
}
