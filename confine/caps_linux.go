package confine

import (
	"strings"

	"golang.org/x/sys/unix"

	"peal/confine/launch"
)

// keptCaps says which of launch.DroppedCaps a confined call started by this
// process keeps: none unless it runs as root without CAP_SETPCAP (root
// gets its bounding set back at execve, and only CAP_SETPCAP narrows it).
// Empty when nothing is kept.
func keptCaps() string {
	if unix.Geteuid() != 0 || effectiveCap(unix.CAP_SETPCAP) {
		return ""
	}
	var kept []string
	for _, c := range launch.DroppedCaps {
		if launch.InBoundingSet(c.N) {
			kept = append(kept, c.Name)
		}
	}
	return strings.Join(kept, ", ")
}
