package testbin

import "golang.org/x/sys/unix"

// memoryTemp is where a memory file system usually is.
const memoryTemp = "/dev/shm"

// roomyTmpfs reports whether dir is a tmpfs with at least room bytes free
// to an unprivileged user.
func roomyTmpfs(dir string, room uint64) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		return false
	}
	return st.Bavail*uint64(st.Bsize) >= room
}
