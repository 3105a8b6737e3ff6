package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"peal/confine"
	"peal/internal/fakes"
	"peal/internal/testgit"
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
		if err := os.Symlink(bins["fakeagent"], claude); err != nil {
			s.t.Fatal(err)
		}
	}
	env := s.sandbox.env("PEAL_AGENT_KIND=claude", "PEAL_AGENT_CMD="+claude, "PEAL_CONFINE="+confineMode,
		"PEAL_CONFINE_ENV_PASS=FAKE_*,ESCAPE_*", "PEAL_CONFINE_NETWORK_ALLOW="+s.allowed,
		"GITHUB_TOKEN="+plantedToken, "ANTHROPIC_API_KEY=sk-test-mock",
		"ESCAPE_OUT="+s.report, "ESCAPE_LISTENER="+s.listener.Addr().String(), "ESCAPE_ALLOWED="+s.allowed,
		"ESCAPE_STATE="+s.stateDir, "ESCAPE_MAIN="+s.repo)
	return append(env, extra...)
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
	// Each run of the program tries 13 escapes (14 with the main tree's
	// path, 15 with another task's worktree) and 6 pieces of work.
	if len(ok) != 6*calls || len(blocked) < 13*calls {
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
	for _, mode := range []string{"on", "off"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			s := newEscapeSandbox(t, "## Task 1\nDo the work\n")
			s.scenario(map[string][]fakes.Outcome{"execute:1": {{Commands: [][]string{{bins["escape"]}}}}})
			r := s.peal(s.env(mode), "run")
			if mode == "off" {
				escaped, _, _, _ := s.results()
				for _, want := range []string{"write-home", "read-ssh-key", "read-aws", "see-token", "token-of-peal", "connect-listener", "write-state", "plant-hook"} {
					if !slices.ContainsFunc(escaped, func(e string) bool { return strings.HasSuffix(e, want) }) {
						t.Errorf("unconfined, %s did not escape: %q", want, escaped)
					}
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
			js := s.peal(s.env(mode), "report", "--format", "json")
			if !strings.Contains(js.stdout, `"refused_connections": 1`) || !strings.Contains(js.stdout, `"`+s.listener.Addr().String()+`"`) {
				t.Fatalf("report JSON:\n%s", js.stdout)
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
		"execute:1": {{Commands: [][]string{{"sh", "-c", "ESCAPE_OTHER=$ESCAPE_WT/task-2 exec " + bins["escape"]}}}},
		"execute:2": {{Commands: [][]string{{"sh", "-c", "ESCAPE_OTHER=$ESCAPE_WT/task-1 exec " + bins["escape"]}}}},
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
	s.scenario(map[string][]fakes.Outcome{"execute:1": {{WriteFiles: map[string]string{"escape.sh": "exec " + bins["escape"] + "\n"}}}})
	r := s.peal(s.env("on", "PEAL_CHECK_COMMANDS=sh escape.sh"), "run")
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
	env := s.env("auto", "PEAL_CONFINE_WRITE_PATHS=/opt/shared-cache", "PEAL_CONFINE_NETWORK_ALLOW=proxy.golang.org")
	for _, args := range [][]string{{"config"}, {"doctor"}, {"run", "--dry-run"}} {
		r := s.peal(env, args...)
		for _, want := range []string{
			"confine = auto: files and TCP enforced by Landlock ABI",
			"claude agent calls write its work tree, its temporary folder",
			"confine_write_paths (/opt/shared-cache)",
			"checks and worktree_setup_command write its work tree",
			"reach proxy.golang.org",
			"never read: ", filepath.Join(s.home, ".ssh"),
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("peal %s lacks %q:\n%s", strings.Join(args, " "), want, r.stdout)
			}
		}
	}
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
