package phase

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// dieWithParent makes the kernel SIGKILL the child when peal dies, even of
// SIGKILL, so that no agent goes on editing the repository unsupervised.
func dieWithParent(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}

// The parent-death signal fires when the *thread* that started the child
// exits, not the process, and the Go runtime may end threads. Every child is
// therefore started from one goroutine locked to its thread for the life of
// the process: that thread never exits while peal runs.
var (
	spawnOnce sync.Once
	spawns    chan spawnRequest
)

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

// children are the children peal started and has not waited for yet:
// what endOrphans leaves alone. A child is added as it starts, under the
// lock endOrphans holds, so that no child is taken for an orphan between
// its start and its record.
var children struct {
	sync.Mutex
	live map[int]bool
}

func startChild(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawns = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as peal
			for req := range spawns {
				children.Lock()
				err := req.cmd.Start()
				if err == nil {
					if children.live == nil {
						children.live = map[int]bool{}
					}
					children.live[req.cmd.Process.Pid] = true
				}
				children.Unlock()
				req.done <- err
			}
		}()
	})
	req := spawnRequest{cmd: cmd, done: make(chan error, 1)}
	spawns <- req
	return <-req.done
}

// forgetChild records that the child pid has been waited for.
func forgetChild(pid int) {
	children.Lock()
	delete(children.live, pid)
	children.Unlock()
}

// adoptOrphans makes peal the subreaper of its descendants, once: a
// process whose parent dies is then given to peal, not to the system's
// init. It is what holds a call's processes where no PID namespace does
// and the call's launcher (their subreaper) has ended; it reports whether
// the kernel agreed.
var adoptOrphans = sync.OnceValue(func() bool {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == nil
})

// endOrphans kills and reaps every orphan peal has adopted: each child
// that peal did not start (or has waited for) and that is not in peal's
// own session (a call's processes are in the call's session, or a session
// they made). A killed orphan's children come to peal in turn, and are
// ended the same way, until none is left. Orphans come to peal only from
// a launcher that has ended: its call is over, whichever call of a
// parallel block ends first.
func endOrphans() {
	children.Lock()
	defer children.Unlock()
	self := os.Getpid()
	sid, err := unix.Getsid(0)
	if err != nil {
		return
	}
	for range 1000 {
		found := false
		for _, pid := range descendantsOf(self, false) {
			if children.live[pid] {
				continue
			}
			if s, err := unix.Getsid(pid); err != nil || s == sid {
				continue
			}
			found = true
			unix.Kill(pid, unix.SIGKILL)
			for {
				if _, err := unix.Wait4(pid, nil, 0, nil); !errors.Is(err, unix.EINTR) {
					break
				}
			}
		}
		if !found {
			return
		}
	}
}

// leftovers tells whether a contained call's launcher (which leads the
// group) still holds a process of the call: its children are every
// process of the call that is left, the orphans included.
func (g *group) leftovers() bool {
	b, err := readSmall(nil, "/proc/"+strconv.Itoa(g.pgid)+"/task/"+strconv.Itoa(g.pgid)+"/children")
	return err != nil || len(bytes.TrimSpace(b)) > 0
}

// leftGroup lists the processes below a contained call's launcher (which
// leads group pgid) that left its group: a daemon the call started, which
// peal signals as it does the group.
func leftGroup(pgid int) []int {
	var out []int
	for _, pid := range descendantsOf(pgid, true) {
		if g, err := unix.Getpgid(pid); err == nil && g != pgid {
			out = append(out, pid)
		}
	}
	return out
}

// descendantsOf lists the children of pid (all of them, or only the
// direct ones), as each of its threads' children file in /proc tells.
func descendantsOf(pid int, all bool) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		tasks, err := os.ReadDir("/proc/" + strconv.Itoa(p) + "/task")
		if err != nil {
			continue
		}
		var buf []byte
		for _, t := range tasks {
			buf, err = readSmall(buf[:0], "/proc/"+strconv.Itoa(p)+"/task/"+t.Name()+"/children")
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(buf)) {
				if c, err := strconv.Atoi(f); err == nil {
					out = append(out, c)
					if all {
						queue = append(queue, c)
					}
				}
			}
		}
	}
	return out
}

// findStrays lists the live processes, outside group pgid, whose environment
// carries callID: what a call started and then lost track of (a daemon that
// called setsid). Processes of other users cannot be read and are never
// listed. It runs at the end of every call, so it looks only at processes
// started since the call's child (the group leader, pgid), and reads the
// state only of the few that carry the id.
func findStrays(callID string, pgid int) []int {
	if callID == "" {
		return nil
	}
	want := []byte(CallIDEnv + "=" + callID)
	return carriers(startedSince(pgid), pgid, func(kv []byte) bool { return bytes.Equal(kv, want) })
}

// carriers lists the processes among pids, outside group except (none when
// 0), whose environment holds an entry for which match is true (a zombie's
// environment reads as empty). The group is asked first: it takes no file
// to read, and a call's child and its threads are in the call's group.
func carriers(pids []int, except int, match func(kv []byte) bool) []int {
	var out []int
	var buf []byte // grown by readSmall for the first environment read
	for _, pid := range pids {
		g, err := unix.Getpgid(pid)
		if err != nil || (except != 0 && g == except) {
			continue
		}
		buf, err = readProc(buf[:0], pid, "environ")
		if err == nil && hasEntry(buf, match) && isProcess(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// hasEntry tells whether one of the NUL-separated entries of env matches.
func hasEntry(env []byte, match func(kv []byte) bool) bool {
	for len(env) > 0 {
		kv, rest, _ := bytes.Cut(env, []byte{0})
		if match(kv) {
			return true
		}
		env = rest
	}
	return false
}

// isProcess tells a process from a thread of one: /proc answers for a
// thread's id too, though it does not list it.
func isProcess(pid int) bool {
	status, err := readProc(nil, pid, "status")
	return err == nil && bytes.Contains(status, []byte("\nTgid:\t"+strconv.Itoa(pid)+"\n"))
}

// readProc appends /proc/<pid>/<name> to buf. It reads with plain system
// calls: it runs at the end of every call, and os.ReadFile's stat and
// poller registration would double its cost.
func readProc(buf []byte, pid int, name string) ([]byte, error) {
	return readSmall(buf, "/proc/"+strconv.Itoa(pid)+"/"+name)
}

func readSmall(buf []byte, path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return buf, err
	}
	defer unix.Close(fd)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(cap(buf), 4096))
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return buf, err
		case n == 0:
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// maxProbe bounds how many pids startedSince hands out one by one before it
// lists /proc instead.
const maxProbe = 512

// startedSince lists the pids that may belong to processes started at or
// after pid first: the kernel hands out pids in increasing order up to
// pid_max and then wraps around, and it says which pid it handed out last.
// A few pids are listed as such, without reading the whole of /proc; when
// the last one cannot be read, every live process may be one.
func startedSince(first int) []int {
	data, err := readSmall(make([]byte, 0, 32), "/proc/sys/kernel/ns_last_pid")
	last, perr := strconv.Atoi(strings.TrimSpace(string(data)))
	switch {
	case err != nil || perr != nil:
		return processes(func(int) bool { return true })
	case last >= first && last-first < maxProbe:
		pids := make([]int, 0, last-first+1)
		for pid := first; pid <= last; pid++ {
			pids = append(pids, pid)
		}
		return pids
	}
	return processes(pidRange(first, last))
}

// pidRange tells whether a pid was handed out from first to last, in the
// kernel's order (which wraps around at pid_max).
func pidRange(first, last int) func(pid int) bool {
	switch {
	case last >= first:
		return func(pid int) bool { return pid >= first && pid <= last }
	default: // wrapped around since first
		return func(pid int) bool { return pid >= first || pid <= last }
	}
}

// processes lists the pids of /proc for which keep is true.
func processes(keep func(pid int) bool) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && keep(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitGone waits, at most limit, until no process of group pgid (none when
// pgid is 0) and none of pids is left. It waits on a pidfd of each, so the
// wait costs nothing; a zombie's pidfd is ready at once.
func waitGone(pgid int, pids []int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	if pgid > 0 {
		pids = append(pids, processes(func(pid int) bool { g, err := unix.Getpgid(pid); return err == nil && g == pgid })...)
	}
	for _, pid := range pids {
		waitExit(pid, time.Until(deadline))
	}
}

// waitExit blocks until process pid exits or d passes: a pidfd becomes
// readable when its process exits.
func waitExit(pid int, d time.Duration) {
	if d <= 0 {
		return
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // gone already, or no pidfd support: nothing to wait on
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		_, err := unix.Poll(fds, int(min(left.Milliseconds()+1, 1<<30)))
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// SweepLeftovers stops (SIGTERM, then SIGKILL after grace) every process
// whose call id belongs to scope but was given by another peal process: what
// a run that died (even of SIGKILL) left running. The caller must know that
// no other live peal works in scope (it holds the scope's lock). It returns
// how many processes it found.
func SweepLeftovers(scope string, grace time.Duration) int {
	if scope == "" {
		return 0
	}
	prefix := []byte(CallIDEnv + "=" + scope + "/")
	mine := []byte(CallIDEnv + "=" + scope + "/" + strconv.Itoa(os.Getpid()) + "/")
	return stopCarriers(func(kv []byte) bool {
		return bytes.HasPrefix(kv, prefix) && !bytes.HasPrefix(kv, mine)
	}, grace)
}

// stopCarriers stops every process whose environment has an entry that
// match accepts: SIGTERM and up to grace to exit (none when grace is 0),
// then SIGKILL; and searches again until a search finds none, since a
// process may start another while it is being stopped. It returns how many
// processes it found.
func stopCarriers(match func(kv []byte) bool, grace time.Duration) int {
	seen := map[int]bool{}
	for range 50 {
		pids := carriers(processes(func(int) bool { return true }), 0, match)
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			seen[pid] = true
		}
		if grace > 0 {
			signalAll(pids, unix.SIGTERM)
			deadline := time.Now().Add(grace)
			for _, pid := range pids {
				waitExit(pid, time.Until(deadline))
			}
		}
		signalAll(pids, unix.SIGKILL)
		waitGone(0, pids, max(grace, time.Second))
	}
	return len(seen)
}
