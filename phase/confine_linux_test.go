package phase

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"peal/confine"
)

// TestRunConfined runs a call under a policy through Run: the child is
// confined, sees the allowed environment and its proxy endpoint, writes its
// tree and its temporary folder and nothing else; the endpoint closes with
// the call.
func TestRunConfined(t *testing.T) {
	if s := confine.Probe(); !s.Files {
		t.Skip("this kernel enforces no Landlock rules: " + s.String())
	}
	root := t.TempDir()
	tree, outside := filepath.Join(root, "tree"), filepath.Join(root, "outside")
	for _, d := range []string{tree, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("GITHUB_TOKEN", "ghp_secret")
	pol := confine.Base(filepath.Join(root, "home"))
	pol.Write = append(pol.Write, confine.Paths("work tree", tree)...)
	pol.TCP = &confine.TCP{}
	spec := Spec{
		Phase: "execute",
		Argv: []string{"/bin/sh", "-c", `echo "token=$GITHUB_TOKEN proxy=$HTTPS_PROXY phase=$PEAL_PHASE"
echo in > inside && echo tmp > "$TMPDIR/t" && echo inside ok
echo out > ` + outside + `/x`},
		Dir:            tree,
		Env:            []string{"PEAL_PHASE=execute"},
		Timeout:        time.Minute,
		KillGrace:      time.Second,
		TempRoot:       filepath.Join(root, "tmp"),
		CombinedOutput: true,
		Confine:        &confine.Call{Mode: confine.On, Access: pol, Proxy: confine.NewProxy(nil)},
	}
	res, err := Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "token= proxy=http://127.0.0.1:") || !strings.HasSuffix(lines[0], " phase=execute") ||
		lines[1] != "inside ok" || lines[2] != "/bin/sh: 3: cannot create "+outside+"/x: Permission denied" || res.ExitCode != 2 {
		t.Fatalf("exit %d, output:\n%s", res.ExitCode, res.Stdout)
	}
	if _, err := os.Stat(filepath.Join(tree, "inside")); err != nil {
		t.Error(err)
	}
	proxyAddr := strings.TrimPrefix(strings.Fields(lines[0])[1], "proxy=http://")
	if c, err := net.Dial("tcp", proxyAddr); err == nil {
		c.Close()
		t.Errorf("the call's proxy endpoint %s outlived it", proxyAddr)
	}
	if got := confine.Explain(&spec.Confine.Access, tree, lines, nil); got != "the call was refused writing "+outside+"/x: it is outside what the call may write; confine_write_paths = [\""+outside+"\"] would allow it" {
		t.Errorf("Explain = %q", got)
	}
}

// TestRunConfinedLaunchFails: a program the policy does not let the call
// run never runs, and the call fails as a StartError with the launcher's
// line.
func TestRunConfinedLaunchFails(t *testing.T) {
	if s := confine.Probe(); !s.Files {
		t.Skip("this kernel enforces no Landlock rules: " + s.String())
	}
	root := t.TempDir()
	home := filepath.Join(root, "home")
	prog := filepath.Join(home, ".ssh", "tool")
	if err := os.MkdirAll(filepath.Dir(prog), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prog, []byte("#!/bin/sh\ntouch "+root+"/ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := Spec{
		Phase: "check", Argv: []string{prog}, Dir: root, Timeout: time.Minute, KillGrace: time.Second,
		Confine: &confine.Call{Mode: confine.On, Access: confine.Base(home)},
	}
	res, err := Run(context.Background(), spec)
	var se *StartError
	var le *confine.LaunchError
	if !errors.As(err, &se) || !errors.As(err, &le) || se.Program != prog ||
		err.Error() != "cannot start "+prog+": confine: cannot run "+prog+": permission denied" {
		t.Fatalf("Run = %v, %+v", err, res)
	}
	if _, err := os.Stat(filepath.Join(root, "ran")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the program ran (%v)", err)
	}
}
