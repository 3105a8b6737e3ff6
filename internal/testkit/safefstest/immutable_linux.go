package safefstest

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// fsImmutable is FS_IMMUTABLE_FL of linux/fs.h (chattr +i).
const fsImmutable = 0x10

// immutable sets the folder's immutable attribute, which stops root too.
func immutable(t testing.TB, dir string) {
	t.Helper()
	set := func(on bool) error {
		f, err := os.Open(dir)
		if err != nil {
			return err
		}
		defer f.Close()
		flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
		if err != nil {
			return err
		}
		if on {
			flags |= fsImmutable
		} else {
			flags &^= fsImmutable
		}
		return unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags))
	}
	if err := set(true); err != nil {
		t.Skipf("cannot make %s read-only for root here: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := set(false); err != nil {
			t.Errorf("clearing the immutable attribute of %s: %v", dir, err)
		}
	})
}
