//go:build !linux && !darwin && !freebsd && !windows

package runner

import "errors"

// statDisk: this system's free space is not read; blocks run without a
// disk check.
func statDisk(string) (diskSpace, error) {
	return diskSpace{}, errors.New("free disk space unknown on this system")
}
