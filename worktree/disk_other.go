//go:build !linux && !darwin && !freebsd && !windows

package worktree

import "errors"

// StatDisk: this system's free space is not read; blocks run without a
// disk check.
func StatDisk(string) (Space, error) {
	return Space{}, errors.New("free disk space unknown on this system")
}
