//go:build unix

package procs

import (
	"os"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

func TestStatDead(t *testing.T) {
	tests := map[string]bool{
		"12 (fakeagent) S 1 12 12 0":     false,
		"12 (fakeagent) Z 1 12 12 0":     true,
		"12 (weird) (name) R 1 12 12 0":  false,
		"12 (weird) Z (name) S 1 12 0 0": false,
		"12 (x) X 1":                     true,
		"12 (x) x 1":                     true,
		"garbage":                        false,
	}
	for stat, want := range tests {
		if got := statDead([]byte(stat)); got != want {
			t.Errorf("statDead(%q) = %v, want %v", stat, got, want)
		}
	}
}

// TestAliveZombie: this process and a running child are alive; a child that
// exited but is not reaped yet is not (on Linux, where /proc tells), nor is
// a reaped one, nor a pid that is not positive.
func TestAliveZombie(t *testing.T) {
	t.Parallel()
	if !Alive(os.Getpid()) {
		t.Fatal("this process is not alive")
	}
	if Alive(0) || Alive(-1) {
		t.Fatal("a pid that is not positive is alive")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !Alive(cmd.Process.Pid) {
		t.Fatal("a running child is not alive")
	}
	cmd.Process.Kill()
	// Wait for the exit without reaping: the child stays a zombie.
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "linux" && Alive(cmd.Process.Pid) {
		t.Fatal("a zombie counts as alive")
	}
	cmd.Wait()
	if Alive(cmd.Process.Pid) {
		t.Fatal("a reaped child counts as alive")
	}
}
