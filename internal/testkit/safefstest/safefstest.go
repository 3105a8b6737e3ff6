// Package safefstest helps tests put peal's folders in states that are hard
// to reach otherwise.
package safefstest

import (
	"os"
	"testing"
)

// ReadOnly makes the folder dir refuse new entries until the test ends, for
// root too (which ignores permission bits): it is made immutable where the
// file system allows it.
func ReadOnly(t testing.TB, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		return
	}
	immutable(t, dir)
}
