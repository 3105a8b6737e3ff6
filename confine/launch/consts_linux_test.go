package launch

import (
	"runtime"
	"slices"
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
		{"BPF_JMP|BPF_JA", bpfJa, unix.BPF_JMP | unix.BPF_JA},
		{"BPF_MAXINSNS", bpfMaxInsns, unix.BPF_MAXINSNS},
		{"AF_UNIX", afUnix, unix.AF_UNIX},
		{"S_ISUID|S_ISGID", setIDBits, unix.S_ISUID | unix.S_ISGID},
		{"AF_INET", afInet, unix.AF_INET},
		{"AF_INET6", afInet6, unix.AF_INET6},
		{"AF_NETLINK", afNetlink, unix.AF_NETLINK},
		{"SOCK_STREAM", sockStream, unix.SOCK_STREAM},
		{"SOCK_DGRAM", sockDgram, unix.SOCK_DGRAM},
		{"SOCK_RAW", sockRaw, unix.SOCK_RAW},
		{"SOCK_SEQPACKET", sockSeqpacket, unix.SOCK_SEQPACKET},
		{"NETLINK_ROUTE", netlinkRoute, unix.NETLINK_ROUTE},
		{"NETLINK_SOCK_DIAG", netlinkSockDiag, unix.NETLINK_SOCK_DIAG},
		{"CLONE_NEWTIME", cloneNewTime, unix.CLONE_NEWTIME},
		{"CLONE_NEWNS", cloneNewNS, unix.CLONE_NEWNS},
		{"CLONE_NEWCGROUP", cloneNewCgroup, unix.CLONE_NEWCGROUP},
		{"CLONE_NEWUTS", cloneNewUTS, unix.CLONE_NEWUTS},
		{"CLONE_NEWIPC", cloneNewIPC, unix.CLONE_NEWIPC},
		{"CLONE_NEWUSER", cloneNewUser, unix.CLONE_NEWUSER},
		{"CLONE_NEWPID", cloneNewPID, unix.CLONE_NEWPID},
		{"CLONE_NEWNET", cloneNewNet, unix.CLONE_NEWNET},
		{"IPPROTO_TCP", ipprotoTCP, unix.IPPROTO_TCP},
		{"MSG_FASTOPEN", msgFastopen, unix.MSG_FASTOPEN},
		{"EPERM", eperm, uint64(unix.EPERM)},
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
	if NativeArch != native {
		t.Errorf("NativeArch = %#x, want %#x", uint64(NativeArch), native)
	}
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"SYS_SECCOMP", sysSeccomp, unix.SYS_SECCOMP},
		{"SYS_SETNS", sysSetns, unix.SYS_SETNS},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
}

// TestSyscallNumbers: the filter's table numbers every system call as
// golang.org/x/sys/unix does on this architecture, names each once, and
// lists every one of unix's that it knows of.
func TestSyscallNumbers(t *testing.T) {
	if !seccompReady {
		t.Skip("no filter is made on " + runtime.GOARCH)
	}
	seen := map[string]bool{}
	for _, s := range syscalls {
		if seen[s.name] {
			t.Errorf("%s is listed twice", s.name)
		}
		seen[s.name] = true
		want, ok := unixNumbers[s.name]
		if !ok {
			want = -1
		}
		if got := int(nativeNr(s)); got != want {
			t.Errorf("%s is %d, unix has %d", s.name, got, want)
		}
	}
	// The kernel has no code behind these (they answer ENOSYS), so the
	// filter names none of them.
	unimplemented := []string{"afs_syscall", "arch_specific_syscall", "epoll_ctl_old", "epoll_wait_old", "getpmsg", "putpmsg", "security", "tuxcall", "vserver"}
	for name := range unixNumbers {
		if !seen[name] && !slices.Contains(unimplemented, name) {
			t.Errorf("%s is in unix's list, not in the filter's: allow or refuse it", name)
		}
	}
}
