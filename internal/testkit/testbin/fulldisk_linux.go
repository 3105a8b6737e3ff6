package testbin

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// FullDisk is a folder on a file system of its own that is full: a tmpfs
// of 256 KiB mounted for the test (unmounted at its end), filled to its
// last byte after prepare (each) has put there what the test needs. It
// skips the test where no file system can be mounted (not root).
func FullDisk(t *testing.T, prepare ...func(dir string)) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=256k,nr_inodes=64"); err != nil {
		t.Skipf("no file system of the test's own can be mounted: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	for _, p := range prepare {
		p(dir)
	}
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 4096)
	for {
		if _, err := f.Write(block); err != nil {
			if !errors.Is(err, unix.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	// What a block cannot take, a byte at a time.
	for {
		if _, err := f.Write(block[:1]); err != nil {
			break
		}
	}
	return dir
}
