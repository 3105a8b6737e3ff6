//go:build darwin || freebsd

package runner

import "golang.org/x/sys/unix"

// statDisk is the free space of the file system of dir: what an
// unprivileged process may still write, in blocks, and the inodes left.
func statDisk(dir string) (diskSpace, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return diskSpace{}, err
	}
	return diskSpace{free: uint64(st.Bavail) * uint64(st.Bsize), block: uint64(st.Bsize), files: uint64(st.Ffree)}, nil
}
