//go:build darwin || freebsd

package worktree

import "golang.org/x/sys/unix"

// StatDisk is the free space of the file system of dir: what an
// unprivileged process may still write, in blocks, and the inodes left.
func StatDisk(dir string) (Space, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Space{}, err
	}
	return Space{Free: uint64(st.Bavail) * uint64(st.Bsize), Block: uint64(st.Bsize), Files: uint64(st.Ffree)}, nil
}
