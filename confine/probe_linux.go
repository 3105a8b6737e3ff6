package confine

import (
	"errors"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

func probe() Support {
	abi, err := ll.LandlockGetABIVersion()
	switch {
	case errors.Is(err, syscall.ENOSYS):
		return supportOf(0, "this Linux has no Landlock (it needs Linux 5.13 built with Landlock)")
	case errors.Is(err, syscall.EOPNOTSUPP):
		return supportOf(0, "Landlock is disabled in this Linux (add landlock to the lsm= boot parameter)")
	case err != nil:
		return supportOf(0, "Landlock cannot be asked for its version: "+err.Error())
	}
	s := supportOf(abi, "")
	s.CapsKept = keptCaps()
	return s
}
