//go:build linux

package main

import (
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// TestProcessAliveZombie: a child that exited but is not reaped yet is not
// alive (a report taken right after a kill says the run was cut off); a
// running one and this process are.
func TestProcessAliveZombie(t *testing.T) {
	t.Parallel()
	if !processAlive(os.Getpid()) {
		t.Fatal("this process is not alive")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !processAlive(cmd.Process.Pid) {
		t.Fatal("a running child is not alive")
	}
	cmd.Process.Kill()
	// Wait for the exit without reaping: the child stays a zombie.
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	if processAlive(cmd.Process.Pid) {
		t.Fatal("a zombie counts as alive")
	}
	cmd.Wait()
	if processAlive(cmd.Process.Pid) {
		t.Fatal("a reaped child counts as alive")
	}
}
