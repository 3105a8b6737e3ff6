package worktree

import "golang.org/x/sys/windows"

// StatDisk is the free space of the volume of dir available to this
// process. Windows does not tell a cluster size here nor an inode count:
// files are counted as taking 4 KiB, NTFS's usual cluster.
func StatDisk(dir string) (Space, error) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return Space{}, err
	}
	var free, total, totalFree uint64
	if err := windows.GetDiskFreeSpaceEx(p, &free, &total, &totalFree); err != nil {
		return Space{}, err
	}
	return Space{Free: free, Block: 4096}, nil
}
