//go:build unix && !linux

package phase

import (
	"os/exec"
	"syscall"
	"time"
)

// Without a parent-death signal, children outlive a peal that is killed
// with SIGKILL here (docs/behaviour.md says so).
func dieWithParent(attr *syscall.SysProcAttr) {}

func startChild(cmd *exec.Cmd) error { return cmd.Start() }

// leftovers: there is no launcher here.
func (g *group) leftovers() bool { return true }

// leftGroup: there is no launcher here.
func leftGroup(pgid int) []int { return nil }

// There is no subreaper here: a call's orphans go to the system's init.
func forgetChild(pid int) {}
func adoptOrphans() bool  { return false }
func endOrphans()         {}

// findStrays has no cheap way to read other processes' environments here.
func findStrays(callID string, pgid int) []int { return nil }

// waitGone has no cheap way to list a group's members here: the signals
// that were sent are all it can do.
func waitGone(pgid int, pids []int, limit time.Duration) {}

// There is no guard here: without the parent-death signal the agent itself
// outlives a killed peal, and a guard could not read the environments.
func guardStarting()                       {}
func guardStarted(pgid int, err error) int { return 0 }
func guardEnded(slot int)                  {}

// SweepLeftovers finds nothing here: see strays.
func SweepLeftovers(scope string, grace time.Duration) int { return 0 }
