package phase

import (
	"os/exec"
	"time"
)

// group on Windows is the child alone: there are no process groups to
// signal, so a timeout or an interruption kills the child and whatever it
// started may stay behind (docs/behaviour.md says so).
type group struct {
	cmd  *exec.Cmd
	pgid int
}

func newGroup(cmd *exec.Cmd, callID string, grace time.Duration, hard <-chan struct{}, contained bool) *group {
	cmd.WaitDelay = grace
	return &group{cmd: cmd}
}

func (g *group) start() error {
	if err := g.cmd.Start(); err != nil {
		return err
	}
	g.pgid = g.cmd.Process.Pid
	return nil
}

func (g *group) reap(outputDone <-chan struct{}) {}

// SweepLeftovers finds nothing here: without process groups or readable
// environments there is no way to tell what a dead run left.
func SweepLeftovers(scope string, grace time.Duration) int { return 0 }

func forgetChild(pid int) {}
func adoptOrphans() bool  { return false }
func endOrphans()         {}

// leftovers: there is no launcher here.
func (g *group) leftovers() bool { return true }

func (g *group) end() {}
