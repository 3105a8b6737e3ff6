//go:build !linux

package safefstest

import "testing"

func immutable(t testing.TB, dir string) {
	t.Skipf("no way to make %s read-only for root here", dir)
}
