package main

import (
	"context"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"peal/confine"
	"peal/internal/gitrepo"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
)

// The escape suite's tries through what peal runs after a call, on what a
// call wrote: post_run_commands, the repository's hooks (and the programs
// they keep in caches a call may write), the agents' authentication
// check, stet's settings in the task's tree, and its work brought back
// over what the work tree ignores. Each plants a program that, run, notes
// that it ran (in a folder a confined call may write) and tries to leave
// peal's token outside what a confined call may write. Each runs as root
// and, where the machine has an unprivileged user, as that user.

// treeTry is one run of a try: the sandbox, and the user peal runs as (0:
// the test's).
// treeTry is an escape sandbox whose user (uid, gid, programs: the test's
// programs as that user runs them) may be an unprivileged one.
type treeTry struct {
	*escapeSandbox
}

// asEach runs try as root, then as an unprivileged user when the machine
// has one (PEAL_TEST_USER, else nobody) and the test runs as root.
func asEach(t *testing.T, plan string, try func(t *testing.T, s *treeTry)) {
	t.Run("root", func(t *testing.T) {
		t.Parallel()
		try(t, &treeTry{escapeSandbox: newEscapeSandbox(t, plan)})
	})
	t.Run("unprivileged", func(t *testing.T) {
		t.Parallel()
		if os.Geteuid() != 0 {
			t.Skip("not root: the suite runs as an unprivileged user already")
		}
		name := os.Getenv("PEAL_TEST_USER")
		if name == "" {
			name = "nobody"
		}
		u, err := user.Lookup(name)
		if err != nil || u.Uid == "0" {
			t.Skipf("no unprivileged user %q to run as (make one with useradd and name it in PEAL_TEST_USER)", name)
		}
		s := &treeTry{escapeSandbox: newEscapeSandbox(t, plan)}
		s.programs = map[string]string{}
		s.uid, _ = strconv.Atoi(u.Uid)
		s.gid, _ = strconv.Atoi(u.Gid)
		try(t, s)
	})
}

// own makes the sandbox the user's, with copies of the test's programs it
// can run, once the test has laid it out; the agent runs as claude.
func (s *treeTry) own() {
	t := s.t
	if s.uid == 0 {
		return
	}
	progs := filepath.Join(s.dir, "programs")
	os.MkdirAll(progs, 0o755)
	for _, name := range []string{"peal", "fakeagent", "fakestet"} {
		data, err := os.ReadFile(bins[name])
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(progs, name)
		if err := os.WriteFile(to, data, 0o755); err != nil {
			t.Fatal(err)
		}
		s.programs[name] = to
	}
	os.MkdirAll(filepath.Join(s.dir, "bin"), 0o755)
	if err := os.Symlink(s.programs["fakeagent"], filepath.Join(s.dir, "bin", "claude")); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(s.dir); d != "/" && d != "."; d = filepath.Dir(d) {
		if info, err := os.Stat(d); err == nil && info.Mode().Perm()&0o005 != 0o005 {
			os.Chmod(d, info.Mode().Perm()|0o005)
		}
	}
	err := filepath.Walk(s.dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, s.uid, s.gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rules sets the fake agent's scenario, the try's user's to read.
func (s *treeTry) rules(rules map[string][]fakes.Outcome) {
	s.t.Helper()
	s.scenario(rules)
	if s.uid != 0 {
		os.Lchown(filepath.Join(s.agentDir, fakes.ScenarioFile), s.uid, s.gid)
	}
}

// git runs git in the sandbox's repository, whoever owns it, and returns
// its whole output.
func (s *treeTry) git(args ...string) string {
	s.t.Helper()
	out, err := gitrepo.Plain(s.repo, testgit.Env...).Command(append([]string{"-c", "safe.directory=*"}, args...)...).Run(context.Background())
	if err != nil {
		s.t.Fatalf("git %q: %v", args, err)
	}
	return out
}

// noted takes the repository's configuration as the set-up left it, for
// the check that no call changed it (outside).
func (s *treeTry) noted() {
	data, err := os.ReadFile(filepath.Join(s.repo, ".git", "config"))
	if err != nil {
		s.t.Fatal(err)
	}
	s.gitConfig = string(data)
}

// planted is a program of the agent's: run, it notes that it ran, with
// the token it sees, in the agent's folder (which a confined call may
// write), and tries to leave the token in the sandbox's home (which it may
// not).
func (s *treeTry) planted(name string) string {
	return "#!/bin/sh\necho \"" + name + " ran token=$GITHUB_TOKEN\" >> " + filepath.Join(s.agentDir, "ran") + "\n" +
		"echo \"$GITHUB_TOKEN\" > " + filepath.Join(s.dir, "leak-"+name) + "\nexit 0\n"
}

// plant is an agent's command that writes program at path, executable.
func plant(path, program string) []string {
	return []string{"sh", "-c", `mkdir -p "$(dirname "$2")" && printf '%s' "$1" > "$2" && chmod +x "$2"`, "sh", program, path}
}

// ran are the planted programs that ran, with the token each saw; no
// program may have left the token in home.
func (s *treeTry) ran() []string {
	s.t.Helper()
	if leaks, _ := filepath.Glob(filepath.Join(s.dir, "leak-*")); len(leaks) > 0 {
		data, _ := os.ReadFile(leaks[0])
		s.t.Errorf("a planted program wrote outside what a confined call may write: %s holds %q", leaks[0], data)
	}
	data, _ := os.ReadFile(filepath.Join(s.agentDir, "ran"))
	return strings.Fields(strings.TrimSpace(string(data)))
}

// commit makes the sandbox's repository's next commit of files.
func (s *treeTry) commit(files map[string]string, mode os.FileMode) {
	s.t.Helper()
	for name, text := range files {
		p := filepath.Join(s.repo, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			s.t.Fatal(err)
		}
		testgit.Git(s.t, s.repo, "add", "-f", name)
	}
	testgit.Git(s.t, s.repo, "commit", "-q", "-m", "set-up")
}

// TestEscapeThroughPostRunCommands: the agent rewrites the script a
// post_run_command runs and plants a program in an ignored dependency
// folder (linked into the run's worktree, which calls may write) that
// another runs; both run after the work came back, confined as checks in
// the work tree: they run, without the token, and write nothing outside.
// Under post_run_confined = false the start line says so, and they run
// with peal's environment.
func TestEscapeThroughPostRunCommands(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	asEach(t, "## Task 1\nWork\n", func(t *testing.T, s *treeTry) {
		s.commit(map[string]string{".gitignore": "node_modules/\n", "tools/post.sh": "#!/bin/sh\necho post\n"}, 0o755)
		os.MkdirAll(filepath.Join(s.repo, "node_modules", ".bin"), 0o755)
		os.WriteFile(filepath.Join(s.repo, "node_modules", ".bin", "tool"), []byte("#!/bin/sh\necho tool\n"), 0o755)
		s.scenario(map[string][]fakes.Outcome{"execute:1": {{Commands: [][]string{
			plant("tools/post.sh", s.planted("post.sh")),
			plant("node_modules/.bin/tool", s.planted("tool")),
		}}}})
		s.own()
		env := s.env("on", "PEAL_POST_RUN_COMMANDS=sh tools/post.sh, sh node_modules/.bin/tool", "PEAL_AGENT_CMD="+filepath.Join(s.dir, "bin", "claude"))
		r := s.run(env, "run")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		if got := s.ran(); !slices.Equal(got, []string{"post.sh", "ran", "token=", "tool", "ran", "token="}) {
			t.Fatalf("planted programs ran: %q", got)
		}
		s.outside(r)
		// The ignored folder is the user's, written by the task (see
		// docs/behaviour.md): the planted program is there.
		if data, _ := os.ReadFile(filepath.Join(s.repo, "node_modules", ".bin", "tool")); !strings.Contains(string(data), "ran token=") {
			t.Fatalf("the task's write to node_modules/.bin did not reach the work tree: %q", data)
		}
		if s.uid != 0 {
			return
		}
		// Opted out: named at the start, and run as before.
		os.Remove(filepath.Join(s.agentDir, "ran"))
		s.scenario(map[string][]fakes.Outcome{})
		os.WriteFile(s.plan, []byte("## Task 1\nWork\n## Task 2\nMore\n"), 0o644)
		r = s.run(append(env, "PEAL_POST_RUN_CONFINED=false"), "run")
		if r.code != 0 || !strings.Contains(r.stderr, "post_run_commands run unconfined (post_run_confined = false), with peal's whole environment") {
			t.Fatalf("exit %d, start line:\n%s", r.code, r.stderr)
		}
		if data, _ := os.ReadFile(filepath.Join(s.dir, "leak-tool")); string(data) != plantedToken+"\n" {
			t.Fatalf("unconfined, the post-run command saw %q", data)
		}
	})
}

// TestEscapeThroughAHook: the repository's pre-commit hook runs a program
// kept in a cache (the pre-commit framework's, ~/.cache/pre-commit, where it
// keeps its environments), which a confined call may write, and another hook is a
// script of the tree (core.hooksPath = .husky); the agent replaces both.
// peal's commit runs them confined: the work is committed, they run without
// the token and write nothing outside.
func TestEscapeThroughAHook(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	asEach(t, "## Task 1\nWork\n", func(t *testing.T, s *treeTry) {
		cached := filepath.Join(s.dir, ".cache", "pre-commit", "linter", "bin", "lint")
		os.MkdirAll(filepath.Dir(cached), 0o755)
		os.WriteFile(cached, []byte("#!/bin/sh\nexit 0\n"), 0o755)
		s.commit(map[string]string{".husky/commit-msg": "#!/bin/sh\nexit 0\n"}, 0o755)
		testgit.Git(t, s.repo, "config", "core.hooksPath", ".husky")
		os.WriteFile(filepath.Join(s.repo, ".husky", "pre-commit"), []byte("#!/bin/sh\nexec "+cached+"\n"), 0o755)
		testgit.Git(t, s.repo, "add", ".husky/pre-commit")
		testgit.Git(t, s.repo, "commit", "-q", "-m", "hooks")
		s.noted()
		s.scenario(map[string][]fakes.Outcome{"execute:1": {{WriteFiles: map[string]string{"work.txt": "work\n"}, Commands: [][]string{
			plant(cached, s.planted("lint")),
			plant(".husky/commit-msg", s.planted("commit-msg")),
		}}}})
		s.own()
		r := s.run(append(s.env("on", "PEAL_COMMIT_AFTER_PHASE2=true", "PEAL_AGENT_CMD="+filepath.Join(s.dir, "bin", "claude")), testgit.Env...), "run")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		if got := s.ran(); !slices.Equal(got, []string{"lint", "ran", "token=", "commit-msg", "ran", "token="}) {
			t.Fatalf("planted programs ran: %q", got)
		}
		if got := s.git("log", "-1", "--format=%s"); got != "peal: task 1 - fake plan output for task 1\n" {
			t.Fatalf("the work tree's last commit: %q", got)
		}
		s.outside(r)
	})
}

// TestEscapeThroughTheAuthCheck: the agent CLI runs what its own folders
// hold (as Claude Code runs the hooks of its settings), and a confined call
// may write them. A first run's call plants a hook there; the second run's
// check that the CLI can authenticate runs the CLI confined, as its calls
// are: the hook runs without the token and writes nothing outside.
func TestEscapeThroughTheAuthCheck(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	asEach(t, "## Task 1\nWork\n", func(t *testing.T, s *treeTry) {
		s.own()
		// The Cursor CLI (checked before the first call when no key is
		// set), as a script that runs the hooks its folder holds.
		cli, real := filepath.Join(s.dir, "bin", "agent"), filepath.Join(s.dir, "real", "agent")
		os.MkdirAll(filepath.Dir(cli), 0o755)
		os.MkdirAll(filepath.Dir(real), 0o755)
		os.Symlink(s.bin("fakeagent"), real) // the fake takes its kind from its name
		// Its calls find their key in the script; peal's environment has
		// none, so peal asks the CLI whether it has a session.
		os.WriteFile(cli, []byte("#!/bin/sh\n[ -x \"$HOME/.cursor/hook\" ] && \"$HOME/.cursor/hook\"\n"+
			"[ \"$1\" = status ] || export CURSOR_API_KEY=test-key\nexec "+real+" \"$@\"\n"), 0o755)
		for _, p := range []string{cli, real, filepath.Dir(real)} {
			os.Lchown(p, s.uid, s.gid)
		}
		env := slices.DeleteFunc(s.env("on", "PEAL_AGENT_KIND=cursor", "PEAL_AGENT_CMD="+cli, fakes.SessionEnv+"=1"), func(kv string) bool {
			return strings.HasPrefix(kv, "CURSOR_API_KEY=") || strings.HasPrefix(kv, "PEAL_AGENT_KIND=claude")
		})
		s.rules(map[string][]fakes.Outcome{"execute:1": {{Commands: [][]string{plant(filepath.Join(s.dir, ".cursor", "hook"), s.planted("cli-hook"))}}}})
		if r := s.run(env, "run"); r.code != 0 {
			t.Fatalf("first run: exit %d: %s", r.code, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(s.dir, ".cursor", "hook")); err != nil {
			data, _ := os.ReadFile(filepath.Join(s.agentDir, fakes.CallsFile))
			t.Fatalf("the first run's call planted no hook: %v\n%s", err, data)
		}
		os.Remove(filepath.Join(s.agentDir, "ran")) // the first run's calls ran it
		os.WriteFile(s.plan, []byte("## Task 1\nWork\n## Task 2\nMore\n"), 0o644)
		s.rules(map[string][]fakes.Outcome{})
		r := s.run(env, "run")
		if r.code != 0 {
			t.Fatalf("second run: exit %d: %s", r.code, r.stderr)
		}
		// The check, then task 2's two calls.
		if got := s.ran(); len(got) != 9 || got[0] != "cli-hook" || got[2] != "token=" {
			t.Fatalf("the planted hook ran: %q", got)
		}
		s.outside(r)
	})
}

// TestEscapeThroughReviewSettings: the agent writes .review/config.toml in
// its tree, which stet reads: its model's host (here a listener outside
// the allow list). No stet runs on it: the task's review is refused, with
// one line naming the file, and the file is removed; the listener gets
// nothing.
func TestEscapeThroughReviewSettings(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	asEach(t, "## Task 1\nWork\n", func(t *testing.T, s *treeTry) {
		stetDir := filepath.Join(s.dir, "stet")
		os.MkdirAll(stetDir, 0o755)
		if err := fakes.WriteStetScenario(stetDir, fakes.StetScenario{}); err != nil {
			t.Fatal(err)
		}
		settings := "provider = \"openai\"\nopenai_base_url = \"http://" + s.listener.Addr().String() + "/v1\"\n"
		s.scenario(map[string][]fakes.Outcome{"execute:1": {{WriteFiles: map[string]string{".review/config.toml": settings, "work.txt": "work\n"}}}})
		s.own()
		env := append(s.env("on", "PEAL_STET_PATH="+s.bin("fakestet"), fakes.StetDirEnv+"="+stetDir, "PEAL_ON_STET_FAIL=skip",
			"PEAL_AGENT_CMD="+filepath.Join(s.dir, "bin", "claude")), testgit.Env...)
		r := s.run(env, "run")
		want := filepath.Join(".review", "config.toml") + " was made in the task's tree (stet would read its settings"
		if r.code != 1 || !strings.Contains(lastLine(r.stderr), want) || !strings.Contains(lastLine(r.stderr), "and removed it") {
			t.Fatalf("exit %d, last line %q, want it to hold %q", r.code, lastLine(r.stderr), want)
		}
		calls, err := fakes.ReadStetCalls(stetDir)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range calls {
			if c.Cmd == "run" {
				t.Fatalf("stet reviewed the tree holding the planted settings: %q", c.Args)
			}
		}
		s.outside(r)
	})
}

// TestEscapeThroughTheTree: what an agent leaves in its tree fails no git
// of peal's: a .review/ and a .peal/ folder its .gitignore lists, files
// with odd names, a named pipe, a link out of the tree. The work is
// committed (but the folders and the pipe).
func TestEscapeThroughTheTree(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	asEach(t, "## Task 1\nWork\n", func(t *testing.T, s *treeTry) {
		s.commit(map[string]string{".gitignore": ".review/\n.peal/\n"}, 0o644)
		odd := []string{"-n", " lead", "new\nline", "tab\there", "é"}
		cmds := [][]string{{"mkfifo", "pipe"}, {"ln", "-s", "/etc/passwd", "passwd"}, {"sh", "-c", `printf odd > "$(printf '\377\376')"`}}
		files := map[string]string{".review/notes.txt": "x\n", ".peal/state.json": "{}\n"}
		for _, n := range odd {
			files[n] = "odd\n"
		}
		s.scenario(map[string][]fakes.Outcome{"execute:1": {{WriteFiles: files, Commands: cmds}}})
		s.own()
		r := s.run(append(s.env("on", "PEAL_COMMIT_AFTER_PHASE2=true", "PEAL_AGENT_CMD="+filepath.Join(s.dir, "bin", "claude")), testgit.Env...), "run")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		got := strings.Split(s.git("show", "-z", "--name-only", "--format="), "\x00")
		got = slices.DeleteFunc(got, func(p string) bool { return strings.Trim(p, "\n") == "" })
		for i, p := range got {
			got[i] = strings.TrimPrefix(p, "\n") // the empty format's line
		}
		want := append(slices.Clone(odd), "passwd", "\xff\xfe")
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("committed %q, want %q", got, want)
		}
		s.outside(r)
	})
}

// TestEscapeOverTheUsersEnv: the agent takes .env out of what git ignores
// (a negation in .gitignore outranks the work tree's info/exclude, where
// peal names the entries it linked) and commits a link at its path, where the user keeps an ignored .env. The
// work tree never takes it: the task fails with one line naming .env and
// the branch its work is kept on, and the user's .env stays.
func TestEscapeOverTheUsersEnv(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	asEach(t, "## Task 1\nWork\n", func(t *testing.T, s *treeTry) {
		s.commit(map[string]string{".gitignore": ".env\n"}, 0o644)
		os.WriteFile(filepath.Join(s.repo, ".env"), []byte("SECRET=the user's\n"), 0o600)
		s.scenario(map[string][]fakes.Outcome{"execute:1": {{WriteFiles: map[string]string{".gitignore": "!.env\n"},
			Commands: [][]string{{"sh", "-c", "rm -f .env && ln -s /etc/hostname .env"}}}}})
		s.own()
		r := s.run(append(s.env("on", "PEAL_COMMIT_AFTER_PHASE2=true", "PEAL_AGENT_CMD="+filepath.Join(s.dir, "bin", "claude")), testgit.Env...), "run")
		last := lastLine(r.stderr)
		if r.code != 1 || !strings.Contains(last, "the work tree cannot take the change of .env: the work tree holds there something git does not track") ||
			!strings.Contains(last, "the run's work is kept on branch peal-kept/task-1-") {
			t.Fatalf("exit %d, last line %q", r.code, last)
		}
		info, err := os.Lstat(filepath.Join(s.repo, ".env"))
		if err != nil || !info.Mode().IsRegular() || fileText(t, filepath.Join(s.repo, ".env")) != "SECRET=the user's\n" {
			t.Fatalf("the user's .env: %v %v", info, err)
		}
		s.outside(r)
	})
}

func fileText(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestEscapeThroughASetUIDShell: the agent copies /bin/sh into an ignored
// build/ and makes it set-uid, in a folder it makes (which comes back from
// its worktree) and in one the work tree had (which it writes through a
// link, and where it makes a named pipe too): no file of the work tree is
// ever set-uid or set-gid, nor a named pipe. Where the
// machine filters system calls, the chmod is refused in the call and the
// copy comes back as the data it is; without the filter, the work that
// would bring a set-uid file back fails its task in one line naming it and
// the branch its work is kept on.
func TestEscapeThroughASetUIDShell(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	filtered := confine.Probe().Seccomp
	for _, had := range []bool{false, true} {
		t.Run(map[bool]string{false: "a folder it made", true: "a folder of the work tree"}[had], func(t *testing.T) {
			t.Parallel()
			asEach(t, "## Task 1\nWork\n", func(t *testing.T, s *treeTry) {
				s.commit(map[string]string{".gitignore": "build/\n"}, 0o644)
				if had {
					os.MkdirAll(filepath.Join(s.repo, "build"), 0o755)
					os.WriteFile(filepath.Join(s.repo, "build", "out.txt"), []byte("out\n"), 0o644)
				}
				cmd := "mkdir -p build && cp /bin/sh build/sh && chmod 4755 build/sh; " +
					"cp /bin/sh build/sg && chmod 2755 build/sg; touch build/made && chmod u+s build/made"
				if had {
					// Where it writes through a link, no named pipe either
					// (one in its own tree fails its task as it comes back).
					cmd += "; mkfifo build/ff"
				}
				s.scenario(map[string][]fakes.Outcome{"execute:1": {{WriteFiles: map[string]string{"work.txt": "work\n"},
					Commands: [][]string{{"sh", "-c", cmd}}}}})
				s.own()
				r := s.run(append(s.env("on", "PEAL_COMMIT_AFTER_PHASE2=true", "PEAL_AGENT_CMD="+filepath.Join(s.dir, "bin", "claude")), testgit.Env...), "run")
				last := lastLine(r.stderr)
				switch {
				case filtered && r.code != 0:
					t.Fatalf("exit %d, last line %q", r.code, last)
				case !filtered && !had && (r.code != 1 || !strings.Contains(last, "the work tree cannot take the change of build/") ||
					!strings.Contains(last, "kept on branch peal-kept/task-1-")):
					t.Fatalf("exit %d, last line %q", r.code, last)
				}
				filepath.WalkDir(s.repo, func(p string, d fs.DirEntry, err error) error {
					if err != nil || d.IsDir() {
						return nil
					}
					if info, err := d.Info(); err == nil && (info.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 || info.Mode()&fs.ModeNamedPipe != 0) {
						t.Errorf("%s is %s in the work tree", p, info.Mode())
					}
					return nil
				})
				s.outside(r)
			})
		})
	}
}

// TestEscapeThroughAnIgnoredLink: a task leaves, ignored, a link to a
// folder outside the repository (and one in a folder of its own); the
// next task writes through them. A link is never a grant: the folder
// outside stays as it was, and so does the repository's .git/hooks, which
// a third link names.
func TestEscapeThroughAnIgnoredLink(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	asEach(t, "## Task 1\nLinks\n## Task 2\nThrough them\n", func(t *testing.T, s *treeTry) {
		outside := filepath.Join(s.dir, "outside")
		os.MkdirAll(outside, 0o777)
		hooks := filepath.Join(s.repo, ".git", "hooks")
		s.commit(map[string]string{".gitignore": "zz\nsub/lnk\nhk\n"}, 0o644)
		s.scenario(map[string][]fakes.Outcome{
			"execute:1": {{WriteFiles: map[string]string{"one.txt": "one\n"}, Commands: [][]string{{"sh", "-c",
				"ln -s " + outside + " zz && mkdir -p sub && ln -s " + outside + " sub/lnk && ln -s " + hooks + " hk"}}}},
			"execute:2": {{WriteFiles: map[string]string{"two.txt": "two\n"}, Commands: [][]string{{"sh", "-c",
				"echo out > zz/o1; echo out > sub/lnk/o2; printf '#!/bin/sh\\ntouch " + filepath.Join(s.dir, "ran") + "\\n' > hk/pre-commit; chmod 755 hk/pre-commit; true"}}}}})
		s.own()
		r := s.run(append(s.env("on", "PEAL_COMMIT_AFTER_PHASE2=true", "PEAL_AGENT_CMD="+filepath.Join(s.dir, "bin", "claude")), testgit.Env...), "run")
		if r.code != 0 {
			t.Fatalf("exit %d, last line %q", r.code, lastLine(r.stderr))
		}
		if got := fileText(t, filepath.Join(s.repo, "two.txt")); got != "two\n" {
			t.Errorf("task 2's own work: %q", got)
		}
		if entries, _ := os.ReadDir(outside); len(entries) > 0 {
			t.Errorf("the folder outside was written: %v", entries)
		}
		if _, err := os.Lstat(filepath.Join(hooks, "pre-commit")); err == nil {
			t.Error("a hook was planted through a link")
		}
		s.outside(r)
	})
}
