package safefs

import (
	"errors"
	"fmt"
	"syscall"
)

// FullError is a write refused, or a check failed, because a disk is full:
// Dir names the folder whose disk it is, so that the line says where to
// make room. Every later write there would meet it, so it ends a run.
type FullError struct {
	Dir string
	Err error
}

func (e *FullError) Error() string {
	return fmt.Sprintf("the disk holding %s is full (%v): free space there, then run peal again", e.Dir, e.Err)
}

func (e *FullError) Unwrap() error { return e.Err }

// EndsRun: no task can write there any more (see phase.RunEnder).
func (e *FullError) EndsRun() bool { return true }

// Full is err as a *FullError for dir when it is a write refused for want of
// space (ENOSPC, or EDQUOT: a quota's disk is full for its user); other
// errors, and nil, are returned as they are.
func Full(err error, dir string) error {
	var fe *FullError
	if err == nil || errors.As(err, &fe) || !(errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)) {
		return err
	}
	return &FullError{Dir: dir, Err: Reason(err)}
}

// minFree is the free space under which a disk counts as full for what
// failed on it: less than a small file and its folder's growth.
const minFree = 64 << 10

// DiskFull reports whether the disk holding dir is full for an
// unprivileged writer: less than 64 KiB or no inode left. It is false
// where the free space cannot be read.
func DiskFull(dir string) bool {
	free, files, ok := freeSpace(dir)
	return ok && (free < minFree || files == 0)
}
