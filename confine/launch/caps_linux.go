package launch

import (
	"syscall"
	"unsafe"
)

// A confined call holds no capability: its permitted, effective,
// inheritable and ambient sets are empty, and so is its bounding set,
// which bounds what root gets back at execve. Root's capabilities are
// what reach around the rules (CAP_SYS_ADMIN and CAP_PERFMON read other
// processes' environment through /proc, CAP_DAC_READ_SEARCH opens files
// by handle, CAP_IPC_OWNER attaches another program's shared memory,
// CAP_FSETID, CAP_FOWNER, CAP_CHOWN and CAP_SETUID make a set-id program
// of the user's tree, CAP_AUDIT_* reach the audit log); an agent, its
// tools and a project's tests need none of them. A call of peal run as
// root keeps root's user id: it owns its files and reads what root's
// permissions let their owner read.

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

// LastCap is the highest capability this kernel knows.
func LastCap() int {
	n := 0
	for n < 63 {
		if _, errno := prctl(prCapbsetRead, uintptr(n+1)); errno != 0 {
			break
		}
		n++
	}
	return n
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

// dropCaps empties the calling thread's capability sets, for the program it
// will run: the bounding set (this needs CAP_SETPCAP: where peal runs as
// root without it, its capabilities stay there, which the start line
// says), every ambient capability (those a launcher in a user namespace
// was given to set the namespaces up), then the effective, permitted and
// inheritable sets (always allowed).
func dropCaps() error {
	for n := LastCap(); n >= 0; n-- {
		if !InBoundingSet(n) {
			continue
		}
		if _, errno := prctl(prCapbsetDrop, uintptr(n)); errno != 0 && errno != syscall.EPERM {
			return errno
		}
	}
	prctl(prCapAmbient, prCapAmbientClearAll) // EINVAL before Linux 4.3, which has none
	hdr := capHeader{version: capVersion3}
	var data [2]capData
	if _, _, errno := syscall.RawSyscall(sysCapset, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return errno
	}
	return nil
}
