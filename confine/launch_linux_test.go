package confine

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// needLandlock skips a test on a kernel without Landlock file rules: the
// only reason a test of this file may skip.
func needLandlock(t *testing.T) Support {
	t.Helper()
	s := Probe()
	if !s.Files {
		t.Skip("this kernel enforces no Landlock rules: " + s.String())
	}
	return s
}

// scratch is a scratch home with planted secrets and a work tree.
type scratch struct {
	root, home, tree, outside string
}

func newScratch(t *testing.T) scratch {
	t.Helper()
	root := t.TempDir()
	s := scratch{root: root, home: filepath.Join(root, "home"), tree: filepath.Join(root, "tree"), outside: filepath.Join(root, "outside")}
	for _, d := range []string{s.home + "/.ssh", s.home + "/.aws", s.tree, s.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, s.home+"/.ssh/id_ed25519", "PRIVATE KEY\n")
	writeFile(t, s.home+"/.aws/credentials", "[default]\naws_secret_access_key=x\n")
	writeFile(t, s.home+"/.profile", "# profile\n")
	return s
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// policy is the policy of an agent call in s.tree.
func (s scratch) policy() Policy {
	p := Base(s.home)
	p.Write = append(p.Write, Paths("work tree", s.tree)...)
	return p
}

// run runs the helper with args under call and returns its output line and
// the error of its start or exit.
func run(t *testing.T, call *Call, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Dir = dir
	cmd.Env = append(call.Environ(append(os.Environ(), env...)), helperEnv+"=1")
	call.EnvPass = append(call.EnvPass, helperEnv)
	l, err := call.Prepare(cmd, t.Name(), "")
	if err != nil {
		return "", err
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if l != nil {
		defer l.Close()
		if err := l.Wait(); err != nil {
			cmd.Wait()
			return out.String(), err
		}
	}
	err = cmd.Wait()
	return strings.TrimSpace(out.String()), err
}

func TestLandlockFiles(t *testing.T) {
	needLandlock(t)
	s := newScratch(t)
	os.Symlink(s.home+"/.ssh/id_ed25519", s.tree+"/key")
	call := &Call{Mode: On, Policy: s.policy()}
	denied := "permission denied"
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"write its tree", []string{"write", s.tree + "/new.txt"}, "ok"},
		{"mkdir in its tree", []string{"mkdir", s.tree + "/sub"}, "ok"},
		{"read /usr", []string{"read", "/usr/bin/env"}, "ok"},
		{"write outside", []string{"write", s.outside + "/x"}, "open " + s.outside + "/x: " + denied},
		{"write home", []string{"write", s.home + "/.bashrc"}, "open " + s.home + "/.bashrc: " + denied},
		{"read ssh key", []string{"read", s.home + "/.ssh/id_ed25519"}, "open " + s.home + "/.ssh/id_ed25519: " + denied},
		{"read aws", []string{"read", s.home + "/.aws/credentials"}, "open " + s.home + "/.aws/credentials: " + denied},
		{"list ssh", []string{"list", s.home + "/.ssh"}, "open " + s.home + "/.ssh: " + denied},
		{"link to key", []string{"read", s.tree + "/key"}, "open " + s.tree + "/key: " + denied},
		{"read other home file", []string{"read", s.home + "/.profile"}, "ok"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := run(t, call, s.tree, nil, c.args...)
			if got != c.want {
				t.Fatalf("got %q (%v), want %q", got, err, c.want)
			}
			var le *LaunchError
			if errors.As(err, &le) {
				t.Fatal(err)
			}
		})
	}
}
