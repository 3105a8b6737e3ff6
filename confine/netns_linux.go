package confine

import (
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// Network namespaces made ahead. Making one costs the kernel about a
// millisecond (every network subsystem sets itself up in it), which a
// launcher started in a new one (CLONE_NEWNET) pays in the call's start.
// Where peal is root, it makes them beforehand instead, two at a time, each
// with its loopback up, and a launcher joins one (setns, launch.JoinNetwork):
// the making happens while the previous call runs. Joining takes
// CAP_SYS_ADMIN in the namespace's user namespace, the machine's: a launcher
// in a user namespace of its own (peal not root) makes its namespace as it
// starts. A namespace made ahead holds nothing of any call until a launcher
// joins it, and no two launchers get the same one.

// madeNetns are the namespaces made ahead, each open at a file.
var madeNetns = struct {
	once  sync.Once
	ready chan *os.File
}{ready: make(chan *os.File, 2)}

// takeNetns is a network namespace made ahead, its loopback up, for one
// launcher to join; nil when none is ready (the launcher then makes its
// own). The first call starts the making, which then keeps two ready.
func takeNetns() *os.File {
	madeNetns.once.Do(func() {
		ready := madeNetns.ready
		go func() {
			for {
				f, err := makeNetns()
				if err != nil {
					return // the launchers make their own
				}
				ready <- f
			}
		}()
	})
	select {
	case f := <-madeNetns.ready:
		return f
	default:
		return nil
	}
}

// made is a namespace made ahead, or why it could not be.
type made struct {
	f   *os.File
	err error
}

// makeNetns makes a network namespace on a thread of its own, which it
// leaves in it: the thread ends with its goroutine, never unlocked, and no
// other goroutine runs on it.
func makeNetns() (*os.File, error) {
	ch := make(chan made, 1)
	go netnsOnThread(ch)
	m := <-ch
	return m.f, m.err
}

// netnsOnThread makes the namespace on the thread it locks, and sends it.
// Never on the process's main thread, whose network namespace is the one
// /proc/self/net shows (and which Go parks rather than ends): there it
// holds that thread, locked and waiting, while another goroutine makes it
// on another thread.
func netnsOnThread(ch chan<- made) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		inner := make(chan made, 1)
		go netnsOnThread(inner)
		ch <- <-inner
		runtime.UnlockOSThread()
		return
	}
	// Never unlocked from here: the thread goes with the goroutine.
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		ch <- made{nil, os.NewSyscallError("unshare", err)}
		return
	}
	f, err := os.Open("/proc/thread-self/ns/net")
	if err == nil {
		if err = loopbackUp(); err != nil {
			f.Close()
			f = nil
		}
	}
	ch <- made{f, err}
}

// loopbackUp brings up the loopback interface of the calling thread's
// network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
