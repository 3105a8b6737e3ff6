//go:build !linux

package testbin

import "testing"

// FullDisk: a file system of the test's own is only mounted on Linux.
func FullDisk(t *testing.T, prepare ...func(dir string)) string {
	t.Skip("a full disk is made on Linux only")
	return ""
}
