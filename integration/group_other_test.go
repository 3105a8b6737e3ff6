//go:build !unix

package integration

import "os/exec"

func setGroup(cmd *exec.Cmd) {}
