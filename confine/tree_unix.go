//go:build unix

package confine

import "syscall"

func notDirError() error { return syscall.ENOTDIR }
