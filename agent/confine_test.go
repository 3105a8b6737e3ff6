package agent

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"peal/confine"
)

func TestExpandPath(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SET": "/opt/state", "RELATIVE": "state", "DOTS": "/opt/a/../b", "EMPTY": ""}
	getenv := func(name string) string { return env[name] }
	for _, c := range []struct {
		path, home string
		want       string
		ok         bool
	}{
		{"~/.claude", "/home/u", "/home/u/.claude", true},
		{"~", "/home/u", "/home/u", true},
		{"~/.claude", "", "", false},
		{"~/.claude", "relative", "", false},
		{"/etc/tool", "/home/u", "/etc/tool", true},
		{"relative/tool", "/home/u", "", false},
		{"~user/x", "/home/u", "", false},
		// A variable set to a full path wins; else the default.
		{"${SET:-~/.codex}", "/home/u", "/opt/state", true},
		{"${SET:-~/.codex}/auth.json", "/home/u", "/opt/state/auth.json", true},
		{"${UNSET:-~/.codex}/auth.json", "/home/u", "/home/u/.codex/auth.json", true},
		{"${EMPTY:-~/.codex}", "/home/u", "/home/u/.codex", true},
		{"${RELATIVE:-~/.codex}", "/home/u", "/home/u/.codex", true},
		{"${UNSET:-~}/.gemini", "/home/u", "/home/u/.gemini", true},
		// ".." in a variable's value is taken as the CLIs take it: lexically.
		{"${DOTS:-~/.x}/y", "/home/u", "/opt/b/y", true},
		{"${UNSET:-~/.x}", "", "", false},
		{"${SET}", "/home/u", "", false},
		{"${:-~/.x}", "/home/u", "", false},
		{"${SET:-~/.x", "/home/u", "", false},
	} {
		got, ok := ExpandPath(c.path, c.home, getenv)
		if got != c.want || ok != c.ok {
			t.Errorf("ExpandPath(%q, %q) = %q, %v; want %q, %v", c.path, c.home, got, ok, c.want, c.ok)
		}
	}
}

// declared are a kind's declared paths, made full with home and no
// variable set.
func declared(t *testing.T, k *Kind, list []string, home string) []string {
	t.Helper()
	var out []string
	for _, p := range list {
		full, ok := ExpandPath(p, home, func(string) string { return "" })
		if !ok {
			t.Errorf("kind %s: %q cannot be made full", k.Name, p)
			continue
		}
		out = append(out, full)
	}
	return out
}

// TestConfinementDeclarations holds every kind's declaration to the rules a
// confined call depends on.
func TestConfinementDeclarations(t *testing.T) {
	t.Parallel()
	const home = "/home/u"
	secrets := confine.Base(home).Deny
	kinds := map[string]*Kind{}
	for _, name := range Names() {
		kinds[name], _ = Lookup(name)
	}
	for name, k := range kinds {
		c := k.Confine
		if len(c.Folders) == 0 || len(c.Credentials) == 0 || len(c.Hosts) == 0 || len(c.Env) == 0 || c.Notes == "" {
			t.Errorf("kind %s declares no folders, credentials, hosts, variables or notes: its confined calls could not work", name)
		}
		for _, list := range [][]string{c.Folders, c.Reads, c.Credentials} {
			for _, p := range list {
				// Written as ~/… or ${VAR:-~…}/…, clean, no "..": the
				// declarations are ours, and say plainly where they lead.
				bare := p
				if i := strings.Index(p, "}"); strings.HasPrefix(p, "${") && i > 0 {
					bare = p[strings.Index(p, ":-")+2:i] + p[i+1:]
				}
				if !strings.HasPrefix(bare, "~/") || slices.Contains(strings.Split(bare, "/"), "..") || filepath.Clean(bare) != bare {
					t.Errorf("kind %s: %q is not a clean path under ~/", name, p)
				}
			}
		}
		folders := declared(t, k, c.Folders, home)
		// What it reads is never a secret, nor in one: a read grant there
		// would be an error.
		for _, r := range declared(t, k, c.Reads, home) {
			for _, s := range secrets {
				if r == s.Path || strings.HasPrefix(r, s.Path+"/") {
					t.Errorf("kind %s reads %s, which lies in the secret %s", name, r, s.Path)
				}
			}
		}
		for _, f := range folders {
			if !strings.HasPrefix(f, home+"/") {
				t.Errorf("kind %s: folder %s is not beneath the home folder", name, f)
			}
			for _, s := range secrets {
				if f == s.Path || strings.HasPrefix(f, s.Path+"/") || strings.HasPrefix(s.Path, f+"/") {
					t.Errorf("kind %s: folder %s and the secret %s overlap", name, f, s.Path)
				}
			}
		}
		// Another kind's credentials never lie in a kind's folders: the
		// folder's grant would have to be cut around them.
		for other, ok := range kinds {
			if other == name {
				continue
			}
			for _, cred := range declared(t, ok, ok.Confine.Credentials, home) {
				for _, f := range append(slices.Clone(folders), declared(t, k, c.Reads, home)...) {
					if cred == f || strings.HasPrefix(cred, f+"/") || strings.HasPrefix(f, cred+"/") {
						t.Errorf("kind %s's folder or read %s holds kind %s's credentials %s", name, f, other, cred)
					}
				}
			}
		}
		if _, err := confine.ParseAllow(name, c.Hosts...); err != nil {
			t.Errorf("kind %s: hosts: %v", name, err)
		}
		for _, v := range c.Env {
			if !confine.ValidEnvPattern(v) {
				t.Errorf("kind %s: %q is not a variable name or NAME_* pattern", name, v)
			}
		}
		for _, v := range c.BaseURLs {
			if strings.ContainsAny(v, "*=") || v == "" {
				t.Errorf("kind %s: base URL variable %q is not a name", name, v)
			}
		}
		pass := slices.Concat(c.Env, c.BaseURLs)
		// A variable that moves a folder reaches the CLI too, so that the
		// CLI writes where peal granted.
		for _, p := range slices.Concat(c.Folders, c.Credentials) {
			if name, _, ok := strings.Cut(strings.TrimPrefix(p, "${"), ":-"); strings.HasPrefix(p, "${") && ok {
				if len(confine.FilterEnv([]string{name + "=/x"}, pass)) == 0 {
					t.Errorf("kind %s: %s moves %q but does not reach its calls", k.Name, name, p)
				}
			}
		}
		// The variables that log the CLI in pass: a key set in the job's
		// environment reaches the CLI.
		for _, v := range k.Auth.Env {
			if len(confine.FilterEnv([]string{v + "=x"}, pass)) == 0 {
				t.Errorf("kind %s: its credential variable %s does not pass", name, v)
			}
		}
		// What no kind's calls inherit: tokens of other services, and the
		// more powerful keys of its own provider.
		for _, v := range []string{"GITHUB_TOKEN", "GH_TOKEN", "GITLAB_TOKEN", "NPM_TOKEN", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
			"AWS_SESSION_TOKEN", "ANTHROPIC_ADMIN_KEY", "OPENAI_ADMIN_KEY", "CODEX_GITHUB_PERSONAL_ACCESS_TOKEN", "DOCKER_AUTH_CONFIG",
			"SSH_AUTH_SOCK", "GOOGLE_OAUTH_CLIENT_SECRET", "HF_TOKEN"} {
			if len(confine.FilterEnv([]string{v + "=x"}, pass)) > 0 {
				t.Errorf("kind %s passes %s to its calls", name, v)
			}
		}
	}
}
