package confine

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// withSupport makes Probe answer s for the test.
func withSupport(t *testing.T, s Support) {
	old := probed
	probed = func() Support { return s }
	t.Cleanup(func() { probed = old })
}

func TestPrepareWithoutLandlock(t *testing.T) {
	withSupport(t, supportOf(0, "files and TCP are confined on Linux only"))
	p := NewProxy(nil)
	allow, _ := ParseAllow(KeyNetworkAllow, "api.example.com")
	pol := Base("/home/u")
	pol.TCP = &TCP{}

	// Under On nothing starts.
	cmd := exec.Command("true")
	cmd.Env = []string{"PATH=/usr/bin"}
	_, err := (&Call{Mode: On, Access: pol, Proxy: p, Allow: allow}).Prepare(cmd, "c1", "")
	if err == nil || err.Error() != "confine = on, but this machine cannot confine files: files and TCP are confined on Linux only" {
		t.Fatalf("On: %v", err)
	}

	// Under Auto the call gets its endpoint and environment, no launcher
	// (nothing is enforced).
	cmd = exec.Command("true")
	cmd.Env = []string{"PATH=/usr/bin"}
	path := cmd.Path
	l, err := (&Call{Mode: Auto, Access: pol, Proxy: p, Allow: allow}).Prepare(cmd, "c1", "")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if cmd.Path != path || len(cmd.ExtraFiles) != 0 {
		t.Errorf("a launcher without Landlock: %s %v", cmd.Path, cmd.ExtraFiles)
	}
	if want := append([]string{"PATH=/usr/bin"}, l.Endpoint().Env()...); !slices.Equal(cmd.Env, want) {
		t.Errorf("env = %q", cmd.Env)
	}
	if err := l.Wait(); err != nil {
		t.Errorf("Wait without a launcher: %v", err)
	}
}

func TestPrepareOff(t *testing.T) {
	cmd := exec.Command("true")
	l, err := (&Call{Mode: Off, Access: Access{Write: Paths("x", "relative")}, Proxy: NewProxy(nil)}).Prepare(cmd, "c1", "")
	if l != nil || err != nil || cmd.Env != nil || strings.HasPrefix(cmd.Path, "/proc") {
		t.Errorf("Off prepared something: %v %v %q", l, err, cmd.Env)
	}
	// A program that cannot be found fails in Start as before.
	cmd = exec.Command("no-such-program-anywhere")
	if l, err := (&Call{Mode: On}).Prepare(cmd, "c1", ""); l != nil || err != nil {
		t.Errorf("an unresolved program was prepared: %v %v", l, err)
	}
}
