//go:build unix

package confine

import (
	"net"
	"path/filepath"
	"slices"
	"testing"
)

// A container engine's socket this process may use is named, where the
// kernel does not check connections to sockets by path.
func TestReachableSockets(t *testing.T) {
	if s := Probe(); s.ABI >= unixABI || s.Supervise {
		t.Skip("connections to UNIX sockets are checked here: " + s.String())
	}
	dir := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", dir)
	if slices.Contains(ReachableSockets(), filepath.Join(dir, "docker.sock")) {
		t.Fatal("a socket that does not exist is named")
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "docker.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if !slices.Contains(ReachableSockets(), filepath.Join(dir, "docker.sock")) {
		t.Fatalf("the engine's socket is not named: %q", ReachableSockets())
	}
}
