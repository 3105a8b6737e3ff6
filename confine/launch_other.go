//go:build !linux

package confine

import (
	"errors"
	"os/exec"
)

// launcher is never reached where Probe finds nothing to enforce.
func (l *Launch) launcher(cmd *exec.Cmd, c *Call, pol Access, sup Support) error {
	return errors.New("confine: the launcher is Linux's")
}

// Wait has no launcher to wait for here.
func (l *Launch) Wait() error { return nil }

func (l *Launch) closeServed() {}

// netRules and supervisor are Linux's.
type netRules struct{}

type supervisor struct{}

// builtRuleset is Linux's.
type builtRuleset struct{}

func (l *Launch) dropRuleset() {}

// MakeAhead: network namespaces are Linux's.
func MakeAhead(Support) {}
