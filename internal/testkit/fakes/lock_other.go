//go:build !unix

package fakes

import "os"

// lock does nothing where flock does not exist: the fakes run their tests on
// Unix only, and elsewhere they only need to build.
func lock(*os.File, bool) error { return nil }
