//go:build !unix

package state

import (
	"errors"
	"fmt"
	"os"
)

// tryLock refuses on systems without flock rather than run unlocked, since
// the lock is what keeps two runs from sharing an attempt.
func tryLock(*os.File) (bool, error) {
	return false, fmt.Errorf("ticket locking needs flock: %w", errors.ErrUnsupported)
}
