package confine

import (
	"errors"
	"strings"

	"golang.org/x/sys/unix"
)

// droppedCaps are the capabilities a confined call never holds: what root
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
var droppedCaps = []struct {
	n    int
	name string
}{
	{unix.CAP_SYS_ADMIN, "CAP_SYS_ADMIN"},
	{unix.CAP_PERFMON, "CAP_PERFMON"},
	{unix.CAP_SYS_PTRACE, "CAP_SYS_PTRACE"},
	{unix.CAP_DAC_READ_SEARCH, "CAP_DAC_READ_SEARCH"},
	{unix.CAP_MKNOD, "CAP_MKNOD"},
	{unix.CAP_NET_RAW, "CAP_NET_RAW"},
	{unix.CAP_NET_ADMIN, "CAP_NET_ADMIN"},
	{unix.CAP_BPF, "CAP_BPF"},
	{unix.CAP_SYS_MODULE, "CAP_SYS_MODULE"},
	{unix.CAP_SYS_RAWIO, "CAP_SYS_RAWIO"},
	{unix.CAP_SYS_BOOT, "CAP_SYS_BOOT"},
	{unix.CAP_SYS_TIME, "CAP_SYS_TIME"},
	{unix.CAP_SYSLOG, "CAP_SYSLOG"},
	{unix.CAP_MAC_ADMIN, "CAP_MAC_ADMIN"},
	{unix.CAP_MAC_OVERRIDE, "CAP_MAC_OVERRIDE"},
	{unix.CAP_AUDIT_CONTROL, "CAP_AUDIT_CONTROL"},
	{unix.CAP_LINUX_IMMUTABLE, "CAP_LINUX_IMMUTABLE"},
	{unix.CAP_SYS_PACCT, "CAP_SYS_PACCT"},
	{unix.CAP_CHECKPOINT_RESTORE, "CAP_CHECKPOINT_RESTORE"},
}

// inBoundingSet tells whether the calling thread's bounding set holds
// capability n; a capability this kernel does not know is not held.
func inBoundingSet(n int) bool {
	in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(n), 0, 0, 0)
	return err == nil && in == 1
}

// dropCaps takes droppedCaps from the calling thread, for the program it
// will run: out of the bounding set (which bounds what root gets back at
// execve; this needs CAP_SETPCAP), and out of the effective, permitted and
// inheritable sets (always allowed). It returns the names of those it
// could not take out of the bounding set; see keptCaps.
func dropCaps() ([]string, error) {
	var kept []string
	var mask [2]uint32
	for _, c := range droppedCaps {
		if !inBoundingSet(c.n) {
			continue
		}
		mask[c.n/32] |= 1 << (c.n % 32)
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c.n), 0, 0, 0); err != nil {
			if !errors.Is(err, unix.EPERM) {
				return nil, err
			}
			kept = append(kept, c.name)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return kept, err
	}
	changed := false
	for i := range data {
		for _, set := range []*uint32{&data[i].Effective, &data[i].Permitted, &data[i].Inheritable} {
			if *set&mask[i] != 0 {
				*set &^= mask[i]
				changed = true
			}
		}
	}
	if changed {
		return kept, unix.Capset(&hdr, &data[0])
	}
	return kept, nil
}

// keptCaps says which of droppedCaps a confined call started by this
// process keeps: none unless it runs as root without CAP_SETPCAP (root
// gets its bounding set back at execve, and only CAP_SETPCAP narrows it).
// Empty when nothing is kept.
func keptCaps() string {
	if unix.Geteuid() != 0 {
		return ""
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err == nil && data[0].Effective&(1<<unix.CAP_SETPCAP) != 0 {
		return ""
	}
	var kept []string
	for _, c := range droppedCaps {
		if inBoundingSet(c.n) {
			kept = append(kept, c.name)
		}
	}
	return strings.Join(kept, ", ")
}
