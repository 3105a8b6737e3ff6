//go:build linux || darwin || freebsd

package safefs

import "golang.org/x/sys/unix"

// freeSpace is what an unprivileged writer may still write on the disk of
// dir, in bytes, and the inodes left.
func freeSpace(dir string) (free, files uint64, ok bool) {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return 0, 0, false
	}
	return uint64(st.Bavail) * uint64(st.Bsize), uint64(st.Ffree), true
}
