//go:build unix

package testbin

import (
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// UserEnv is set in the environment of a test run again as an unprivileged
// user (RerunAsUser).
const UserEnv = "PEAL_TEST_AS_USER"

// Unprivileged is the account the tests run as when they try what an
// unprivileged user gets: PEAL_TEST_USER (made with useradd), else nobody.
// ok is false when there is none.
func Unprivileged() (u *user.User, ok bool) {
	name := os.Getenv("PEAL_TEST_USER")
	if name == "" {
		name = "nobody"
	}
	u, err := user.Lookup(name)
	if err != nil || u.Uid == "0" {
		return nil, false
	}
	return u, true
}

// RerunAsUser runs the tests that match pattern again, in a copy of this
// test binary, as the unprivileged user (Unprivileged), and fails with
// their output when they fail. It skips when this process is not root
// (the tests ran as an unprivileged user already), when it is itself such
// a run, or when the machine has no such user. The run gets a temporary
// folder and a home of the user's own.
func RerunAsUser(t *testing.T, pattern string) {
	t.Helper()
	switch {
	case os.Getenv(UserEnv) != "":
		t.Skip("this is the run as an unprivileged user")
	case os.Geteuid() != 0:
		t.Skip("not root: the tests ran as an unprivileged user already")
	}
	u, ok := Unprivileged()
	if !ok {
		t.Skip("no unprivileged user to run as: make one with useradd and name it in PEAL_TEST_USER")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("/tmp", "peal-as-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "test.bin")
	if err := copyFile(os.Args[0], bin, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmp, uid, gid); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", pattern, "-test.count=1", "-test.v")
	cmd.Dir = tmp
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp, "TMPDIR=" + tmp, "USER=" + u.Username, "LANG=C.UTF-8", UserEnv + "=1"}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PEAL_TEST_") || strings.HasPrefix(kv, "GOCOVERDIR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "\nPASS\n") {
		t.Fatalf("as %s (uid %d): %v\n%s", u.Username, uid, err, out)
	}
	if !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("as %s (uid %d), no test ran:\n%s", u.Username, uid, out)
	}
	t.Logf("as %s (uid %d):\n%s", u.Username, uid, out)
}

func copyFile(from, to string, perm os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
