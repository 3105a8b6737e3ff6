package phase

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"peal/confine"
	"peal/internal/testkit/testbin"
)

func init() {
	helpers["contain-daemon"] = containDaemon
	helpers["contain-daemon-1"] = daemonStage1
	helpers["contain-daemon-2"] = daemonStage2
}

// containDaemon starts a daemon as an agent's tool would hide one (its own
// session, its environment cleared, a double fork, SIGTERM and SIGHUP
// ignored, standard streams closed), waits until it holds a lock on
// args[0], and exits 3.
func containDaemon(args []string) int {
	r, w, err := os.Pipe()
	if err != nil {
		return 1
	}
	cmd := exec.Command("/proc/self/exe", "contain-daemon-1", args[0])
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Println(err)
		return 1
	}
	w.Close()
	cmd.Wait()
	if _, err := r.Read(make([]byte, 1)); err != nil {
		fmt.Println("the daemon did not start:", err)
		return 1
	}
	fmt.Println("daemon started")
	return 3
}

func daemonStage1(args []string) int {
	cmd := exec.Command("/proc/self/exe", "contain-daemon-2", args[0])
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{os.NewFile(3, "ready")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if cmd.Start() != nil {
		return 1
	}
	return 0
}

func daemonStage2(args []string) int {
	signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	if null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
		for fd := range 3 {
			syscall.Dup3(int(null.Fd()), fd, 0)
		}
	}
	f, err := os.Open(args[0])
	if err != nil || syscall.Flock(int(f.Fd()), syscall.LOCK_SH) != nil {
		return 1
	}
	ready := os.NewFile(3, "ready")
	ready.Write([]byte{1})
	ready.Close()
	time.Sleep(2 * time.Minute) // a bound, should nothing end it
	return 0
}

// lockFree tells whether no process holds a lock on path.
func lockFree(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}

// TestContainedDaemon: a daemon a confined call starts (its own session,
// its environment cleared, a double fork, SIGTERM ignored) is gone when
// Run returns, whether a PID namespace holds the call's processes or, where
// there is none, the launcher and peal as subreapers; the call's exit code
// is its program's.
func TestContainedDaemon(t *testing.T) {
	s := confine.Probe()
	if !s.Files {
		t.Skip("this kernel enforces no Landlock rules: " + s.String())
	}
	subreaper := s
	subreaper.PIDNamespace, subreaper.IPCNamespace, subreaper.UTSNamespace, subreaper.NetNamespace, subreaper.UserNamespace = false, false, false, false, false
	// The fallback without namespaces runs under auto: on refuses it.
	modes := []struct {
		name string
		sup  confine.Support
		mode confine.Mode
	}{{"as found", s, confine.On}}
	if s.PIDNamespace {
		modes = append(modes, struct {
			name string
			sup  confine.Support
			mode confine.Mode
		}{"subreapers", subreaper, confine.Auto})
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			root := t.TempDir()
			tree := filepath.Join(root, "tree")
			if err := os.Mkdir(tree, 0o755); err != nil {
				t.Fatal(err)
			}
			lock := filepath.Join(root, "daemon.lock")
			if err := os.WriteFile(lock, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			pol := confine.Base(filepath.Join(root, "home"))
			pol.Write = append(pol.Write, confine.Paths("work tree", tree)...)
			sup := m.sup
			spec := Spec{Phase: "execute", Argv: []string{exe, "contain-daemon", lock}, Dir: tree, Timeout: time.Minute, KillGrace: 5 * time.Second,
				Confine: &confine.Call{Mode: m.mode, Access: pol, Support: &sup}}
			res, err := Run(context.Background(), spec)
			if err != nil || res.ExitCode != 3 || res.Stdout != "daemon started\n" {
				t.Fatalf("Run = %v, exit %d, %q %q", err, res.ExitCode, res.Stdout, res.Stderr)
			}
			if !lockFree(t, lock) {
				t.Fatal("a process the call started is alive once Run returned")
			}
		})
	}
	// Unconfined, the daemon outlives its call: the test can fail.
	root := t.TempDir()
	lock := filepath.Join(root, "daemon.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Spec{Phase: "execute", Argv: []string{exe, "contain-daemon", lock}, Dir: root, Timeout: time.Minute, KillGrace: time.Second})
	if err != nil || res.ExitCode != 3 {
		t.Fatalf("unconfined: %v, exit %d", err, res.ExitCode)
	}
	if lockFree(t, lock) {
		t.Fatal("unconfined, the daemon did not outlive its call")
	}
	killHolders(lock)
}

// killHolders kills the processes that hold path open.
func killHolders(path string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		fds, _ := os.ReadDir("/proc/" + e.Name() + "/fd")
		for _, fd := range fds {
			if link, _ := os.Readlink("/proc/" + e.Name() + "/fd/" + fd.Name()); link == path {
				var pid int
				fmt.Sscan(e.Name(), &pid)
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// TestContainedCallTimeout: a confined call that overruns its timeout gets
// SIGTERM (its launcher does not), ends, and counts as timed out.
func TestContainedCallTimeout(t *testing.T) {
	s := confine.Probe()
	if !s.Files {
		t.Skip("this kernel enforces no Landlock rules: " + s.String())
	}
	root := t.TempDir()
	pol := confine.Base(filepath.Join(root, "home"))
	pol.Write = append(pol.Write, confine.Paths("work tree", root)...)
	spec := Spec{Phase: "execute", Argv: []string{"/bin/sh", "-c", `trap 'echo term; exit 7' TERM; echo up; while :; do sleep 0.01; done`}, Dir: root,
		Timeout: 300 * time.Millisecond, KillGrace: 10 * time.Second, Confine: &confine.Call{Mode: confine.On, Access: pol}}
	res, err := Run(context.Background(), spec)
	if err != nil || !res.TimedOut || res.ExitCode != 7 || res.Stdout != "up\nterm\n" {
		t.Fatalf("Run = %v, %+v", err, res)
	}
}

func TestContainedUnprivileged(t *testing.T) {
	testbin.RerunAsUser(t, "^(TestContainedDaemon|TestContainedCallTimeout|TestRunConfined|TestRunConfinedLaunchFails)$")
}

// TestEndOrphans: once peal is a subreaper, an orphan in a session of its
// own comes to it and endOrphans ends it, and its children after it; a
// child peal started and has not waited for stays.
func TestEndOrphans(t *testing.T) {
	if !adoptOrphans() {
		t.Skip("the kernel refused PR_SET_CHILD_SUBREAPER")
	}
	root := t.TempDir()
	lock := filepath.Join(root, "daemon.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// A child of peal's that lives in a session of its own.
	kept := exec.Command("sleep", "60")
	kept.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := startChild(kept); err != nil {
		t.Fatal(err)
	}
	defer func() {
		kept.Process.Kill()
		kept.Wait()
		forgetChild(kept.Process.Pid)
	}()
	// The daemon's first stage exits at once: the daemon is peal's orphan.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "contain-daemon", lock)
	if out, err := cmd.Output(); err == nil || cmd.ProcessState.ExitCode() != 3 || string(out) != "daemon started\n" {
		t.Fatalf("the daemon: %v %q", err, out)
	}
	if lockFree(t, lock) {
		t.Fatal("the daemon is not running")
	}
	endOrphans()
	if !lockFree(t, lock) {
		t.Fatal("the orphan is alive after endOrphans")
	}
	if err := kept.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("endOrphans ended a child peal started: %v", err)
	}
}
