//go:build unix

package confine

import "golang.org/x/sys/unix"

// writable reports whether this process may write path (connect, for a
// socket).
func writable(path string) bool { return unix.Access(path, unix.W_OK) == nil }
