package launch

import (
	"syscall"
	"unsafe"
)

// DroppedCaps are the capabilities a confined call never holds: what root
// (a CI container, a VM's only user) could use to reach around the
// Landlock rules. Measured on Linux 6.18, a confined process that holds
// CAP_SYS_ADMIN or CAP_PERFMON reads /proc/<pid>/environ of processes
// outside its rules (peal's, with the tokens it keeps from calls), which
// Landlock refuses a process without them. The others: CAP_SYS_PTRACE
// (other processes), CAP_DAC_READ_SEARCH (open_by_handle_at opens a file
// without its path), CAP_MKNOD (a device node of the disk in the work tree),
// CAP_NET_RAW and CAP_NET_ADMIN (packets around the TCP rules, the
// firewall), and what changes the machine itself. An agent, its tools and
// a project's tests need none of them; root keeps the rest (owning and
// changing its files, switching users).
var DroppedCaps = []struct {
	N    int
	Name string
}{
	{capSysAdmin, "CAP_SYS_ADMIN"},
	{capPerfmon, "CAP_PERFMON"},
	{capSysPtrace, "CAP_SYS_PTRACE"},
	{capDacReadSearch, "CAP_DAC_READ_SEARCH"},
	{capMknod, "CAP_MKNOD"},
	{capNetRaw, "CAP_NET_RAW"},
	{capNetAdmin, "CAP_NET_ADMIN"},
	{capBPF, "CAP_BPF"},
	{capSysModule, "CAP_SYS_MODULE"},
	{capSysRawio, "CAP_SYS_RAWIO"},
	{capSysBoot, "CAP_SYS_BOOT"},
	{capSysTime, "CAP_SYS_TIME"},
	{capSyslog, "CAP_SYSLOG"},
	{capMacAdmin, "CAP_MAC_ADMIN"},
	{capMacOverride, "CAP_MAC_OVERRIDE"},
	{capAuditControl, "CAP_AUDIT_CONTROL"},
	{capLinuxImmutable, "CAP_LINUX_IMMUTABLE"},
	{capSysPacct, "CAP_SYS_PACCT"},
	{capCheckpointRestore, "CAP_CHECKPOINT_RESTORE"},
}

func prctl(option int, arg2 uintptr) (uintptr, syscall.Errno) {
	r, _, errno := syscall.RawSyscall6(sysPrctl, uintptr(option), arg2, 0, 0, 0, 0)
	return r, errno
}

// InBoundingSet tells whether the calling thread's bounding set holds
// capability n; a capability this kernel does not know is not held.
func InBoundingSet(n int) bool {
	in, errno := prctl(prCapbsetRead, uintptr(n))
	return errno == 0 && in == 1
}

type capHeader struct {
	version uint32
	pid     int32
}

type capData struct {
	effective, permitted, inheritable uint32
}

// Caps reads the calling thread's capability sets (two words each).
func Caps() (effective, permitted [2]uint32, err error) {
	hdr := capHeader{version: capVersion3}
	var data [2]capData
	if _, _, errno := syscall.RawSyscall(sysCapget, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return effective, permitted, errno
	}
	return [2]uint32{data[0].effective, data[1].effective}, [2]uint32{data[0].permitted, data[1].permitted}, nil
}

// dropCaps takes DroppedCaps from the calling thread, for the program it
// will run: out of the bounding set (which bounds what root gets back at
// execve; this needs CAP_SETPCAP), out of the effective, permitted and
// inheritable sets (always allowed), and every ambient capability (those
// a launcher in a user namespace was given to set the namespaces up).
func dropCaps() error {
	var mask [2]uint32
	for _, c := range DroppedCaps {
		if !InBoundingSet(c.N) {
			continue
		}
		mask[c.N/32] |= 1 << (c.N % 32)
		// Without CAP_SETPCAP this fails (EPERM): the start line names
		// what is kept.
		if _, errno := prctl(prCapbsetDrop, uintptr(c.N)); errno != 0 && errno != syscall.EPERM {
			return errno
		}
	}
	prctl(prCapAmbient, prCapAmbientClearAll) // EINVAL before Linux 4.3, which has none
	hdr := capHeader{version: capVersion3}
	var data [2]capData
	if _, _, errno := syscall.RawSyscall(sysCapget, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return errno
	}
	changed := false
	for i := range data {
		for _, set := range []*uint32{&data[i].effective, &data[i].permitted, &data[i].inheritable} {
			if *set&mask[i] != 0 {
				*set &^= mask[i]
				changed = true
			}
		}
	}
	if !changed {
		return nil
	}
	if _, _, errno := syscall.RawSyscall(sysCapset, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return errno
	}
	return nil
}
