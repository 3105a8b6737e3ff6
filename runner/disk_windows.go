package runner

import "golang.org/x/sys/windows"

// statDisk is the free space of the volume of dir available to this
// process. Windows does not tell a cluster size here nor an inode count:
// files are counted as taking 4 KiB, NTFS's usual cluster.
func statDisk(dir string) (diskSpace, error) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return diskSpace{}, err
	}
	var free, total, totalFree uint64
	if err := windows.GetDiskFreeSpaceEx(p, &free, &total, &totalFree); err != nil {
		return diskSpace{}, err
	}
	return diskSpace{free: free, block: 4096}, nil
}
