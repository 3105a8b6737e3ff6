package confine

import (
	"os"
	"path/filepath"
	"slices"
)

// hostSockets are the UNIX sockets that hand whoever connects to them the
// machine: a container engine runs what it is asked to, as root.
var hostSockets = []string{"/var/run/docker.sock", "/run/docker.sock", "/run/podman/podman.sock", "/run/containerd/containerd.sock"}

// ReachableSockets are the container engines' sockets this process may
// connect to, where neither the kernel (Landlock before ABI 9) nor peal's
// supervisor of connections keeps a confined call from connecting to a
// socket by its path: through one, a call runs what it likes outside its
// confinement.
func ReachableSockets() []string {
	if s := Probe(); s.ABI >= unixABI || s.Supervise {
		return nil
	}
	list := slices.Clone(hostSockets)
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		list = append(list, filepath.Join(d, "docker.sock"), filepath.Join(d, "podman", "podman.sock"))
	}
	var out []string
	for _, p := range list {
		if info, err := os.Stat(p); err == nil && info.Mode()&os.ModeSocket != 0 && writable(p) {
			out = append(out, p)
		}
	}
	return out
}
