package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
)

// The escape suite's tries through git: what a call leaves in its tree
// that peal's own git, or stet's, would run, and what the calls' own git
// would hand them of the user's configuration.

// nestedRepository is the agent's command that makes sub/ a repository of
// its own with a commit, names program (planted at .git/fsmonitor there) as
// its file system monitor, and leaves sub/f changed: git add -A would
// stage sub as a submodule, and a git that then looks at the submodule's
// files runs the monitor, as the user, with peal's environment.
func nestedRepository(program string) [][]string {
	return [][]string{{"sh", "-c", `set -e
git init -q sub
cd sub
echo a > f
git add f
git -c user.name=agent -c user.email=agent@example.com commit -q -m agent
printf '%s' "$1" > .git/fsmonitor
chmod +x .git/fsmonitor
git config core.fsmonitor "$PWD/.git/fsmonitor"
echo b > f`, "sh", program}}
}

// TestEscapeThroughANestedRepository: the agent makes sub/ a repository of
// its own whose file system monitor is its program, and leaves a file
// there changed; the task's work is committed (commit_after_phase2), or
// reviewed by stet (the real one when PEAL_STET_BIN names it; its git
// looks at the tree's status). The program never runs: the task fails
// with one line naming sub/, its work (sub's files among it) is kept on a
// branch, and the user's branch is as it was.
func TestEscapeThroughANestedRepository(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	for _, tc := range []struct {
		name   string
		review bool
	}{{"commit_after_phase2", false}, {"reviewed by stet", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			asEach(t, "## Task 1\nWork\n", func(t *testing.T, s *treeTry) {
				review := func() []string { return []string{"PEAL_COMMIT_AFTER_PHASE2=true"} }
				if tc.review {
					review = s.stet()
				}
				s.scenario(map[string][]fakes.Outcome{"execute:1": {{WriteFiles: map[string]string{"work.txt": "work\n"},
					Commands: nestedRepository(s.planted("fsmonitor"))}}})
				s.own()
				extra := append(review(), "PEAL_AGENT_CMD="+filepath.Join(s.dir, "bin", "claude"))
				head := s.git("rev-parse", "HEAD")
				r := s.run(append(s.env("on", extra...), testgit.Env...), "run")
				if got := s.ran(); len(got) > 0 {
					t.Fatalf("the nested repository's monitor ran: %q", got)
				}
				last := lastLine(r.stderr)
				if r.code != 1 || !strings.Contains(last, "the task's tree holds a git repository that a call made (sub/, with its own .git)") {
					t.Fatalf("exit %d, last line %q\n%s", r.code, last, r.stderr)
				}
				if now := s.git("rev-parse", "HEAD"); now != head {
					t.Fatalf("the user's branch moved to %s", now)
				}
				kept := strings.Fields(s.git("for-each-ref", "--format=%(refname:short)", "refs/heads/peal-kept/"))
				if len(kept) != 1 || !strings.Contains(last, "its work is kept on branch "+kept[0]) {
					t.Fatalf("kept branches %q; last line %q", kept, last)
				}
				if got := s.git("show", kept[0]+":sub/f"); got != "b\n" {
					t.Fatalf("the kept branch holds sub/f = %q", got)
				}
				if got := s.git("ls-tree", kept[0], "sub"); !strings.HasPrefix(got, "040000 tree ") {
					t.Fatalf("the kept branch holds sub as %q, want a folder", got)
				}
				s.outside(r)
			})
		})
	}
}

// stet readies the review of a try, before own, and returns the variables
// that choose it, for after: the real stet when PEAL_STET_BIN names one,
// with a review model on 127.0.0.1 that finds nothing, else the fake; its
// git finds the identity of its notes in the user's configuration.
func (s *treeTry) stet() func() []string {
	s.t.Helper()
	os.WriteFile(filepath.Join(s.dir, ".gitconfig"), []byte("[user]\n\tname = t\n\temail = t@example.com\n"), 0o644)
	if real := os.Getenv("PEAL_STET_BIN"); real != "" {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/v1/models":
				fmt.Fprint(w, `{"object":"list","data":[{"id":"mock-model","object":"model"}]}`)
			case "/v1/chat/completions":
				fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":"[]"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`)
			default:
				http.NotFound(w, r)
			}
		}))
		s.t.Cleanup(srv.Close)
		return func() []string {
			return []string{"PEAL_STET_PATH=" + real, "STET_PROVIDER=openai", "STET_OPENAI_BASE_URL=" + srv.URL + "/v1", "STET_MODEL=mock-model"}
		}
	}
	stetDir := filepath.Join(s.dir, "stet")
	os.MkdirAll(stetDir, 0o755)
	if err := fakes.WriteStetScenario(stetDir, fakes.StetScenario{}); err != nil {
		s.t.Fatal(err)
	}
	return func() []string {
		return []string{"PEAL_STET_PATH=" + s.bin("fakestet"), fakes.StetDirEnv + "=" + stetDir}
	}
}

// gitConfigTokens is the secret of every credential the user's git
// configuration holds in TestEscapeThroughTheUsersGitConfig.
const gitConfigTokens = "ghp_gitconfig_token_0123456789"

// gitProbe is a script a call runs to find the user's credentials through
// git: the user's configuration read as a file and through git, and a
// credential asked of git for two hosts; what it saw goes to the file its
// argument names.
const gitProbe = `{ cat "$HOME/.gitconfig"; git config --list --show-origin
printf 'protocol=https\nhost=github.com\n\n' | git credential fill
printf 'protocol=https\nhost=gitlab.com\n\n' | git credential fill
echo "name=$(git config user.name)"; } > "$1" 2>&1
exit 0
`

// TestEscapeThroughTheUsersGitConfig: the user's ~/.gitconfig holds a
// token in the shapes git takes one that the start's check of the
// configuration did not know (an inline credential helper,
// sendemail.smtpPass, github.token, a helper that reads
// ~/.git-credentials), then in every shape (a URL of url.*.insteadOf, an
// extra header too). An agent call and a check read it, list git's
// configuration and ask git for a credential: they see none of it, and git
// gives them the user's identity. The run is not stopped for it: no call
// reads that file.
func TestEscapeThroughTheUsersGitConfig(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	unknown := "[user]\n\tname = The User\n\temail = user@example.com\n" +
		"[credential]\n\thelper = \"!f() { echo username=u; echo password=" + gitConfigTokens + "; }; f\"\n" +
		"[credential \"https://gitlab.com\"]\n\thelper = store\n" +
		"[sendemail]\n\tsmtpPass = " + gitConfigTokens + "\n[github]\n\ttoken = " + gitConfigTokens + "\n"
	every := unknown + "[url \"https://x:" + gitConfigTokens + "@github.com/\"]\n\tinsteadOf = https://github.com/\n" +
		"[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic " + gitConfigTokens + "\n"
	for name, gitconfig := range map[string]string{"shapes the start did not know": unknown, "every shape": every} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			asEach(t, "## Task 1\nWork\n", func(t *testing.T, s *treeTry) {
				os.WriteFile(filepath.Join(s.home, ".gitconfig"), []byte(gitconfig), 0o600)
				os.WriteFile(filepath.Join(s.home, ".git-credentials"), []byte("https://u:"+gitConfigTokens+"@gitlab.com\n"), 0o600)
				call, check, probe := filepath.Join(s.agentDir, "seen-call"), filepath.Join(s.agentDir, "seen-check"), filepath.Join(s.agentDir, "probe.sh")
				os.WriteFile(probe, []byte(gitProbe), 0o644)
				s.scenario(map[string][]fakes.Outcome{"execute:1": {{WriteFiles: map[string]string{"work.txt": "work\n"}, Commands: [][]string{{"sh", probe, call}}}}})
				s.own()
				r := s.run(s.env("on", "PEAL_AGENT_CMD="+filepath.Join(s.dir, "bin", "claude"), "PEAL_CHECK_COMMANDS=sh "+probe+" "+check), "run")
				if r.code != 0 {
					t.Fatalf("exit %d: %s", r.code, r.stderr)
				}
				for _, f := range []string{call, check} {
					data, err := os.ReadFile(f)
					if err != nil {
						t.Fatalf("the probe wrote nothing: %v", err)
					}
					seen := string(data)
					if strings.Contains(seen, gitConfigTokens) || strings.Contains(seen, "smtppass") || strings.Contains(seen, "password=") {
						t.Errorf("%s saw a credential:\n%s", filepath.Base(f), seen)
					}
					if !strings.Contains(seen, "name=The User") {
						t.Errorf("%s's git has not the user's identity:\n%s", filepath.Base(f), seen)
					}
				}
				s.outside(r)
			})
		})
	}
}
