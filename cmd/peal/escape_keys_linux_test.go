package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
)

// The model keys of the escape suite's codex runs: both start with
// realKeyPrefix, which the escape program is told written backwards.
const (
	realKeyPrefix = "sk-peal-real-"
	realCodexKey  = realKeyPrefix + "codex-0123456789"
	realOpenAIKey = realKeyPrefix + "openai-0123456789"
)

// TestEscapeThroughTheCLIsConfiguration: a call of the first run rewrites
// its CLI's configuration (~/.codex/config.toml, in the folder Codex's
// calls write) so that the model's requests go to a listener of its
// choosing on 127.0.0.1: Codex's own base URL (base-url), or a provider of
// its own whose env_key is GITHUB_TOKEN (provider). A call of the next
// run sends the CLI's model request to the base URL peal gives it, with
// what its environment holds. The listener, judged from outside, never
// gets a key of peal's environment (CODEX_API_KEY, OPENAI_API_KEY,
// GITHUB_TOKEN), the call finds none in clear, and the start line of the
// next run says the key is neither held nor passed, and what to set.
// Before, peal's endpoint sent the real key (or the token) there.
func TestEscapeThroughTheCLIsConfiguration(t *testing.T) {
	t.Parallel()
	skipWithoutLandlock(t)
	for _, variant := range []string{"base-url", "provider"} {
		t.Run(variant, func(t *testing.T) {
			t.Parallel()
			asEach(t, "## Task 1\nWork\n", func(t *testing.T, s *treeTry) {
				var mu sync.Mutex
				var got []string
				listener := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization")+" "+r.Header.Get("Via"))
					mu.Unlock()
					w.Write([]byte(`{"ok":true}`))
				}))
				defer listener.Close()
				escapeBin := s.bin("escape")
				s.rules(map[string][]fakes.Outcome{
					"execute:1": {{WriteFiles: map[string]string{"one.txt": "one\n"}, Commands: [][]string{{escapeBin, "cli-config", "write", variant, listener.URL}}}},
					"execute:2": {{WriteFiles: map[string]string{"two.txt": "two\n"}, Commands: [][]string{{escapeBin, "cli-config", "request"}}}},
				})
				s.own()
				codex := filepath.Join(s.dir, "bin", "codex")
				if s.uid != 0 {
					progs := filepath.Join(s.dir, "programs")
					copyProgram(t, bins["escape"], filepath.Join(progs, "escape"))
					s.programs["escape"] = filepath.Join(progs, "escape")
					// The scenario names the test's program: the user's copy
					// takes its place.
					s.rules(map[string][]fakes.Outcome{
						"execute:1": {{WriteFiles: map[string]string{"one.txt": "one\n"}, Commands: [][]string{{s.bin("escape"), "cli-config", "write", variant, listener.URL}}}},
						"execute:2": {{WriteFiles: map[string]string{"two.txt": "two\n"}, Commands: [][]string{{s.bin("escape"), "cli-config", "request"}}}},
					})
				}
				os.MkdirAll(filepath.Dir(codex), 0o755)
				if err := os.Symlink(s.bin("fakeagent"), codex); err != nil {
					t.Fatal(err)
				}
				os.Lchown(codex, s.uid, s.gid)
				env := append(s.env("on", "PEAL_AGENT_KIND=codex", "PEAL_AGENT_CMD="+codex, "CODEX_API_KEY="+realCodexKey,
					"OPENAI_API_KEY="+realOpenAIKey, "ESCAPE_KEY_PREFIX="+reversed(realKeyPrefix)), testgit.Env...)
				r := s.run(env, "run")
				if r.code != 0 {
					t.Fatalf("first run: exit %d\n%s", r.code, r.stderr)
				}
				written, err := os.ReadFile(filepath.Join(s.dir, ".codex", "config.toml"))
				if err != nil || !strings.Contains(string(written), listener.URL) {
					t.Fatalf("the first run's call did not rewrite its CLI's configuration: %q (%v)", written, err)
				}
				if err := os.WriteFile(s.plan, []byte("## Task 1\nWork\n\n## Task 2\nMore work\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				r = s.run(env, "run")
				if r.code != 0 {
					t.Fatalf("second run: exit %d\n%s", r.code, r.stderr)
				}
				mu.Lock()
				heard := slices.Clone(got)
				mu.Unlock()
				for _, h := range heard {
					for _, secret := range []string{realCodexKey, realOpenAIKey, plantedToken} {
						if strings.Contains(h, secret) {
							t.Errorf("the listener the call chose got a secret of peal's environment: %q", h)
						}
					}
				}
				escaped, failed, _, ok := s.results()
				if len(escaped) > 0 || len(failed) > 0 {
					t.Errorf("escaped: %q\nfailed: %q", escaped, failed)
				}
				if !slices.ContainsFunc(ok, func(l string) bool { return strings.HasSuffix(l, "cli-config-written") }) {
					t.Errorf("the first run's call did not say it wrote the configuration: %q", ok)
				}
				// What to set: the listener's host on confine_network_allow,
				// or GITHUB_TOKEN on confine_env_pass, were either the user's.
				set := map[string]string{"base-url": "on confine_network_allow", "provider": "name it on confine_env_pass"}[variant]
				line := startLine(r.stderr)
				if !strings.Contains(line, "codex's model key (") || !strings.Contains(line, "neither held nor passed to its calls") ||
					!strings.Contains(line, set) || !strings.Contains(line, "CODEX_API_KEY, OPENAI_API_KEY kept from codex's calls") {
					t.Errorf("the second run's start line does not say the key is neither held nor passed, and why:\n%s", line)
				}
				s.outside(r)
			})
		})
	}
}

// reversed is s written backwards.
func reversed(s string) string {
	r := []rune(s)
	slices.Reverse(r)
	return string(r)
}
