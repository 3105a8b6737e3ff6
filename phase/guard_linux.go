package phase

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The guard is peal's own binary, started once per peal process (at its
// first call) to outlive it: when peal dies, even of SIGKILL, it kills what
// peal's calls started, at once, rather than leaving it to the next run's
// sweep. The agent itself dies by its parent-death signal; the guard takes
// care of what the agent started (a test run, a dev server, a daemon).
//
// It learns of peal's death from a pipe: peal holds the only write end, so
// the guard reads EOF when peal is gone, whatever killed it and whichever
// thread started the guard. What is under way it reads from memory the two
// share (a memfd): the number of calls between the start of their child
// and their end, and the group of each running call; peal keeps it up to
// date with atomic stores, without a system call. When peal dies with no
// call under way, nothing of it can be running and the guard exits at once;
// otherwise it SIGKILLs the groups of the calls under way, then every
// process whose call id names peal's pid, until none is left: that search
// covers a child whose group peal had not recorded yet, and what left its
// group.

// guardEnv, set only in the guard's environment, makes peal's binary act
// as the guard of the peal whose pid it names (see init).
const guardEnv = "PEAL_GUARD_OF"

// guardSlots is the size of the shared table, in int32 slots: slot 0
// counts the calls under way, the others hold their groups (0: free). More
// calls at once than slots is harmless: the search by call id finds them.
const guardSlots = 1024

func init() {
	if pid := os.Getenv(guardEnv); pid != "" {
		os.Exit(guardMain(pid))
	}
}

// guardMain is the guard's whole life: it waits for EOF on standard input,
// then reads the shared table (fd 3) and stops what is left.
func guardMain(pealPID string) int {
	// Signals meant for peal's terminal or group are not for the guard: it
	// lives in a group of its own and ends on EOF alone.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE)
	table, err := mapTable(3, unix.PROT_READ)
	io.Copy(io.Discard, os.Stdin)
	if err != nil {
		table = nil // no table: search as if calls were under way
	}
	groups := map[int]bool{}
	for i := 1; i < len(table); i++ {
		if g := atomic.LoadInt32(&table[i]); g > 0 {
			groups[int(g)] = true
		}
	}
	if table != nil && atomic.LoadInt32(&table[0]) <= 0 && len(groups) == 0 {
		return 0
	}
	killed := guardKill(pealPID, groups)
	if killed > 0 {
		fmt.Fprintf(os.Stderr, "peal: peal (pid %s) died while calls ran; its guard stopped %d process(es) they had started\n", pealPID, killed)
	}
	return 0
}

// mapTable maps the shared table of file descriptor fd.
func mapTable(fd, prot int) ([]int32, error) {
	mem, err := unix.Mmap(fd, 0, guardSlots*4, prot, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&mem[0])), guardSlots), nil
}

// guardKill SIGKILLs the groups, then every process whose call id was given
// by peal pid pealPID, again until a search finds none (a process may start
// another while it is being killed), and returns how many it found.
func guardKill(pealPID string, groups map[int]bool) int {
	for pgid := range groups {
		unix.Kill(-pgid, unix.SIGKILL)
	}
	prefix := []byte(CallIDEnv + "=")
	mid := "/" + pealPID + "/"
	ofPeal := func(kv []byte) bool {
		if !bytes.HasPrefix(kv, prefix) {
			return false
		}
		// <scope>/<pid>/<n>: the scope may hold slashes, the rest not.
		rest, seq, ok := cutLast(kv[len(prefix):])
		if !ok || !isDigits(seq) {
			return false
		}
		_, pid, ok := cutLast(rest)
		return ok && "/"+string(pid)+"/" == mid
	}
	return stopCarriers(ofPeal, 0)
}

// cutLast splits b at its last slash.
func cutLast(b []byte) (before, after []byte, ok bool) {
	i := bytes.LastIndexByte(b, '/')
	if i < 0 {
		return nil, nil, false
	}
	return b[:i], b[i+1:], true
}

func isDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// guard is peal's side: the write end of the pipe, which it never writes
// to, and the shared table; table is nil when there is no guard.
var guard struct {
	once  sync.Once
	pipe  *os.File
	table []int32
}

// guardStarting records, starting the guard on first use, that a child is
// about to start. Without a guard (it could not start) nothing is
// recorded: the next run's sweep remains.
func guardStarting() {
	guard.once.Do(startGuard)
	if guard.table != nil {
		atomic.AddInt32(&guard.table[0], 1)
	}
}

// guardStarted records that the child now leads group pgid, or could not
// start (err not nil), and returns the slot that holds the group (0: none).
func guardStarted(pgid int, err error) int {
	t := guard.table
	if t == nil {
		return 0
	}
	if err != nil {
		atomic.AddInt32(&t[0], -1)
		return 0
	}
	for i := 1; i < len(t); i++ {
		if atomic.CompareAndSwapInt32(&t[i], 0, int32(pgid)) {
			return i
		}
	}
	return 0
}

// guardEnded records that the call whose group is in slot (0: none) is
// over: nothing of it is running any more.
func guardEnded(slot int) {
	t := guard.table
	if t == nil {
		return
	}
	if slot > 0 {
		atomic.StoreInt32(&t[slot], 0)
	}
	atomic.AddInt32(&t[0], -1)
}

// startGuard starts the guard: this very binary, in a group of its own (a
// Ctrl-C for peal is not for it), with the read end of the pipe as its
// standard input and the shared table as fd 3.
func startGuard() {
	fd, err := unix.MemfdCreate("peal-guard", unix.MFD_CLOEXEC)
	if err != nil {
		return
	}
	mem := os.NewFile(uintptr(fd), "peal-guard")
	defer mem.Close()
	if err := mem.Truncate(guardSlots * 4); err != nil {
		return
	}
	table, err := mapTable(fd, unix.PROT_READ|unix.PROT_WRITE)
	if err != nil {
		return
	}
	r, w, err := os.Pipe()
	if err != nil {
		return
	}
	defer r.Close()
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = []string{guardEnv + "=" + strconv.Itoa(os.Getpid())}
	cmd.Stdin, cmd.Stderr = r, os.Stderr
	cmd.ExtraFiles = []*os.File{mem}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return
	}
	guard.pipe, guard.table = w, table
	go cmd.Wait() // reaps it should it die before peal
}
