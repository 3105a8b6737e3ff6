//go:build !unix

package fakes

import "os"

// lock does nothing where flock does not exist: the fakes run their tests on
// Unix only, and elsewhere they only need to build.
func lock(*os.File, bool) error { return nil }

// exists reports whether a process pid can be found.
func exists(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	p.Release()
	return true
}
