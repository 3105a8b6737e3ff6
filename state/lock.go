package state

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"

	"peal/internal/safefs"
)

// LockFolder takes the lock of the state folder dir, which a run holds for
// its whole length, for a command that changes what the folder's runs keep
// (`peal clean`): it fails at once, wrapping ErrStateLocked, while a run
// uses the folder. A folder that does not exist is used by no run: release
// is then a no-op. release gives the lock back.
func LockFolder(dir string) (release func(), err error) {
	d, err := safefs.OpenDir(dir, false)
	if errors.Is(err, fs.ErrNotExist) {
		return func() {}, nil
	}
	if err != nil {
		return nil, folderError(dir, err)
	}
	lock, err := d.Lock(LockName)
	if errors.Is(err, safefs.ErrLocked) {
		d.Close()
		return nil, &lockedError{fmt.Sprintf("state folder %s is in use by a peal run (it holds %s): what the folder's runs keep is theirs until it ends; try again then",
			dir, d.Join(LockName))}
	}
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("state folder %s: %w", dir, cause(err))
	}
	return func() {
		lock.Close()
		d.Close()
	}, nil
}

// CallScope is the call-id scope of runs on the state folder dir: a short
// hash of its path, carried by every call such a run starts, so that the
// next run on the folder finds what a dead one left running
// (phase.SweepLeftovers).
func CallScope(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return hex.EncodeToString(sum[:6])
}
