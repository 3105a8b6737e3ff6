package phase

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

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
// thread started the guard. Peal tells it, one short line each, when a call
// is about to start its child, when the child has started (its process
// group), and when the call is over. When peal dies with no call under way,
// nothing of it can be running and the guard exits at once; otherwise it
// SIGKILLs the groups of the calls under way, then every process whose call
// id names peal's pid, until none is left: that search covers a child whose
// group peal had not reported yet, and what left its group.

// guardEnv, set only in the guard's environment, makes peal's binary act
// as the guard of the peal whose pid it names (see init).
const guardEnv = "PEAL_GUARD_OF"

func init() {
	if pid := os.Getenv(guardEnv); pid != "" {
		os.Exit(guardMain(pid))
	}
}

// guardMain is the guard's whole life: it reads peal's reports from
// standard input until EOF, then stops what is left.
func guardMain(pealPID string) int {
	// Signals meant for peal's terminal or group are not for the guard: it
	// lives in a group of its own and ends on EOF alone.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE)
	pending, groups := 0, map[int]int{} // calls starting; live group -> calls in it
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		op, arg, _ := bytes.Cut(sc.Bytes(), []byte{' '})
		n, _ := strconv.Atoi(string(arg))
		switch string(op) {
		case "s": // a child is about to start
			pending++
		case "g": // it started, leading group n
			pending--
			groups[n]++
		case "f": // it could not start
			pending--
		case "e": // the call of group n is over
			if groups[n]--; groups[n] <= 0 {
				delete(groups, n)
			}
		}
	}
	if pending <= 0 && len(groups) == 0 {
		return 0
	}
	killed := guardKill(pealPID, groups)
	if killed > 0 {
		fmt.Fprintf(os.Stderr, "peal: peal (pid %s) died while calls ran; its guard stopped %d process(es) they had started\n", pealPID, killed)
	}
	return 0
}

// guardKill SIGKILLs the groups, then every process whose call id was given
// by peal pid pealPID, again until a search finds none (a process may start
// another while it is being killed), and returns how many it found.
func guardKill(pealPID string, groups map[int]int) int {
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
	seen := map[int]bool{}
	for range 50 {
		var pids []int
		for _, p := range carriers(processes(func(int) bool { return true }), ofPeal) {
			pids = append(pids, p.pid)
			seen[p.pid] = true
		}
		if len(pids) == 0 {
			break
		}
		signalAll(pids, unix.SIGKILL)
		waitGone(0, pids, time.Second)
	}
	return len(seen)
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

// guard is peal's end of the pipe to its guard; nil when there is none.
var guard struct {
	once sync.Once
	mu   sync.Mutex
	w    *os.File
}

// guardStarting tells the guard, started on first use, that a child is
// about to start. Without a guard (it could not start, or it died) the
// reports are dropped: the next run's sweep remains.
func guardStarting() {
	guard.once.Do(startGuard)
	guardSay("s\n")
}

// guardStarted tells the guard that the child now leads group pgid, or
// could not start (err not nil).
func guardStarted(pgid int, err error) {
	if err != nil {
		guardSay("f\n")
		return
	}
	guardSay("g " + strconv.Itoa(pgid) + "\n")
}

// guardEnded tells the guard that the call of group pgid is over: nothing
// of it is running any more.
func guardEnded(pgid int) { guardSay("e " + strconv.Itoa(pgid) + "\n") }

func guardSay(line string) {
	guard.mu.Lock()
	defer guard.mu.Unlock()
	if guard.w == nil {
		return
	}
	if _, err := guard.w.WriteString(line); err != nil {
		guard.w.Close()
		guard.w = nil
	}
}

// startGuard starts the guard: this very binary, in a group of its own (a
// Ctrl-C for peal is not for it), with the read end of the pipe as its
// standard input.
func startGuard() {
	r, w, err := os.Pipe()
	if err != nil {
		return
	}
	defer r.Close()
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = []string{guardEnv + "=" + strconv.Itoa(os.Getpid())}
	cmd.Stdin, cmd.Stderr = r, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return
	}
	guard.w = w
	go cmd.Wait() // reaps it should it die before peal
}
