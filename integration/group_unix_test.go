//go:build unix

package integration

import (
	"os/exec"
	"syscall"
)

// setGroup runs cmd in its own process group and kills the whole group when
// its context ends: the CLIs start helpers (node workers, MCP servers) that
// would otherwise keep the output pipes open.
func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
