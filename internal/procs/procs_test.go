package procs

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The limit holds unless GOMAXPROCS is set, which wins. Each case runs in a
// child process: GOMAXPROCS is a process-wide setting.
func TestLimit(t *testing.T) {
	if os.Getenv("PROCS_CHILD") != "" {
		Limit()
		os.Stdout.WriteString("gomaxprocs=" + strconv.Itoa(runtime.GOMAXPROCS(0)))
		return
	}
	base := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOMAXPROCS=") })
	for _, c := range []struct{ env, want string }{{"", "1"}, {"GOMAXPROCS=3", "3"}} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLimit$")
		cmd.Env = append(slices.Clone(base), "PROCS_CHILD=1")
		if c.env != "" {
			cmd.Env = append(cmd.Env, c.env)
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), "gomaxprocs="+c.want) {
			t.Errorf("with %q: %s, want GOMAXPROCS %s", c.env, out, c.want)
		}
	}
}
