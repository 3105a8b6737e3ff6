package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testbin"
)

// readMarker is in every file the read tries look for: found anywhere
// outside its file, the file was read.
const readMarker = "planted-read-secret-7f3a"

// readTries are the escape program's reads (testdata/escape/reads.go):
// each secret file, a file of the home folder and its listing, peal's
// configuration file, another user's home folder.
var readTries = []string{
	"read-.config/git/credentials", "read-.npmrc", "read-.pgpass", "read-.config/containers/auth.json", "read-.m2/settings.xml",
	"read-.gradle/gradle.properties", "read-.bash_history", "read-.cache/huggingface/token", "read-.config/go/env", "read-.cargo/config.toml",
	"read-home-file", "list-home", "read-peal-config", "list-root",
}

// plantReads plants in the sandbox's home folder the files the read tries
// look for, and a git configuration that includes a file of its own (a
// call's git stops at an include it may not read); it writes peal's
// configuration file outside the home folder and returns its path.
func plantReads(t *testing.T, s *escapeSandbox) string {
	t.Helper()
	files := map[string]string{
		".config/git/credentials":      "https://user:" + readMarker + "@github.com\n",
		".npmrc":                       "//registry.npmjs.org/:_authToken=" + readMarker + "\n",
		".pgpass":                      "db:5432:*:user:" + readMarker + "\n",
		".config/containers/auth.json": `{"auths":{"ghcr.io":{"auth":"` + readMarker + `"}}}` + "\n",
		".m2/settings.xml":             "<settings><servers><server><password>" + readMarker + "</password></server></servers></settings>\n",
		".gradle/gradle.properties":    "signing.password=" + readMarker + "\n",
		".bash_history":                "export API_TOKEN=" + readMarker + "\n",
		".cache/huggingface/token":     "hf_" + readMarker + "\n",
		".config/go/env":               "GOPROXY=https://user:" + readMarker + "@proxy.example\n",
		".cargo/config.toml":           "[registries.private]\ntoken = \"" + readMarker + "\"\n",
		".bashrc":                      "# the user's\n",
		".gitconfig":                   "[include]\n\tpath = .gitconfig.local\n",
		".gitconfig.local":             "[core]\n\tquotePath = false\n",
	}
	for name, text := range files {
		p := filepath.Join(s.home, name)
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(testbin.ListSafeDir(t), "peal.toml")
	if err := os.WriteFile(cfg, []byte("# "+readMarker+"\nkill_grace_sec = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestReadsOfCallsAndChecks: an agent call and a check try to read each
// secret file, a file of the home folder and its listing, peal's
// configuration file and another user's home folder: confined, each is
// refused, their own work (git, whose configuration includes a file of the
// home folder) is done, and the marker is nowhere; unconfined, each read
// gets through (the suite can fail).
func TestReadsOfCallsAndChecks(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	for _, mode := range []string{"on", "off"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			s := newEscapeSandbox(t, "## Task 1\nDo the work\n")
			cfg := plantReads(t, s)
			s.scenario(map[string][]fakes.Outcome{"execute:1": {{Commands: [][]string{{bins["escape"]}},
				WriteFiles: map[string]string{"escape.sh": "exec " + bins["escape"] + "\n"}}}})
			env := s.env(mode, "PEAL_CHECK_COMMANDS=test ! -f escape.sh || sh escape.sh", "ESCAPE_CONFIG="+cfg)
			r := s.peal(env, "run", "--config", cfg)
			escaped, failed, blocked, ok := s.results()
			for _, who := range []string{"[execute 1] ", "[check 1] "} {
				for _, try := range readTries {
					switch {
					case mode == "off" && !slices.Contains(escaped, who+try):
						t.Errorf("unconfined, %s%s did not get through: %q", who, try, escaped)
					case mode == "on" && !slices.ContainsFunc(blocked, func(b string) bool { return strings.HasPrefix(b, who+try+": ") }):
						t.Errorf("%s%s was not refused: blocked %q, escaped %q", who, try, blocked, escaped)
					}
				}
			}
			if mode == "off" {
				return
			}
			if r.code != 0 || len(escaped) > 0 || len(failed) > 0 {
				t.Fatalf("exit %d\nescaped %q\nfailed %q\n%s", r.code, escaped, failed, r.stderr)
			}
			for _, work := range []string{"[execute 1] git-status", "[check 1] git-status", "[execute 1] git-diff", "[check 1] git-diff"} {
				if !slices.Contains(ok, work) {
					t.Errorf("%s was not done: %q", work, ok)
				}
			}
			s.outside(r)
			report := s.peal(s.env(mode), "report", "--format", "json")
			history := s.git(nil, "log", "--all", "-p")
			for where, text := range map[string]string{"stdout": r.stdout, "stderr": r.stderr, "the report": report.stdout, "the history": history} {
				if strings.Contains(text, readMarker) {
					t.Errorf("a planted secret is in %s", where)
				}
			}
		})
	}
}

// TestGitCredentialStopsTheRun: a token in the repository's configuration
// (an extra header, as actions/checkout leaves it; a password in a
// remote's URL) stops a confined run at the start, in one line naming the
// key and the fix, before any call and without writing the state folder;
// confine_git_credentials = allow runs it, with .git/config (and the
// token) in the calls' reach, as documented; an unconfined run does not
// look.
func TestGitCredentialStopsTheRun(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	const token = "AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzX3BsYW50ZWQ="
	for _, c := range []struct {
		name, key, value, want string
	}{
		{"extraheader", "http.https://github.com/.extraheader", token,
			"http.https://github.com/.extraheader (in %s) holds an HTTP header git sends (a token, as a CI checkout leaves it), which every confined call could read " +
				"(a call's own git reads that file): take it out (actions/checkout: persist-credentials: false), or set confine_git_credentials = allow " +
				"(--confine-git-credentials, PEAL_CONFINE_GIT_CREDENTIALS or confine_git_credentials in the config file) to run with it in the calls' reach"},
		{"remote URL", "remote.origin.url", "https://x-access-token:ghs_planted@github.com/o/r.git",
			"remote.origin.url (in %s) holds a password or token in a URL, which every confined call could read (a call's own git reads that file): " +
				"take it out of the URL (git remote set-url; a credential helper keeps it out of the configuration), or set confine_git_credentials = allow"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newEscapeSandbox(t, "## Task 1\nDo the work\n")
			s.git(nil, "config", c.key, c.value)
			s.scenario(map[string][]fakes.Outcome{"execute:1": {{Commands: [][]string{{"sh", "-c", `cat "$(git rev-parse --git-common-dir)/config" > seen.txt`}}}}})
			r := s.peal(s.env("on"), "run")
			want := "peal: error: " + strings.Replace(c.want, "%s", filepath.Join(s.repo, ".git", "config"), 1)
			if r.code != 1 || !strings.HasPrefix(lastLine(r.stderr), want) {
				t.Fatalf("exit %d, last line %q\nwant %q", r.code, lastLine(r.stderr), want)
			}
			if strings.Contains(r.stderr, "ghs_planted") || strings.Contains(r.stderr, "eC1hY2Nlc3M") {
				t.Errorf("the line shows the credential: %s", lastLine(r.stderr))
			}
			if keys := s.keys(); keys != "" {
				t.Errorf("calls %q before the refusal", keys)
			}
			if _, err := os.Stat(s.stateDir); err == nil {
				t.Errorf("the state folder was made")
			}
			// peal doctor names it too.
			if d := s.peal(s.env("on"), "doctor"); !strings.Contains(d.stdout, "FAIL  confinement: "+strings.TrimPrefix(want, "peal: error: ")) {
				t.Errorf("peal doctor:\n%s", d.stdout)
			}
			for _, mode := range []string{"off", "on"} {
				extra := []string{}
				if mode == "on" {
					extra = append(extra, "PEAL_CONFINE_GIT_CREDENTIALS=allow")
				}
				r = s.peal(s.env(mode, extra...), "run")
				if r.code != 0 {
					t.Fatalf("%s: exit %d: %s", mode, r.code, r.stderr)
				}
				// The call's git read its configuration: the credential is in
				// its reach, which is what allow says.
				if seen, _ := os.ReadFile(filepath.Join(s.repo, "seen.txt")); !strings.Contains(string(seen), c.value) {
					t.Errorf("%s: the call did not read .git/config: %q", mode, seen)
				}
				os.Remove(filepath.Join(s.repo, "seen.txt"))
				os.RemoveAll(s.stateDir)
			}
		})
	}
}

// TestReadDenialNamed: a call that failed after it was refused reading a
// file of the home folder gets one line naming the file and the key that
// would let it read it, confine_read_paths.
func TestReadDenialNamed(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	s := newEscapeSandbox(t, "## Task 1\nRead the notes\n")
	notes := filepath.Join(s.home, "notes", "todo.txt")
	os.MkdirAll(filepath.Dir(notes), 0o755)
	os.WriteFile(notes, []byte("buy milk\n"), 0o644)
	s.scenario(map[string][]fakes.Outcome{"execute:1": {{Commands: [][]string{{"sh", "-c", `cat "$HOME/notes/todo.txt"`}},
		Exit: 1, Stderr: "the notes could not be read"}}})
	r := s.peal(s.env("on"), "run")
	want := "the call was refused reading " + notes + ": it lies in " + s.home + " (the home folder, read by allow list), which a confined call reads only where allowed; confine_read_paths = [\"" + notes + "\"] would allow it"
	if r.code != 1 || !strings.Contains(lastLine(r.stderr), want) {
		t.Fatalf("exit %d, last line %q, want it to hold %q", r.code, lastLine(r.stderr), want)
	}
	// With the folder allowed, the same call (of the task run again) reads
	// it.
	s.scenario(map[string][]fakes.Outcome{"execute:1": {{Commands: [][]string{{"sh", "-c", `cat "$HOME/notes/todo.txt" > notes.txt`}}}}})
	if r := s.peal(s.env("on", "PEAL_CONFINE_READ_PATHS="+filepath.Dir(notes)+","+testbin.ReadPaths(bins)), "run"); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(s.repo, "notes.txt")); string(got) != "buy milk\n" {
		t.Errorf("notes.txt = %q", got)
	}
}

// TestReadsShown: peal config, peal doctor and the dry run say which
// folders calls read by allow list and what they read there.
func TestReadsShown(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	s := newEscapeSandbox(t, "## Task 1\nx\n")
	shared := filepath.Join(s.home, "shared")
	os.Mkdir(shared, 0o755)
	env := s.env("auto", "PEAL_CONFINE_READ_PATHS="+shared)
	for _, args := range [][]string{{"config"}, {"doctor"}, {"run", "--dry-run"}} {
		r := s.peal(env, args...)
		lines := described(r.stdout)
		for _, want := range []string{
			"read only where a call is allowed to", s.home + " (the home folder, read by allow list)",
			"claude agent calls", "write: its work tree",
			"read besides, in the home folders: " + shared + " (confine_read_paths)",
			"never read", filepath.Join(s.home, ".npmrc") + " (secret)", filepath.Join(s.home, ".bash_history") + " (secret)",
		} {
			if !slices.Contains(lines, want) {
				t.Errorf("peal %s lacks a line %q:\n%s", strings.Join(args, " "), want, r.stdout)
			}
		}
	}
}
