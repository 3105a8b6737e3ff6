//go:build !unix

package safefs

import (
	"errors"
	"fmt"
	"os"
)

// nonblock: named pipes are not files one opens by path here.
const nonblock = 0

// tryLock refuses on systems without flock rather than run unlocked, since
// the lock is what keeps two runs from sharing their work.
func tryLock(*os.File) (bool, error) {
	return false, fmt.Errorf("locking needs flock: %w", errors.ErrUnsupported)
}

func unlock(*os.File) error { return nil }
