package worktree

import "golang.org/x/sys/unix"

// StatDisk is the free space of the file system of dir: what an
// unprivileged process may still write, in fragments (the unit a file
// takes), and the inodes left.
func StatDisk(dir string) (Space, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Space{}, err
	}
	unit := uint64(st.Frsize)
	if unit == 0 {
		unit = uint64(st.Bsize)
	}
	return Space{Free: uint64(st.Bavail) * unit, Block: unit, Files: uint64(st.Ffree)}, nil
}
