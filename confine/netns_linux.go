package confine

import (
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// Network namespaces made ahead. Making one costs the kernel about a
// millisecond (every network subsystem sets itself up in it), and ending one
// as much again, which a launcher started in a new one (CLONE_NEWNET) pays
// in the call's start and the machine after its end. Where peal is root, it
// makes them beforehand instead, two at a time, each with its loopback up,
// and a launcher joins one (setns, launch.JoinNetwork): the making happens
// while the previous call runs. Once a call is over and nothing of it is
// left in its namespace (its launcher, the init of its PID namespace, has
// ended, with every process of the call; peal has closed every socket it
// served there), the namespace goes back to be joined by a later call:
// every socket of the call is closed, and the call could change nothing
// else of it (no capability). Joining takes CAP_SYS_ADMIN in the
// namespace's user namespace, the machine's: a launcher in a user
// namespace of its own (peal not root) makes its namespace as it starts.
// No two launchers are in one namespace at a time.

// netnsPool are the namespaces made ahead: those ready to be joined, and
// how many exist (ready, or joined by a call not yet over).
type netnsPool struct {
	mu     sync.Mutex
	ready  []*os.File
	owned  int
	making bool
	failed bool // making one failed: the launchers make their own
	// back is told when a call's namespace is given back.
	back sync.Cond
}

// netnsReady is how many namespaces peal keeps ready, and netnsMax how many
// it keeps at most (a parallel block's calls at once).
const (
	netnsReady = 2
	netnsMax   = 16
)

var madeNetns = func() *netnsPool {
	p := &netnsPool{}
	p.back.L = &p.mu
	return p
}()

// takeNetns is a network namespace made ahead, its loopback up, for one
// launcher to join; nil when none is ready (the launcher then makes its
// own). Taking one has more made, up to netnsReady ready.
func takeNetns() *os.File {
	p := madeNetns
	p.mu.Lock()
	defer p.mu.Unlock()
	var f *os.File
	if n := len(p.ready); n > 0 {
		f, p.ready = p.ready[n-1], p.ready[:n-1]
	}
	p.fill()
	return f
}

// MakeAhead starts making, in the background, the network namespaces calls
// confined under sup will join (where peal makes them ahead: root, calls in
// network namespaces of their own), so that the first call finds one.
func MakeAhead(sup Support) {
	if !sup.NetNamespace || sup.UserNamespace || os.Geteuid() != 0 {
		return
	}
	p := madeNetns
	p.mu.Lock()
	p.fill()
	p.mu.Unlock()
}

// fill makes namespaces, in the background, while fewer than netnsReady
// are ready and fewer than netnsMax exist. The caller holds p.mu.
func (p *netnsPool) fill() {
	if p.making || p.failed || len(p.ready) >= netnsReady || p.owned >= netnsMax {
		return
	}
	p.making = true
	p.owned++
	go func() {
		f, err := makeNetns()
		p.mu.Lock()
		defer p.mu.Unlock()
		p.making = false
		if err != nil {
			p.owned--
			p.failed = true
			return
		}
		p.ready = append(p.ready, f)
		p.fill()
	}()
}

// giveBack makes a namespace ready again (a call is over, and nothing of it
// is left there).
func (p *netnsPool) giveBack(f *os.File) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ready = append(p.ready, f)
	p.back.Broadcast()
}

// letGo closes a namespace that is not to be joined again.
func (p *netnsPool) letGo(f *os.File) {
	f.Close()
	p.mu.Lock()
	p.owned--
	p.fill()
	p.mu.Unlock()
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

// recycleNetns gives back the network namespace of a call that is over, to
// be joined by a later call, once the call's launcher (pidfd launcher; -1:
// unknown) has ended; contained tells whether its processes were in a PID
// namespace of its own, which ends with it. Otherwise the namespace is let
// go.
func recycleNetns(ns *os.File, launcher int, contained bool) {
	if launcher < 0 || !contained {
		if launcher >= 0 {
			unix.Close(launcher)
		}
		madeNetns.letGo(ns)
		return
	}
	defer unix.Close(launcher)
	for {
		p := []unix.PollFd{{Fd: int32(launcher), Events: unix.POLLIN}}
		_, err := unix.Poll(p, -1)
		if err == nil {
			break
		}
		if err != unix.EINTR {
			madeNetns.letGo(ns)
			return
		}
	}
	madeNetns.giveBack(ns)
}
