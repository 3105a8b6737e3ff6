package confine

import (
	"golang.org/x/sys/unix"
)

// keptCaps says what a confined call started by this process keeps of its
// capabilities: nothing unless it runs as root without CAP_SETPCAP (root
// gets its bounding set back at execve, and only CAP_SETPCAP empties it).
// Empty when nothing is kept.
func keptCaps() string {
	if unix.Geteuid() != 0 || effectiveCap(unix.CAP_SETPCAP) {
		return ""
	}
	return "root's capabilities (peal lacks CAP_SETPCAP to drop them)"
}
