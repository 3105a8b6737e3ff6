package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testbin"
	"peal/internal/testkit/testgit"
)

// TestReadsUnprivileged: the read tries of TestReadsOfCallsAndChecks with
// peal run by an unprivileged user (nobody), whose own files the kernel's
// permissions let it read: confined, each is refused all the same, from
// the agent call and from the check. It needs root, to become that user.
func TestReadsUnprivileged(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	if os.Geteuid() != 0 {
		t.Skip("becoming an unprivileged user needs root")
	}
	const uid, gid = 65534, 65534 // nobody
	// A folder every user can enter (the tests' own temporary folder is
	// root's), with the programs copied in: the go command's cache is in
	// root's home folder.
	root, err := os.MkdirTemp(testbin.DiskTemp, "peal-unprivileged-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	bin := filepath.Join(root, "bin")
	os.Mkdir(bin, 0o755)
	for name, as := range map[string]string{"peal": "peal", "fakeagent": "claude", "escape": "escape"} {
		copyProgram(t, bins[name], filepath.Join(bin, as))
	}
	home := filepath.Join(root, "home")
	s := &escapeSandbox{sandbox: &sandbox{t: t, dir: home, repo: filepath.Join(home, "repo"), plan: filepath.Join(home, "plan.md"),
		stateDir: filepath.Join(home, "state"), agentDir: filepath.Join(home, "agent")}, home: home}
	s.report = filepath.Join(s.agentDir, "escapes.txt")
	for _, d := range []string{s.repo, s.agentDir} {
		os.MkdirAll(d, 0o755)
	}
	testgit.Init(t, s.repo)
	os.WriteFile(filepath.Join(s.repo, "README.md"), []byte("project\n"), 0o644)
	testgit.Git(t, s.repo, "add", "README.md")
	testgit.Git(t, s.repo, "commit", "-q", "-m", "root")
	os.WriteFile(s.plan, []byte("## Task 1\nDo the work\n"), 0o644)
	// peal's configuration file where its user can read it.
	data, err := os.ReadFile(plantReads(t, s))
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(root, "peal.toml")
	os.WriteFile(cfg, data, 0o600)
	escape := filepath.Join(bin, "escape")
	s.scenario(map[string][]fakes.Outcome{"execute:1": {{Commands: [][]string{{escape}},
		WriteFiles: map[string]string{"escape.sh": "exec " + escape + "\n"}}}})
	for _, p := range []string{home, cfg} {
		filepath.Walk(p, func(p string, _ os.FileInfo, err error) error {
			if err == nil {
				err = os.Lchown(p, uid, gid)
			}
			return err
		})
	}
	env := append([]string{"PATH=" + bin + string(os.PathListSeparator) + testbin.PathWithout(os.Getenv("PATH"), "stet"), "HOME=" + home,
		"FAKE_AGENT_DIR=" + s.agentDir, "PEAL_PLAN_PATH=" + s.plan, "PEAL_REPO_PATH=" + s.repo, "PEAL_STATE_DIR=" + s.stateDir,
		"PEAL_AGENT_KIND=claude", "PEAL_AGENT_CMD=" + filepath.Join(bin, "claude"), "PEAL_PHASE_TIMEOUT_SEC=30", "PEAL_KILL_GRACE_SEC=1",
		"PEAL_CONFINE=on", "PEAL_CONFINE_ENV_PASS=FAKE_*,ESCAPE_*", "PEAL_CONFINE_WRITE_PATHS=" + s.agentDir,
		"PEAL_CHECK_COMMANDS=test ! -f escape.sh || sh escape.sh", "ANTHROPIC_API_KEY=sk-test-mock",
		"ESCAPE_OUT=" + s.report, "ESCAPE_CONFIG=" + cfg}, testgit.Env...)
	cmd := exec.Command(filepath.Join(bin, "peal"), "run", "--config", cfg)
	cmd.Dir, cmd.Env = home, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	escaped, failed, blocked, ok := s.results()
	if len(escaped) > 0 || len(failed) > 0 {
		t.Fatalf("escaped %q\nfailed %q\n%s", escaped, failed, out)
	}
	for _, who := range []string{"[execute 1] ", "[check 1] "} {
		for _, try := range readTries {
			if !slices.ContainsFunc(blocked, func(b string) bool { return strings.HasPrefix(b, who+try+": ") }) {
				t.Errorf("%s%s was not refused: %q", who, try, blocked)
			}
		}
		if !slices.Contains(ok, who+"git-status") {
			t.Errorf("%sgit-status was not done: %q", who, ok)
		}
	}
	if strings.Contains(string(out), readMarker) {
		t.Errorf("a planted secret is in peal's output")
	}
}

// copyProgram copies an executable to to, for every user to run.
func copyProgram(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
