package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"peal/confine"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testbin"
	"peal/internal/testkit/testgit"
)

// escapeSandbox is a sandbox for the escape suite: a scratch HOME with
// planted secrets, a token in peal's environment, a listener no call may
// reach, a server the calls may reach through peal's proxy, and the fake
// agent as Claude Code, which runs the escape program as a tool.
type escapeSandbox struct {
	*sandbox
	home              string
	listener          net.Listener
	accepted, bytes   atomic.Int64
	allowed           string // host:port of the allowed server
	report            string // the file the escape program writes
	bashrc, gitConfig string // their contents before the run
	// Listeners no call may reach although the port is one it may
	// connect to (the allowed server's, at another loopback address and
	// at this machine's outside address), a UDP listener, a UNIX socket
	// outside the call's tree, and the file the daemon a call starts
	// holds a lock on while it lives.
	traps    []net.Listener
	udp      net.PacketConn
	hostSock net.Listener
	lock     string
	// Other programs no call may reach: a git credential cache's socket in
	// ~/.cache/git/credential (made by another program, before the
	// run), another program's datagram socket, System V IPC and a
	// NETLINK_USERSOCK listener, each watched from outside.
	daemonSock     string
	daemonConns    atomic.Int64
	dgram          *net.UnixConn
	shmKey, msgKey int
	msq            uintptr
	netlink        int
	netlinkPort    uint32
	// uid and gid, when set, are the unprivileged user peal runs as
	// (asUser); programs are its copies of the test's programs.
	uid, gid int
	programs map[string]string
}

const plantedKey = "-----BEGIN OPENSSH PRIVATE KEY-----\nplanted\n"
const plantedToken = "ghp_planted_token_0123456789"

func newEscapeSandbox(t *testing.T, plan string) *escapeSandbox {
	t.Helper()
	s := &escapeSandbox{sandbox: newSandbox(t, plan)}
	s.home = s.dir // the sandbox's HOME
	for name, text := range map[string]string{
		".ssh/id_ed25519": plantedKey, ".aws/credentials": "[default]\naws_secret_access_key = planted\n", ".bashrc": "# the user's\n",
	} {
		os.MkdirAll(filepath.Join(s.home, filepath.Dir(name)), 0o700)
		if err := os.WriteFile(filepath.Join(s.home, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s.bashrc = "# the user's\n"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.listener = ln
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			n, _ := io.Copy(io.Discard, c)
			s.bytes.Add(n)
			c.Close()
		}
	}()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "allowed") }))
	t.Cleanup(srv.Close)
	s.allowed = strings.TrimPrefix(srv.URL, "http://")
	s.report = filepath.Join(s.agentDir, "escapes.txt")
	_, port, _ := net.SplitHostPort(s.allowed)
	hosts := []string{"127.0.0.2"}
	if ip := outsideIPv4(); ip != "" {
		hosts = append(hosts, ip)
	}
	for _, h := range hosts {
		ln, err := net.Listen("tcp", net.JoinHostPort(h, port))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		s.traps = append(s.traps, ln)
	}
	if s.udp, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.udp.Close() })
	// A short folder: a socket's path has at most 107 bytes.
	sockDir, err := os.MkdirTemp("", "s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	os.Chmod(sockDir, 0o755)
	if s.hostSock, err = net.Listen("unix", filepath.Join(sockDir, "host.sock")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.hostSock.Close() })
	os.Chmod(filepath.Join(sockDir, "host.sock"), 0o777)
	s.watchDaemons(t, sockDir)
	// Where every call may read (and write): the home folder is read by
	// allow list.
	s.lock = filepath.Join(s.agentDir, "daemon.lock")
	if err := os.WriteFile(s.lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killHolders(s.lock) })
	// The repository has a first commit: confined tasks work in the run's
	// worktree, made from it.
	os.WriteFile(filepath.Join(s.repo, "README.md"), []byte("project\n"), 0o644)
	testgit.Git(t, s.repo, "add", "README.md")
	testgit.Git(t, s.repo, "commit", "-q", "-m", "root")
	data, err := os.ReadFile(filepath.Join(s.repo, ".git", "config"))
	if err != nil {
		t.Fatal(err)
	}
	s.gitConfig = string(data)
	return s
}

// env is the run's environment: Claude Code (the fake) as the agent, the
// token in peal's environment, what the escape program reads.
func (s *escapeSandbox) env(confineMode string, extra ...string) []string {
	bin := filepath.Join(s.dir, "bin")
	os.MkdirAll(bin, 0o755)
	claude := filepath.Join(bin, "claude")
	if _, err := os.Lstat(claude); err != nil {
		if err := os.Symlink(s.bin("fakeagent"), claude); err != nil {
			s.t.Fatal(err)
		}
	}
	var traps []string
	for _, ln := range s.traps {
		traps = append(traps, ln.Addr().String())
	}
	env := s.sandbox.env("PEAL_AGENT_KIND=claude", "PEAL_AGENT_CMD="+claude, "PEAL_CONFINE="+confineMode,
		"PEAL_CONFINE_ENV_PASS=FAKE_*,ESCAPE_*", "PEAL_CONFINE_NETWORK_ALLOW="+s.allowed,
		"GITHUB_TOKEN="+plantedToken, "ANTHROPIC_API_KEY=sk-test-mock",
		"ESCAPE_OUT="+s.report, "ESCAPE_LISTENER="+s.listener.Addr().String(), "ESCAPE_ALLOWED="+s.allowed,
		"ESCAPE_STATE="+s.stateDir, "ESCAPE_MAIN="+s.repo, "ESCAPE_TRAPS="+strings.Join(traps, ","),
		"ESCAPE_UDP="+s.udp.LocalAddr().String(), "ESCAPE_UNIX="+s.hostSock.Addr().String(), "ESCAPE_LOCK="+s.lock,
		"ESCAPE_DAEMON="+s.daemonSock, "ESCAPE_DGRAM="+s.dgram.LocalAddr().String(), fmt.Sprintf("ESCAPE_IPC=%d:%d", s.shmKey, s.msgKey),
		fmt.Sprintf("ESCAPE_NETLINK=%d", s.netlinkPort))
	if s.uid != 0 {
		for i, kv := range env {
			switch {
			case strings.HasPrefix(kv, "PEAL_AGENT_CMD=") && !strings.HasSuffix(kv, claude):
				env[i] = "PEAL_AGENT_CMD=" + s.bin("fakeagent")
			case strings.HasPrefix(kv, "PEAL_CONFINE_READ_PATHS="):
				// The user's copies of the programs, in the sandbox's
				// home, instead of the test's, which it cannot see.
				env[i] = "PEAL_CONFINE_READ_PATHS=" + filepath.Join(s.dir, "programs")
			}
		}
	}
	return append(append(env, testgit.Env...), extra...)
}

// bin is the path of one of the test's programs, as peal's calls run it.
func (s *escapeSandbox) bin(name string) string {
	if p, ok := s.programs[name]; ok {
		return p
	}
	return bins[name]
}

// asUser makes the sandbox the unprivileged user's (testbin.Unprivileged),
// whom peal then runs as: its folders, and copies of the test's programs
// it can run. It skips when this process is not root or there is no such
// user.
func (s *escapeSandbox) asUser() {
	t := s.t
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("not root: the escape suite runs as an unprivileged user already")
	}
	u, ok := testbin.Unprivileged()
	if !ok {
		t.Skip("no unprivileged user to run as: make one with useradd and name it in PEAL_TEST_USER")
	}
	s.uid, _ = strconv.Atoi(u.Uid)
	s.gid, _ = strconv.Atoi(u.Gid)
	// The folders above the sandbox are the test's own temporary ones:
	// peal lists them to narrow the calls' read grant down to the secrets
	// of the sandbox's home.
	for d := filepath.Dir(s.dir); d != os.TempDir() && d != "/" && d != "."; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	os.Chmod(os.TempDir(), 0o755)
	os.Chmod(s.dir, 0o755)
	s.programs = map[string]string{}
	progs := filepath.Join(s.dir, "programs")
	os.Mkdir(progs, 0o755)
	for _, name := range []string{"peal", "fakeagent", "escape"} {
		to := filepath.Join(progs, name)
		data, err := os.ReadFile(bins[name])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, 0o755); err != nil {
			t.Fatal(err)
		}
		s.programs[name] = to
	}
	err := filepath.Walk(s.dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if p == progs || filepath.Dir(p) == progs || p == s.lock {
			return nil
		}
		return os.Lchown(p, s.uid, s.gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// run runs peal (as the sandbox's user, when it has one).
func (s *escapeSandbox) run(env []string, args ...string) result {
	s.t.Helper()
	return s.start(env, args...)()
}

// start starts peal (as the sandbox's user, when it has one); the function
// it returns waits for its end.
func (s *escapeSandbox) start(env []string, args ...string) func() result {
	s.t.Helper()
	cmd := exec.Command(s.bin("peal"), args...)
	cmd.Dir, cmd.Env = s.dir, env
	if s.uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(s.uid), Gid: uint32(s.gid), Groups: []uint32{}}}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	return func() result {
		err := cmd.Wait()
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			s.t.Fatal(err)
		}
		return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
	}
}

// results are the escape program's lines, by outcome.
func (s *escapeSandbox) results() (escaped, failed, blocked, ok []string) {
	s.t.Helper()
	data, err := os.ReadFile(s.report)
	if err != nil {
		s.t.Fatalf("the escape program wrote no report: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		switch word, rest, _ := strings.Cut(line, " "); word {
		case "ESCAPED":
			escaped = append(escaped, rest)
		case "FAILED":
			failed = append(failed, rest)
		case "blocked":
			blocked = append(blocked, rest)
		case "ok":
			ok = append(ok, rest)
		}
	}
	return
}

// outside checks, from outside the calls, that nothing escaped: home and
// the repository's git files as they were, the listener untouched, the
// token in no output.
func (s *escapeSandbox) outside(r result) {
	s.t.Helper()
	if got, _ := os.ReadFile(filepath.Join(s.home, ".bashrc")); string(got) != s.bashrc {
		s.t.Errorf("~/.bashrc changed: %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(s.repo, ".git", "config")); string(got) != s.gitConfig {
		s.t.Errorf(".git/config changed: %q", got)
	}
	for _, f := range []string{".git/hooks/post-merge", ".git/info/attributes"} {
		if _, err := os.Lstat(filepath.Join(s.repo, f)); err == nil {
			s.t.Errorf("%s was planted", f)
		}
	}
	if n := s.accepted.Load(); n != 0 {
		s.t.Errorf("the listener accepted %d connections (%d bytes)", n, s.bytes.Load())
	}
	for _, ln := range append(s.traps, s.hostSock) {
		if pending(s.t, ln) {
			s.t.Errorf("a connection reached %s", ln.Addr())
		}
	}
	if pendingDatagram(s.t, s.udp.(syscall.Conn)) {
		s.t.Error("a datagram reached the UDP listener")
	}
	if !lockFree(s.t, s.lock) {
		s.t.Error("a daemon a call started is alive after peal exited")
	}
	for what, got := range s.daemonsReached() {
		s.t.Errorf("%s: %s", what, got)
	}
	for _, text := range []string{r.stdout, r.stderr} {
		if strings.Contains(text, plantedToken) || strings.Contains(text, "planted\n") {
			s.t.Errorf("a secret reached peal's output:\n%s", text)
		}
	}
}

// wants are the tries of the escape program (the prefix of each line
// names the call); every escape blocked, every piece of work done.
func checkEscapes(t *testing.T, s *escapeSandbox, calls int) {
	t.Helper()
	escaped, failed, blocked, ok := s.results()
	if len(escaped) > 0 || len(failed) > 0 {
		t.Fatalf("escaped: %q\nfailed: %q", escaped, failed)
	}
	// Each run of the program tries 20 escapes and one for each trap (one
	// more with the main tree's path, another with another task's
	// worktree), and 10 pieces of work.
	if len(ok) != 10*calls || len(blocked) < (20+len(s.traps))*calls {
		t.Fatalf("%d runs of the escape program: %d blocked, %d done:\n%q\n%q", calls, len(blocked), len(ok), blocked, ok)
	}
}

func skipWithoutLandlock(t *testing.T) {
	t.Helper()
	if sup := confine.Probe(); !sup.Files || !sup.TCP {
		t.Skipf("this kernel does not confine files and TCP: %s", sup)
	}
}

// TestEscapesOfASequentialTask: the agent of a sequential task, confined,
// tries every escape; each is refused while its legitimate work (its tree,
// new folders, its temporary folder, git status and diff, the allowed host
// through the proxy) succeeds, the run ends with exit 0 and the work
// reaches the work tree. Unconfined, the same tries escape (the suite can
// fail).
func TestEscapesOfASequentialTask(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	// "nonetns": on, without a network namespace for each call
	// (confine_network_namespace = false), which the start line says.
	for _, mode := range []string{"on", "off", "nonetns"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			s := newEscapeSandbox(t, "## Task 1\nDo the work\n")
			s.scenario(map[string][]fakes.Outcome{"execute:1": {{Commands: [][]string{{s.bin("escape")}}}}})
			env := s.env(mode)
			if mode == "nonetns" {
				env = s.env("on", "PEAL_CONFINE_NETWORK_NAMESPACE=false")
			}
			r := s.run(env, "run")
			switch {
			case mode == "on" && confine.Probe().NetNamespace && !strings.Contains(r.stderr, "network namespaces of its own"):
				t.Fatalf("the start line does not name the network namespace: %s", r.stderr)
			case mode == "nonetns" && !strings.Contains(r.stderr, "no network namespace (confine_network_namespace = false): weaker"):
				t.Fatalf("the start line does not say the calls have no network namespace: %s", r.stderr)
			}
			if mode == "off" {
				escaped, _, _, _ := s.results()
				wants := []string{"write-home", "read-ssh-key", "read-aws", "see-token", "token-of-peal", "connect-listener", "write-state", "plant-hook",
					"tcp-to-" + s.traps[0].Addr().String(), "udp", "unix-outside-tree",
					"daemon-socket", "unix-raw-datagram", "sysv-ipc", "netlink-usersock", "netlink-sock-diag"}
				if os.Geteuid() == 0 {
					wants = append(wants, "root-capabilities")
				}
				if reached := s.daemonsReached(); len(reached) != 4 {
					t.Errorf("unconfined, not every daemon was reached: %q", reached)
				}
				for _, want := range wants {
					if !slices.ContainsFunc(escaped, func(e string) bool { return strings.HasSuffix(e, want) }) {
						t.Errorf("unconfined, %s did not escape: %q", want, escaped)
					}
				}
				if lockFree(t, s.lock) {
					t.Error("unconfined, the daemon did not outlive its call")
				}
				return
			}
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			checkEscapes(t, s, 1)
			s.outside(r)
			matches, _ := filepath.Glob(filepath.Join(s.repo, "work-execute-*.txt"))
			if len(matches) != 1 {
				t.Fatalf("the task's work did not reach the work tree: %q", matches)
			}
			// The connection the proxy refused is named and counted.
			js := s.run(env, "report", "--format", "json")
			if !strings.Contains(js.stdout, `"refused_connections": 1`) || !strings.Contains(js.stdout, `"`+s.listener.Addr().String()+`"`) {
				t.Fatalf("report JSON:\n%s", js.stdout)
			}
		})
	}
}

// TestEscapesAsAnUnprivilegedUser: the sequential task's escapes, peal run
// by an unprivileged user (whom the system may give user namespaces or
// not: the start line says).
func TestEscapesAsAnUnprivilegedUser(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	s := newEscapeSandbox(t, "## Task 1\nDo the work\n")
	s.asUser()
	s.scenario(map[string][]fakes.Outcome{"execute:1": {{Commands: [][]string{{s.bin("escape")}}}}})
	os.Chown(s.agentDir, s.uid, s.gid)
	filepath.Walk(s.agentDir, func(p string, _ os.FileInfo, err error) error { return os.Lchown(p, s.uid, s.gid) })
	r := s.run(s.env("on"), "run")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	t.Logf("start line: %s", startLine(r.stderr))
	checkEscapes(t, s, 1)
	s.outside(r)
}

// startLine is peal's line that says what the machine enforces.
func startLine(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "msg=\"confinement ") {
			return l
		}
	}
	return ""
}

// TestEscapesOnATerminal: peal runs on a terminal (its controlling
// terminal, its standard input and error); the agent's call can neither
// write to it nor push a command line into its input. Unconfined, it can
// (the test can fail).
func TestEscapesOnATerminal(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	for _, mode := range []string{"on", "off"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			s := newEscapeSandbox(t, "## Task 1\nDo the work\n")
			s.scenario(map[string][]fakes.Outcome{"execute:1": {{Commands: [][]string{{s.bin("escape")}}}}})
			master, slave := openPTY(t, 120)
			defer master.Close()
			cmd := exec.Command(s.bin("peal"), "run")
			cmd.Dir, cmd.Env = s.dir, s.env(mode, "ESCAPE_TTY="+slave.Name())
			cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, io.Discard, slave
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			var shown bytes.Buffer
			read := make(chan struct{})
			go func() {
				io.Copy(&shown, master)
				close(read)
			}()
			if err := cmd.Run(); err != nil {
				t.Fatalf("%v", err)
			}
			// What was pushed into the terminal's input waits there to be
			// read; once the test lets go of it, the terminal's output
			// ends.
			fd := int(slave.Fd())
			syscall.SetNonblock(fd, true)
			typed := make([]byte, 4096)
			n, _ := syscall.Read(fd, typed)
			typed = typed[:max(n, 0)]
			slave.Close()
			<-read
			escaped, _, _, _ := s.results()
			reached := strings.Contains(shown.String()+string(typed), "ESCAPED-TERMINAL")
			if mode == "off" {
				if !reached || !slices.ContainsFunc(escaped, func(e string) bool { return strings.HasSuffix(e, "write-terminal") }) {
					t.Fatalf("unconfined, the call did not reach the terminal: %q; the terminal showed %q, holds %q", escaped, shown.String(), typed)
				}
				return
			}
			if reached || len(escaped) > 0 {
				t.Fatalf("escaped %q; the terminal showed %q, holds %q", escaped, shown.String(), typed)
			}
			_, _, blocked, _ := s.results()
			for _, want := range []string{"[execute 1] write-terminal", "[execute 1] push-terminal-input"} {
				if !slices.ContainsFunc(blocked, func(b string) bool { return strings.HasPrefix(b, want+":") }) {
					t.Errorf("%s was not tried: %q", want, blocked)
				}
			}
		})
	}
}

// TestEscapesOfACheckUnderTCPAny: under confine_tcp = any, a check serves
// TCP and reaches its own server (a test suite's), while this machine's
// outside address, UDP, a UNIX socket outside the tree and the rest stay
// closed. In the check's own network namespace (the default), this
// machine's loopback stays closed too; without one
// (confine_network_namespace = false) the check reaches it: the trade-off
// the two keys make together.
func TestEscapesOfACheckUnderTCPAny(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	for _, netns := range []bool{true, false} {
		t.Run(fmt.Sprintf("network namespace %v", netns), func(t *testing.T) {
			t.Parallel()
			if netns && !confine.Probe().NetNamespace {
				t.Skip("this machine gives a call no network namespace")
			}
			s := newEscapeSandbox(t, "## Task 1\nWrite the check\n")
			s.scenario(map[string][]fakes.Outcome{"execute:1": {{WriteFiles: map[string]string{"escape.sh": "exec " + s.bin("escape") + "\n"}}}})
			r := s.run(s.env("on", "PEAL_CHECK_COMMANDS=sh escape.sh", "PEAL_CONFINE_TCP=any", "ESCAPE_TCP_ANY=1",
				fmt.Sprintf("PEAL_CONFINE_NETWORK_NAMESPACE=%v", netns)), "run")
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			escaped, failed, blocked, ok := s.results()
			var loopback []string
			traps := s.traps
			if !netns {
				loopback = []string{"[check 1] connect-listener", "[check 1] tcp-to-" + s.traps[0].Addr().String()}
				traps = s.traps[1:]
			}
			if !slices.Equal(escaped, loopback) || len(failed) > 0 || len(ok) != 11 {
				t.Fatalf("escaped %q (want %q), failed %q, %d done", escaped, loopback, failed, len(ok))
			}
			for _, want := range []string{"udp", "unix-outside-tree", "raw-socket", "read-ssh-key"} {
				if !slices.ContainsFunc(blocked, func(b string) bool { return strings.HasPrefix(b, "[check 1] "+want+":") }) {
					t.Errorf("%s was not blocked: %q", want, blocked)
				}
			}
			for _, ln := range append(traps, s.hostSock) {
				if pending(t, ln) {
					t.Errorf("a connection reached %s", ln.Addr())
				}
			}
			if netns && s.accepted.Load() != 0 {
				t.Errorf("the listener on this machine's loopback accepted %d connections", s.accepted.Load())
			}
			if len(s.traps) > 1 && !slices.ContainsFunc(blocked, func(b string) bool { return strings.HasPrefix(b, "[check 1] tcp-to-"+s.traps[1].Addr().String()+":") }) {
				t.Errorf("this machine's outside address was not refused: %q", blocked)
			}
			if !lockFree(t, s.lock) {
				t.Error("a daemon a call started is alive after peal exited")
			}
		})
	}
}

// TestEscapesOfAParallelBlock: two tasks in worktrees of their own try the
// escapes, and to write the main work tree and each other's worktree.
func TestEscapesOfAParallelBlock(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	s := newEscapeSandbox(t, "## Task 1 (parallel)\nOne\n\n## Task 2 (parallel)\nTwo\n")
	s.scenario(map[string][]fakes.Outcome{
		"execute:1": {{Commands: [][]string{{"sh", "-c", "ESCAPE_OTHER=$ESCAPE_WT/task-2 exec " + s.bin("escape")}}}},
		"execute:2": {{Commands: [][]string{{"sh", "-c", "ESCAPE_OTHER=$ESCAPE_WT/task-1 exec " + s.bin("escape")}}}},
	})
	r := s.peal(s.env("on", "PEAL_PARALLEL=true", "PEAL_MAX_PARALLEL=2", "ESCAPE_WT="+filepath.Join(s.stateDir, "worktrees")), "run")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	checkEscapes(t, s, 2)
	_, _, blocked, _ := s.results()
	for _, want := range []string{"[execute 1] write-other-worktree", "[execute 2] write-other-worktree", "[execute 1] write-main-tree"} {
		if !slices.ContainsFunc(blocked, func(b string) bool { return strings.HasPrefix(b, want+":") }) {
			t.Errorf("%s was not tried: %q", want, blocked)
		}
	}
	s.outside(r)
}

// TestEscapesOfACheck: a check runs a script the agent wrote; the script
// tries the escapes, as confined as the agent.
func TestEscapesOfACheck(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	s := newEscapeSandbox(t, "## Task 1\nWrite the check\n")
	s.scenario(map[string][]fakes.Outcome{"execute:1": {{WriteFiles: map[string]string{"escape.sh": "exec " + s.bin("escape") + "\n"}}}})
	r := s.run(s.env("on", "PEAL_CHECK_COMMANDS=sh escape.sh"), "run")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	// The check runs on the starting tree (no script yet: it fails, charged
	// to no task) and after the execute.
	checkEscapes(t, s, 1)
	escaped, _, blocked, _ := s.results()
	if len(escaped) > 0 || !slices.ContainsFunc(blocked, func(b string) bool { return strings.HasPrefix(b, "[check 1] read-ssh-key") }) {
		t.Fatalf("the check's tries: %q", blocked)
	}
	s.outside(r)
}

// TestDenialNamed: a call that failed after the confinement refused it a
// path gets one line naming the path and the key that would allow it: in
// peal's last line, in the log, and in peal report (Markdown and JSON),
// which counts it.
func TestDenialNamed(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	s := newEscapeSandbox(t, "## Task 1\nChange the shell\n")
	script := `echo 'alias x=y' >> "$HOME/.bashrc"`
	s.scenario(map[string][]fakes.Outcome{"execute:1": {{Commands: [][]string{{"sh", "-c", script}},
		Exit: 1, Stderr: "the shell could not be changed"}}})
	r := s.peal(s.env("on"), "run")
	want := "the call was refused writing " + filepath.Join(s.home, ".bashrc") + ": it is outside what the call may write; confine_write_paths"
	if r.code != 1 || !strings.Contains(lastLine(r.stderr), want) {
		t.Fatalf("exit %d, last line %q, want it to hold %q", r.code, lastLine(r.stderr), want)
	}
	if !strings.Contains(r.stderr, `msg="the confinement refused what the call needed: `+want) {
		t.Fatalf("no warning in the log:\n%s", r.stderr)
	}
	md := s.peal(s.env("on"), "report")
	if !strings.Contains(md.stdout, "Confinement:") || !strings.Contains(md.stdout, "task 1 execute attempt 1: the call was refused writing "+filepath.Join(s.home, ".bashrc")) {
		t.Fatalf("report:\n%s", md.stdout)
	}
	js := s.peal(s.env("on"), "report", "--format", "json")
	if !strings.Contains(js.stdout, `"denied_calls": 1`) || !strings.Contains(js.stdout, `"confinement": "on: files and TCP enforced`) {
		t.Fatalf("report JSON:\n%s", js.stdout)
	}
}

// TestRefusalNamed: a call whose output names the host the proxy refused
// it is put down to that refusal, named with the setting that allows it,
// and not retried nor waited on as an outage (every attempt under the same
// allow list would meet it); a call that failed without a word of why is
// given the refusal as its likeliest cause, and retried as usual; a call
// whose output says its own cause (an account out of credit) is not put
// down to a refusal its output does not name.
func TestRefusalNamed(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	get := []string{bins["escape"], "get", "side.example:80"}
	refusal := `peal refused the connection to side.example:80: it is not on this call's network allow list; confine_network_allow = ["side.example:80"] would allow it`
	for _, c := range []struct {
		name, stdout string
		want         string
		named        bool
		calls        string
	}{
		{"names the host", "request to http://side.example/ failed", "execute failed and was not retried (no retry can fix this): execute call exited with status 1: request to http://side.example/ failed; " + refusal,
			true, "plan:1 execute:1"},
		{"silent", "the work could not be done", "execute call exited with status 1: the work could not be done; " + refusal, true, "plan:1 execute:1 execute:1"},
		{"says its cause", "Credit balance is too low", "the account the claude CLI uses is out of quota or credit", false, "plan:1 execute:1"},
	} {
		s := newEscapeSandbox(t, "## Task 1\nFetch\n")
		s.scenario(map[string][]fakes.Outcome{"execute:1": {{Commands: [][]string{get}, Exit: 1, Stdout: c.stdout}}})
		r := s.peal(s.env("on", "PEAL_PHASE_RETRY_COUNT=1"), "run")
		last := lastLine(r.stderr)
		if r.code != 1 || !strings.Contains(last, c.want) || strings.Contains(last, "peal refused") != c.named {
			t.Errorf("%s: exit %d, last line %q, want it to hold %q (refusal named: %v)", c.name, r.code, last, c.want, c.named)
		}
		if !strings.Contains(r.stderr, `msg="proxy refused a connection" call=`) {
			t.Errorf("%s: the refusal is not logged:\n%s", c.name, r.stderr)
		}
		if got := s.keys(); got != c.calls {
			t.Errorf("%s: calls %q, want %q", c.name, got, c.calls)
		}
	}
}

// TestPolicyShown: peal config, peal doctor and the dry run say what each
// kind of call may write and reach on this machine, with the user's paths
// and hosts.
func TestPolicyShown(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	s := newEscapeSandbox(t, "## Task 1\nx\n")
	shared := filepath.Join(s.dir, "shared-cache") // a confinement path must exist
	os.Mkdir(shared, 0o755)
	env := s.env("auto", "PEAL_CONFINE_WRITE_PATHS="+shared, "PEAL_CONFINE_NETWORK_ALLOW=proxy.golang.org")
	for _, args := range [][]string{{"config"}, {"doctor"}, {"run", "--dry-run"}} {
		r := s.peal(env, args...)
		lines := described(r.stdout)
		for _, want := range []string{
			"confine = auto", "files and TCP enforced by Landlock ABI *",
			"claude agent calls", "write: its work tree", "write: its temporary folder",
			"write: " + shared + " (confine_write_paths)",
			"checks and worktree_setup_command (and post_run_commands, stet_commands, the repository's hooks, which also write the repository's objects, refs and logs)",
			"reach: proxy.golang.org",
			"never read", filepath.Join(s.home, ".ssh") + " (secret)",
		} {
			if !slices.ContainsFunc(lines, func(l string) bool {
				return l == want || strings.HasSuffix(want, "*") && strings.HasPrefix(l, strings.TrimSuffix(want, "*"))
			}) {
				t.Errorf("peal %s lacks a line %q:\n%s", strings.Join(args, " "), want, r.stdout)
			}
		}
		// One thing a line: no line of the description is a paragraph.
		for _, l := range lines {
			if len(l) > 200 {
				t.Errorf("peal %s: a line of %d characters: %q", strings.Join(args, " "), len(l), l)
			}
		}
	}
}

// described are the lines of the confinement's description in a command's
// output, whatever the command: from its first line (config's heading,
// doctor's and the dry run's first "confinement: ") to the blank line
// after it, trimmed, without doctor's "ok    confinement: " or the dry
// run's "confinement: " before them.
func described(out string) []string {
	var lines []string
	in := false
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case !in && !strings.Contains(l, "confinement"):
			continue
		case in && l == "":
			return lines
		}
		in = true
		for _, prefix := range []string{"ok    confinement: ", "warn  confinement: ", "confinement: "} {
			l = strings.TrimPrefix(l, prefix)
		}
		lines = append(lines, l)
	}
	return lines
}

// TestContainerSocketWarned: where neither the kernel nor peal checks
// connections to UNIX sockets, a container engine's socket this user may
// use is named at the start of a confined run, and not of an unconfined
// one.
func TestContainerSocketWarned(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	if s := confine.Probe(); s.ABI >= 9 || s.Supervise {
		t.Skip("connections to UNIX sockets are checked here: " + s.String())
	}
	s := newEscapeSandbox(t, "## Task 1\nx\n")
	// A short folder: a socket's path has at most 107 bytes.
	run, err := os.MkdirTemp("", "xdg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(run) })
	sock := filepath.Join(run, "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	want := `msg="a confined call can connect to ` + sock + `, and whoever uses it runs what it likes on this machine`
	r := s.peal(s.env("auto", "XDG_RUNTIME_DIR="+run), "run")
	if r.code != 0 || strings.Count(r.stderr, want) != 1 {
		t.Fatalf("confined: exit %d, want one warning %q:\n%s", r.code, want, r.stderr)
	}
	r = s.peal(s.env("off", "XDG_RUNTIME_DIR="+run), "run")
	if r.code != 0 || strings.Contains(r.stderr, "a confined call can connect to") {
		t.Fatalf("unconfined: exit %d:\n%s", r.code, r.stderr)
	}
}
