package launch

import (
	"syscall"
	"unsafe"
)

// loopbackUp brings the loopback interface of the launcher's new network
// namespace up: its only interface, and the call's only network.
func loopbackUp() error {
	fd, err := syscall.Socket(afInet, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	// struct ifreq: the name, then (for these requests) the flags.
	var ifr [40]byte
	copy(ifr[:], "lo")
	if _, _, errno := syscall.Syscall(sysIoctl, uintptr(fd), siocgifflags, uintptr(unsafe.Pointer(&ifr[0]))); errno != 0 {
		return errno
	}
	*(*uint16)(unsafe.Pointer(&ifr[16])) |= iffUp
	if _, _, errno := syscall.Syscall(sysIoctl, uintptr(fd), siocsifflags, uintptr(unsafe.Pointer(&ifr[0]))); errno != 0 {
		return errno
	}
	return nil
}

// listenLoopback listens on 127.0.0.1:port, in the namespace the launcher
// is in: a socket belongs to the namespace it was made in, so peal, which
// accepts on it, serves the call inside its namespace.
func listenLoopback(port uint16) (int, error) {
	fd, err := syscall.Socket(afInet, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err == nil {
		if err = syscall.Bind(fd, &syscall.SockaddrInet4{Port: int(port), Addr: [4]byte{127, 0, 0, 1}}); err == nil {
			err = syscall.Listen(fd, 128)
		}
	}
	if err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

// mountProc gives the launcher's new mount namespace a /proc of its PID
// namespace, so that the call sees its own processes with the ids it
// knows them by. /proc is made private first: the new mount stays in
// this namespace.
func mountProc() error {
	if err := syscall.Mount("none", "/proc", "", syscall.MS_PRIVATE|syscall.MS_REC, ""); err != nil {
		return err
	}
	return syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "")
}

// readable adds to the Landlock ruleset a rule that lets the call read and
// run what lies beneath dir, as it does the rest of the file system.
func readable(ruleset int, dir string) error {
	fd, err := syscall.Open(dir, oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	// struct landlock_path_beneath_attr, packed: the rights, the folder.
	var attr [12]byte
	*(*uint64)(unsafe.Pointer(&attr[0])) = landlockAccessFSExecute | landlockAccessFSReadFile | landlockAccessFSReadDir
	*(*int32)(unsafe.Pointer(&attr[8])) = int32(fd)
	if _, _, errno := syscall.Syscall6(sysLandlockAddRule, uintptr(ruleset), landlockRulePathBeneath, uintptr(unsafe.Pointer(&attr[0])), 0, 0, 0); errno != 0 {
		return errno
	}
	return nil
}

// sigaction is the kernel's struct sigaction of rt_sigaction on the
// architectures whose signal handling the launcher knows (amd64, arm64,
// 386): the handler, the flags, the restorer, the mask.
type sigaction struct {
	handler, flags, restorer uintptr
	mask                     uint64
}

// ignore makes the kernel ignore sig for the launcher. Ignoring it by the
// kernel's own means leaves the Go runtime unaware, which still believes it
// handles sig: a child it starts gets sig back at its default.
func ignore(sig syscall.Signal) {
	if !seccompReady && !is386 {
		return
	}
	act := sigaction{handler: 1} // SIG_IGN
	syscall.RawSyscall6(sysRtSigaction, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
}
