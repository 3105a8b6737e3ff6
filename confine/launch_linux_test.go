package confine

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// These tests run a child under a real Landlock access: the test binary
// itself (see helper), started through the launcher, tries one thing. They
// skip only on a kernel without Landlock.

// needLandlock skips a test on a kernel without Landlock file rules.
func needLandlock(t *testing.T) Support {
	t.Helper()
	s := Probe()
	if !s.Files {
		t.Skip("this kernel enforces no Landlock rules: " + s.String())
	}
	return s
}

// scratch is a scratch home with planted secrets, a work tree and a folder
// outside it, all beneath the test's temporary folder.
type scratch struct {
	root, home, tree, outside, temp string
}

func newScratch(t *testing.T) scratch {
	t.Helper()
	root := t.TempDir()
	s := scratch{root: root, home: root + "/home", tree: root + "/tree", outside: root + "/outside", temp: root + "/tmp/call-1"}
	for _, d := range []string{s.home + "/.ssh", s.home + "/.aws", s.home + "/.config/gh", s.tree, s.outside, s.temp} {
		mkdir(t, d)
	}
	writeFile(t, s.home+"/.ssh/id_ed25519", "PRIVATE KEY\n")
	writeFile(t, s.home+"/.aws/credentials", "[default]\naws_secret_access_key=x\n")
	writeFile(t, s.home+"/.config/gh/hosts.yml", "oauth_token: x\n")
	writeFile(t, s.home+"/.profile", "# profile\n")
	return s
}

func mkdir(t *testing.T, d string) {
	t.Helper()
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// access is the access of an agent call whose work tree is tree.
func (s scratch) access(tree string) Access {
	p := Base(s.home)
	p.Write = append(p.Write, Paths("work tree", tree)...)
	p.TCP = &TCP{}
	return p
}

// child is one confined run of the helper.
type child struct {
	call    *Call
	id      string // the call's id, for the proxy
	dir     string
	tempDir string
	env     []string // added to this process's environment, then filtered
	// before, when set, sees the launch before the child starts.
	before func(*Launch)
}

// run runs the helper with args and returns its output line and the error
// of its start or exit.
func (c child) run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	call := *c.call
	call.EnvPass = append(append([]string(nil), call.EnvPass...), helperEnv)
	cmd := exec.Command(exe, args...)
	cmd.Dir = c.dir
	cmd.Env = call.Environ(append(append(os.Environ(), c.env...), helperEnv+"=1"))
	id := c.id
	if id == "" {
		id = t.Name()
	}
	l, err := call.Prepare(cmd, id, c.tempDir)
	if err != nil {
		return "", err
	}
	if c.before != nil {
		c.before(l)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if l != nil {
		defer l.Close()
		if err := l.Wait(); err != nil {
			cmd.Wait()
			return strings.TrimSpace(out.String()), err
		}
		if l.Launched() {
			// As phase does once the program has exited: the launcher
			// ends what is left of the call.
			<-l.Done()
			cmd.Process.Kill()
		}
	}
	err = cmd.Wait()
	if code, ok := l.ExitCode(); ok {
		err = nil
		if code != 0 {
			err = fmt.Errorf("exit status %d", code)
		}
	}
	return strings.TrimSpace(out.String()), err
}

type attempt struct {
	name string
	args []string
	want string
}

// try runs each attempt in a child of its own and checks its exact line.
func (c child) try(t *testing.T, attempts []attempt) {
	t.Helper()
	for _, a := range attempts {
		t.Run(a.name, func(t *testing.T) {
			got, err := c.run(t, a.args...)
			var le *LaunchError
			if errors.As(err, &le) {
				t.Fatal(err)
			}
			if got != a.want {
				t.Fatalf("%v: got %q (%v), want %q", a.args, got, err, a.want)
			}
		})
	}
}

const denied = ": permission denied"

func TestLandlockFiles(t *testing.T) {
	for _, m := range landlockModes(t) {
		t.Run(m.name, func(t *testing.T) { landlockFiles(t, m) })
	}
}

// landlockModes are the ways this machine confines files (machineModes).
func landlockModes(t *testing.T) []mode {
	t.Helper()
	return machineModes(needLandlock(t))
}

func landlockFiles(t *testing.T, m mode) {
	s := newScratch(t)
	if err := os.Symlink(s.home+"/.ssh/id_ed25519", s.tree+"/key"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(s.home+"/.aws", s.tree+"/aws"); err != nil {
		t.Fatal(err)
	}
	c := child{call: &Call{Mode: m.mode, Access: s.access(s.tree), Support: m.sup}, dir: s.tree, tempDir: s.temp,
		env: []string{"GITHUB_TOKEN=ghp_secret", "AWS_SECRET_ACCESS_KEY=x", "NPM_TOKEN=x", "LANG=C.UTF-8"}}
	// Landlock refuses a confined process the access to a process outside
	// it: its memory and, to a process without the capabilities the
	// launcher drops (see launch.DroppedCaps), its environment. In a PID
	// namespace of its own, the call does not even see them.
	parentMem := "/proc/" + strconv.Itoa(os.Getpid()) + "/mem"
	parentEnv := "/proc/" + strconv.Itoa(os.Getpid()) + "/environ"
	outsider := denied
	if m.sup.PIDNamespace {
		outsider = ": no such file or directory"
	}
	root := os.Geteuid() == 0
	c.try(t, []attempt{
		// Legitimate work.
		{"write its tree", []string{"write", s.tree + "/new.txt"}, "ok"},
		{"make a folder in its tree", []string{"mkdir", s.tree + "/sub"}, "ok"},
		{"write its temp folder", []string{"write", s.temp + "/scratch"}, "ok"},
		{"read /usr", []string{"read", "/usr/bin/env"}, "ok"},
		{"read a home file that is no secret", []string{"read", s.home + "/.profile"}, "ok"},
		{"write /dev/null", []string{"write", "/dev/null"}, "ok"},
		{"run a shell in its tree", []string{"run", "echo x > made-by-sh && cat made-by-sh >/dev/null"}, "ok"},
		{"keeps LANG", []string{"env", "LANG"}, "set: C.UTF-8"},
		// Escapes.
		{"write outside its tree", []string{"write", s.outside + "/x"}, "open " + s.outside + "/x" + denied},
		{"write its home", []string{"write", s.home + "/.bashrc"}, "open " + s.home + "/.bashrc" + denied},
		{"write the temp root", []string{"write", s.root + "/tmp/other"}, "open " + s.root + "/tmp/other" + denied},
		{"read the ssh key", []string{"read", s.home + "/.ssh/id_ed25519"}, "open " + s.home + "/.ssh/id_ed25519" + denied},
		{"read the aws credentials", []string{"read", s.home + "/.aws/credentials"}, "open " + s.home + "/.aws/credentials" + denied},
		{"read the gh token", []string{"read", s.home + "/.config/gh/hosts.yml"}, "open " + s.home + "/.config/gh/hosts.yml" + denied},
		{"list the ssh folder", []string{"list", s.home + "/.ssh"}, "open " + s.home + "/.ssh" + denied},
		{"follow a link in its tree to the key", []string{"read", s.tree + "/key"}, "open " + s.tree + "/key" + denied},
		{"follow a link in its tree to the aws folder", []string{"read", s.tree + "/aws/credentials"}, "open " + s.tree + "/aws/credentials" + denied},
		{"read peal's memory", []string{"read", parentMem}, "open " + parentMem + outsider},
		{"read peal's environment", []string{"read", parentEnv}, "open " + parentEnv + outsider},
		{"make a device node in its tree", []string{"mknod", s.tree + "/null"}, "mknod " + s.tree + "/null" + denied},
		{"hold a capability a call never holds", []string{"caps", "/proc/self/status"}, "ok"},
		{"see GITHUB_TOKEN", []string{"env", "GITHUB_TOKEN"}, "unset"},
		{"see AWS_SECRET_ACCESS_KEY", []string{"env", "AWS_SECRET_ACCESS_KEY"}, "unset"},
		{"see NPM_TOKEN", []string{"env", "NPM_TOKEN"}, "unset"},
		{"shell writes outside", []string{"run", "echo x > " + s.outside + "/y"}, "exit status 2: sh: 1: cannot create " + s.outside + "/y: Permission denied"},
	})
	// The same child, unconfined, reaches all of it: the attempts above
	// fail because of the access, not of the scratch set-up.
	open := child{call: &Call{Mode: Off}, dir: s.tree, env: []string{"GITHUB_TOKEN=ghp_secret"}}
	open.try(t, []attempt{
		{"unconfined reads the key", []string{"read", s.tree + "/key"}, "ok"},
		{"unconfined writes outside", []string{"write", s.outside + "/x"}, "ok"},
		{"unconfined sees GITHUB_TOKEN", []string{"env", "GITHUB_TOKEN"}, "set: ghp_secret"},
		{"unconfined reads peal's environment", []string{"read", parentEnv}, "ok"},
	})
	if root && keptCaps() == "" {
		// Root with its capabilities makes devices and reads any
		// process's environment unconfined, and (measured) also under
		// Landlock rules alone, with CAP_SYS_ADMIN or CAP_PERFMON.
		open.try(t, []attempt{{"unconfined makes a device node", []string{"mknod", s.tree + "/null"}, "ok"}})
		if got, _ := open.run(t, "caps", "/proc/self/status"); !strings.HasPrefix(got, "holds ") {
			t.Errorf("unconfined, root's capabilities: %q, want those a call never holds", got)
		}
	}
	for _, f := range []string{s.outside + "/y", s.home + "/.bashrc"} {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after the confined attempts (%v)", f, err)
		}
	}
}

// pendingConns tells whether l has a connection waiting to be accepted,
// without waiting: a connect the kernel let through is queued by the time
// the child that made it has exited.
func pendingConns(t *testing.T, l net.Listener) bool {
	t.Helper()
	raw, err := l.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	pending := false
	raw.Control(func(fd uintptr) {
		nfd, _, err := unix.Accept4(int(fd), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err == nil {
			unix.Close(nfd)
			pending = true
		} else if !errors.Is(err, syscall.EAGAIN) {
			t.Fatal(err)
		}
	})
	return pending
}

func TestLandlockNetwork(t *testing.T) {
	if !needLandlock(t).TCP {
		t.Skip("this kernel has no Landlock TCP rules: " + Probe().String())
	}
	s := newScratch(t)
	// A listener nothing allows, and a server the allow list names.
	stray, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stray.Close()
	served := make(chan string, 16)
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served <- r.Method + " " + r.Host
		fmt.Fprintln(w, "hello")
	}))
	defer allowed.Close()
	allowedHost := strings.TrimPrefix(allowed.URL, "http://")

	proxy := NewProxy(nil)
	allow, err := ParseAllow(KeyNetworkAllow, allowedHost)
	if err != nil {
		t.Fatal(err)
	}
	c := child{call: &Call{Mode: On, Access: s.access(s.tree), Proxy: proxy, Allow: allow}, dir: s.tree, id: "call-net"}
	strayAddr := stray.Addr().String()
	c.try(t, []attempt{
		{"connect to a listener that is not the proxy", []string{"dial", strayAddr}, "dial tcp " + strayAddr + ": connect" + denied},
		{"connect to the allowed server directly", []string{"dial", allowedHost}, "dial tcp " + allowedHost + ": connect" + denied},
		{"reach the allowed server through a tunnel", []string{"tunnel", allowedHost}, "ok"},
		{"reach the allowed server in absolute form", []string{"get", allowed.URL + "/x"}, "ok"},
		{"tunnel to a host not on the list", []string{"tunnel", strayAddr}, "proxy answered 403: " + RefusalLine(strayAddr)},
		{"absolute form to a host not on the list", []string{"get", "http://" + strayAddr + "/"}, "status 403"},
	})
	if pendingConns(t, stray) {
		t.Error("a connection reached the listener nothing allowed")
	}
	for _, want := range []string{"GET " + allowedHost, "GET " + allowedHost} {
		if got := <-served; got != want {
			t.Errorf("the allowed server served %q, want %q", got, want)
		}
	}
	refused, n := proxy.Refusals("call-net")
	if n != 2 || len(refused) != 2 || refused[0].Host != strayAddr || refused[0].Method != "CONNECT" || refused[1].Method != "GET" {
		t.Errorf("refusals = %+v (%d)", refused, n)
	}
	if proxy.Refused() != 2 {
		t.Errorf("total refusals = %d", proxy.Refused())
	}
	if got, want := Explain(&c.call.Access, s.tree, []string{"dial tcp " + strayAddr + ": connect" + denied}, nil),
		"the call was refused a direct connection to "+strayAddr+": confined calls connect only through peal's proxy (HTTPS_PROXY); confine_network_allow names the hosts it may reach"; got != want {
		t.Errorf("Explain = %q, want %q", got, want)
	}
	// Unconfined, the same child reaches the stray listener: the attempt
	// above failed because of the access.
	open := child{call: &Call{Mode: Off}, dir: s.tree}
	open.try(t, []attempt{{"unconfined connects", []string{"dial", strayAddr}, "ok"}})
	if !pendingConns(t, stray) {
		t.Error("the unconfined connection did not reach the listener")
	}
}

func TestLaunchFailure(t *testing.T) {
	needLandlock(t)
	s := newScratch(t)
	// A program the access does not let the call run: the launcher cannot
	// exec it and the call fails before anything of it ran.
	prog := s.home + "/.ssh/tool"
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prog, b, 0o755); err != nil {
		t.Fatal(err)
	}
	call := &Call{Mode: On, Access: s.access(s.tree)}
	cmd := exec.Command(prog, "write", s.tree+"/ran")
	cmd.Env = call.Environ(append(os.Environ(), helperEnv+"=1"))
	l, err := call.Prepare(cmd, "x", "")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err = l.Wait()
	werr := cmd.Wait()
	var le *LaunchError
	if !errors.As(err, &le) || le.Msg != "confine: cannot run "+prog+": permission denied" {
		t.Fatalf("Wait = %v", err)
	}
	if werr == nil || cmd.ProcessState.ExitCode() != 127 {
		t.Errorf("the launcher exited with %v", werr)
	}
	if _, err := os.Stat(s.tree + "/ran"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the program ran (%v)", err)
	}
}

func TestPrepareRefusesBadAccess(t *testing.T) {
	needLandlock(t)
	s := newScratch(t)
	for _, c := range []struct {
		name string
		add  func(*Access)
		want string
	}{
		{"relative path", func(p *Access) { p.Write = append(p.Write, Paths(KeyWritePaths, "cache")...) },
			`confine: confine_write_paths: "cache" is not a full path`},
		{"write a secret", func(p *Access) { p.Write = append(p.Write, Paths(KeyWritePaths, s.home+"/.ssh")...) },
			`confine: confine_write_paths: "` + s.home + `/.ssh" lies in ` + s.home + `/.ssh, which is never readable (secret)`},
		{"dot-dot into a secret", func(p *Access) { p.Read = append(p.Read, Paths(KeyWritePaths, s.tree+"/../home/.aws")...) },
			`confine: confine_write_paths: "` + s.tree + `/../home/.aws" lies in ` + s.home + `/.aws, which is never readable (secret)`},
		{"link to a secret", func(p *Access) {
			os.Symlink(s.home+"/.aws", s.root+"/aws-link")
			p.Write = append(p.Write, Paths(KeyWritePaths, s.root+"/aws-link")...)
		}, `confine: confine_write_paths: "` + s.root + `/aws-link" lies in ` + s.home + `/.aws, which is never readable (secret)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			pol := s.access(s.tree)
			c.add(&pol)
			cmd := exec.Command("true")
			_, err := (&Call{Mode: Auto, Access: pol}).Prepare(cmd, "x", "")
			if err == nil || err.Error() != c.want {
				t.Fatalf("Prepare = %v, want %s", err, c.want)
			}
			if cmd.Path == "/proc/self/exe" {
				t.Error("the command was made a launcher")
			}
		})
	}
}

// TestLaunchWaitsForRuleset: the launcher starts the program only once it
// has the call's ruleset from peal; a ruleset peal could not build, or a
// message that is not one, ends it before the program ran.
func TestLaunchWaitsForRuleset(t *testing.T) {
	needLandlock(t)
	s := newScratch(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	cases := []struct {
		name string
		// send, when set, is what peal sends the launcher instead of the
		// ruleset; else the ruleset's build fails.
		send []byte
		fds  []int
		want string
	}{
		{name: "build failed", want: "confine: cannot build the Landlock rules: refused"},
		{name: "no descriptor", send: []byte("R0"), want: "confine: the launcher did not get the Landlock rules: peal sent no ruleset"},
		{name: "another message", send: []byte("S"), fds: []int{int(devNull.Fd())}, want: "confine: the launcher did not get the Landlock rules: peal sent no ruleset"},
		{name: "bad flags", send: []byte("Rx"), fds: []int{int(devNull.Fd())}, want: "confine: the launcher did not get the Landlock rules: peal sent no ruleset"},
		{name: "two descriptors", send: []byte("R0"), fds: []int{int(devNull.Fd()), int(devNull.Fd())}, want: "confine: the launcher did not get the Landlock rules: peal sent no ruleset"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ran := s.tree + "/ran-" + strings.ReplaceAll(c.name, " ", "-")
			call := &Call{Mode: On, Access: s.access(s.tree)}
			cmd := exec.Command(exe, "write", ran)
			cmd.Env = call.Environ(append(os.Environ(), helperEnv+"=1"))
			l, err := call.Prepare(cmd, "x", "")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if l.ruleset == nil {
				t.Fatal("no ruleset under way")
			}
			l.dropRuleset()
			if c.send == nil {
				failed := make(chan builtRuleset, 1)
				failed <- builtRuleset{fd: -1, err: errors.New("confine: cannot build the Landlock rules: refused")}
				l.ruleset = failed
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if c.send != nil {
				if _, _, err := l.ctl.WriteMsgUnix(c.send, unix.UnixRights(c.fds...), nil); err != nil {
					t.Fatal(err)
				}
			}
			err = l.Wait()
			werr := cmd.Wait()
			var le *LaunchError
			if !errors.As(err, &le) || le.Msg != c.want {
				t.Fatalf("Wait = %v, want %s", err, c.want)
			}
			if werr == nil || cmd.ProcessState.ExitCode() != 126 {
				t.Errorf("the launcher exited with %v", werr)
			}
			if _, err := os.Stat(ran); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the program ran (%v)", err)
			}
		})
	}
}

// TestDataOnly: a folder granted as data (Path.Data: the work tree's
// ignored folders a call writes through links) takes files and folders but
// no named pipe or socket, which the call's own tree takes; and no mode a
// call sets anywhere has a set-user-ID or set-group-ID bit where the
// machine filters system calls. Unconfined, all of it is made: the test
// can fail.
func TestDataOnly(t *testing.T) {
	for _, m := range landlockModes(t) {
		t.Run(m.name, func(t *testing.T) {
			s := newScratch(t)
			acc := s.access(s.tree)
			acc.Write = append(acc.Write, Path{Path: s.outside, Key: "ignored", Data: true})
			c := child{call: &Call{Mode: m.mode, Access: acc, Support: m.sup}, dir: s.tree, tempDir: s.temp}
			setID := "ok"
			if m.sup.Seccomp {
				setID = "exit status 1: chmod: changing permissions of '" + s.tree + "/sh': Operation not permitted"
			}
			c.try(t, []attempt{
				{"a file in the data folder", []string{"run", "echo x > " + s.outside + "/file && mkdir " + s.outside + "/d"}, "ok"},
				{"a named pipe in its tree", []string{"run", "mkfifo " + s.tree + "/fifo"}, "ok"},
				{"a named pipe in the data folder", []string{"run", "mkfifo " + s.outside + "/fifo"},
					"exit status 1: mkfifo: cannot create fifo '" + s.outside + "/fifo': Permission denied"},
				{"a set-uid file", []string{"run", "cp /bin/sh " + s.tree + "/sh && chmod 4755 " + s.tree + "/sh"}, setID},
			})
			if m.sup.Seccomp {
				if info, err := os.Stat(s.tree + "/sh"); err != nil || info.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
					t.Errorf("the copy: %v %v", info, err)
				}
			}
			open := child{call: &Call{Mode: Off}, dir: s.tree}
			open.try(t, []attempt{
				{"unconfined makes a named pipe there", []string{"run", "mkfifo " + s.outside + "/fifo2"}, "ok"},
				{"unconfined makes a set-uid file", []string{"run", "cp /bin/sh " + s.tree + "/sh2 && chmod 4755 " + s.tree + "/sh2"}, "ok"},
			})
		})
	}
}
