package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"peal/internal/gitrepo"
	"peal/internal/testkit/mockllm"
)

// readFiles are the files of the home folder that hold credentials which
// the escape script tries to read beyond the first secrets (by the name
// the tests judge): git's second credential store, npm's, PostgreSQL's,
// the container engines', Maven's and Gradle's settings, the shell's
// history. And "home file" is any other file of the home folder (it is
// read by allow list).
var readFiles = map[string]string{
	"git credentials":   ".config/git/credentials",
	"npmrc":             ".npmrc",
	"pgpass":            ".pgpass",
	"containers auth":   ".config/containers/auth.json",
	"maven settings":    ".m2/settings.xml",
	"gradle properties": ".gradle/gradle.properties",
	"bash history":      ".bash_history",
	"home file":         "notes/todo.txt",
}

// readNames are the read attempts the tests judge: each of readFiles, and
// peal's configuration file.
var readNames = []string{
	"git credentials", "npmrc", "pgpass", "containers auth", "maven settings", "gradle properties", "bash history", "home file",
	"peal config",
}

// plantReads plants the files of readFiles in the world's home folder and
// peal's configuration file beside it (run names it with --config), each
// with a marker the judgement looks for everywhere.
func (w *confineWorld) plantReads(t *testing.T, mark string) {
	t.Helper()
	for name, rel := range readFiles {
		marker := "PEAL-TEST-" + strings.ToUpper(strings.ReplaceAll(name, " ", "-")) + "-" + mark
		w.secrets[name] = planted{filepath.Join(w.sb.home, rel), "token=" + marker + "\n", marker}
	}
	marker := "PEAL-TEST-CONFIG-" + mark
	w.config = filepath.Join(w.root, "peal.toml")
	w.secrets["peal config"] = planted{w.config, "# " + marker + "\nkill_grace_sec = 5\n", marker}
}

// readTries are the script's reads of what plantReads planted.
func (w *confineWorld) readTries(try func(name, cmd string), q func(string) string) {
	for _, name := range readNames {
		try(name, "cat "+q(w.secrets[name].path))
	}
}

// TestPealConfinedGitCredentials: a token in the repository's git
// configuration, as actions/checkout leaves it, stops a confined run before
// the CLI starts, in one line naming the key and the fix: no request
// reaches the model.
func TestPealConfinedGitCredentials(t *testing.T) {
	t.Parallel()
	eachAgent(t, func(t *testing.T, a agent) {
		w := newConfineWorld(t, a, "on", worldOptions{}, func(w *confineWorld) mockllm.Script {
			return escapeTask(piped("cat \"$(git rev-parse --git-common-dir)/config\"", "bash"))
		})
		writeFile(t, w.plan, "# Plan\n\n## Task 1\n\nCreate hello.txt with a greeting.\n")
		token := "AUTHORIZATION: basic " + w.token
		if _, err := gitrepo.Plain(w.sb.repo, w.sb.base...).Command("config", "http.https://github.com/.extraheader", token).Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		r := w.run(t)
		want := fmt.Sprintf("peal: error: http.https://github.com/.extraheader (in %s) holds an HTTP header git sends", filepath.Join(w.sb.repo, ".git", "config"))
		if r.code != 1 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "persist-credentials: false") {
			t.Fatalf("want exit 1 and %q\n%s", want, w)
		}
		if n := len(w.srv.Requests()); n != 0 {
			t.Errorf("%d requests reached the model", n)
		}
		if strings.Contains(r.stderr, w.token) {
			t.Errorf("the line shows the token")
		}
		if _, err := os.Stat(w.state); err == nil {
			t.Errorf("the state folder was made")
		}
	})
}
