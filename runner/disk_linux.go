package runner

import "golang.org/x/sys/unix"

// statDisk is the free space of the file system of dir: what an
// unprivileged process may still write, in fragments (the unit a file
// takes), and the inodes left.
func statDisk(dir string) (diskSpace, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return diskSpace{}, err
	}
	unit := uint64(st.Frsize)
	if unit == 0 {
		unit = uint64(st.Bsize)
	}
	return diskSpace{free: uint64(st.Bavail) * unit, block: unit, files: uint64(st.Ffree)}, nil
}
