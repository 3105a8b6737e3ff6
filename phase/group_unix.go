//go:build unix

package phase

import (
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// group is what a call's child started: the process group the child leads
// (it starts in a session of its own, which is a group of its own too, with
// no terminal, so that a signal reaches whatever it started too) and,
// where the platform can find them, the processes that carry the call's id
// in their environment although they left the group (a daemon started
// with setsid). A confined call's launcher holds every process the call
// started itself (contained): its group is signalled, and it passes the
// signals on.
type group struct {
	cmd       *exec.Cmd
	pgid      int // set once started; read by the cancel of exec's watcher through pid
	pid       atomic.Int64
	callID    string
	contained bool
	grace     time.Duration
	hard      <-chan struct{} // closes on a hard stop: no more grace
	exited    chan struct{}   // closed once the child has been waited for
	guardSlot int             // where peal's guard finds the group (0: nowhere)

	mu   sync.Mutex
	kill *time.Timer // SIGKILL after the grace, armed by the first SIGTERM
}

// newGroup prepares cmd to start in a session (and group) of its own and
// to be stopped as a group: when the call's context ends, SIGTERM to the
// group, then SIGKILL after the grace; exec stops waiting on the pipes
// after the grace too. contained: the call's launcher holds what it starts.
func newGroup(cmd *exec.Cmd, callID string, grace time.Duration, hard <-chan struct{}, contained bool) *group {
	g := &group{cmd: cmd, callID: callID, grace: grace, hard: hard, exited: make(chan struct{}), contained: contained}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setpgid = true, false
	dieWithParent(cmd.SysProcAttr)
	cmd.Cancel = func() error {
		// exec cancels from its own goroutine, which it starts once the
		// child runs: that may be before start has stored the pid, and the
		// SIGTERM must not be lost then.
		g.pid.CompareAndSwap(0, int64(cmd.Process.Pid))
		g.signal(unix.SIGTERM)
		g.mu.Lock()
		if g.kill == nil {
			g.kill = time.AfterFunc(grace, func() { g.signal(unix.SIGKILL) })
			if hard != nil {
				go func() {
					select {
					case <-hard:
						g.signal(unix.SIGKILL)
					case <-g.exited:
					}
				}()
			}
		}
		g.mu.Unlock()
		return nil
	}
	cmd.WaitDelay = grace
	return g
}

func (g *group) start() error {
	guardStarting()
	err := startChild(g.cmd)
	if err == nil {
		g.pgid = g.cmd.Process.Pid
	}
	g.guardSlot = guardStarted(g.pgid, err)
	if err != nil {
		return err
	}
	g.pid.Store(int64(g.pgid))
	return nil
}

// signal signals every process of the group and reports whether any
// process was there to receive it.
func (g *group) signal(sig unix.Signal) bool {
	// The pid is read atomically: exec's cancel may store it first.
	pgid := int(g.pid.Load())
	if pgid <= 0 {
		return false
	}
	return unix.Kill(-pgid, sig) == nil
}

// reap stops what the child left behind once the child is gone — its group
// and the processes that carry its call id — with SIGTERM, then SIGKILL
// when the output pipes close or the grace runs out, and returns only when
// they are gone (or the grace has passed once more), so that a call's end
// means nothing of it is running. A contained call's launcher holds what
// left the group: those processes get the signals too, and whatever is
// left ends with the launcher (its PID namespace), or comes to peal as an
// orphan (endOrphans).
func (g *group) reap(outputDone <-chan struct{}) {
	close(g.exited)
	var strays []int
	if g.contained {
		strays = leftGroup(g.pgid)
	} else {
		strays = findStrays(g.callID, g.pgid)
	}
	signalAll(strays, unix.SIGTERM)
	if g.signal(unix.SIGTERM) || len(strays) > 0 {
		select {
		case <-outputDone:
		case <-g.hard:
		case <-time.After(g.grace):
		}
		g.signal(unix.SIGKILL)
		signalAll(strays, unix.SIGKILL)
		waitGone(g.pgid, strays, g.grace)
	}
	g.ended()
}

// end records that the call has ended with nothing of it left to stop.
func (g *group) end() {
	close(g.exited)
	g.ended()
}

// ended disarms what the group's stop armed and tells the guard.
func (g *group) ended() {
	g.mu.Lock()
	if g.kill != nil {
		g.kill.Stop()
	}
	g.mu.Unlock()
	guardEnded(g.guardSlot)
}

func signalAll(pids []int, sig unix.Signal) {
	for _, pid := range pids {
		unix.Kill(pid, sig)
	}
}
