//go:build !linux

package confine

import (
	"errors"
	"os/exec"
)

// launcher is never reached where Probe finds no Landlock.
func (l *Launch) launcher(cmd *exec.Cmd, pol Policy, sup Support) error {
	return errors.New("confine: Landlock is Linux's")
}
