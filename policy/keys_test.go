package policy

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"peal/agent"
	"peal/confine"
)

// TestKeyHolds: under confine_key_proxy = auto, an agent call of a kind
// whose login peal can hold gets the hold (and no longer the host of the
// base URL it had, nor its loopback port: its base URL is peal's), a check
// gets none, and the start line says whose key is held and whose login
// stays in reach; on refuses to start where it cannot hold a key, or
// where a call could read peal's environment; off holds nothing.
func TestKeyHolds(t *testing.T) {
	t.Parallel()
	full := confine.Support{ABI: 7, Files: true, TCP: true, Seccomp: true, Supervise: true, PIDNamespace: true}
	bare := confine.Support{Why: "no Landlock here"}
	cases := []struct {
		name   string
		cfg    []string
		env    map[string]string
		sup    confine.Support
		held   map[string][]string // kind → held variables (nil: none)
		line   []string            // in the start line
		refuse string              // the error of on
	}{
		{name: "claude's key", env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-x", "ANTHROPIC_BASE_URL": "http://127.0.0.1:4321"}, sup: full,
			held: map[string][]string{"claude": {"ANTHROPIC_API_KEY"}},
			line: []string{"claude's model key (ANTHROPIC_API_KEY) held by peal's endpoint, which forwards to 127.0.0.1:4321, its calls given a placeholder"}},
		{name: "claude and codex's keys", cfg: []string{"PEAL_FALLBACK_AGENT_KIND=codex", "PEAL_FALLBACK_AGENT_CMD=/bin/true"},
			env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-x", "CODEX_API_KEY": "sk-x"}, sup: full,
			held: map[string][]string{"claude": {"ANTHROPIC_API_KEY"}, "codex": {"CODEX_API_KEY"}},
			line: []string{"claude's model key (ANTHROPIC_API_KEY) held", "codex's model key (CODEX_API_KEY) held"}},
		{name: "claude logged in", sup: full, line: []string{"claude's login in its calls' reach (none of ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN is set"}},
		{name: "claude logged in, on", cfg: []string{"PEAL_CONFINE_KEY_PROXY=on"}, sup: full,
			refuse: "confine_key_proxy = on (set by PEAL_CONFINE_KEY_PROXY), but peal cannot hold the model key of the claude agent: none of ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN is set"},
		{name: "claude's key, on", cfg: []string{"PEAL_CONFINE_KEY_PROXY=on"}, env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-x"}, sup: full,
			held: map[string][]string{"claude": {"ANTHROPIC_API_KEY"}}},
		{name: "a machine that keeps no call from peal's environment", env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-x"}, sup: bare,
			held: map[string][]string{"claude": {"ANTHROPIC_API_KEY"}},
			line: []string{"but a call could read peal's own environment on this machine, where the key is"}},
		{name: "the same, on", cfg: []string{"PEAL_CONFINE_KEY_PROXY=on"}, env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-x"}, sup: bare,
			refuse: "confine_key_proxy = on (set by PEAL_CONFINE_KEY_PROXY), but on this machine a call could read peal's own environment"},
		{name: "off", cfg: []string{"PEAL_CONFINE_KEY_PROXY=off"}, env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-x"}, sup: full,
			line: []string{"the agents' model keys in their calls' environment (confine_key_proxy = off)"}},
		{name: "cursor", cfg: []string{"PEAL_AGENT_KIND=cursor"}, env: map[string]string{"CURSOR_API_KEY": "k"}, sup: full,
			line: []string{"cursor's CURSOR_API_KEY in its calls' reach (its CLI (Cursor CLI) takes no other base URL for its API)"}},
	}
	for _, c := range cases {
		cfg := configOf(t, append([]string{"PEAL_CONFINE=auto"}, c.cfg...)...)
		m := machine{home: t.TempDir(), getenv: func(k string) string { return c.env[k] }, euid: os.Geteuid()}
		r, err := newRulesOn(cfg, nil, c.sup, true, m)
		if c.refuse != "" {
			if err == nil || !strings.HasPrefix(err.Error(), c.refuse) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.refuse)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var callEnv []string
		if u := c.env["ANTHROPIC_BASE_URL"]; u != "" {
			callEnv = []string{"ANTHROPIC_BASE_URL=" + u}
		}
		for _, name := range agent.Names() {
			k, _ := agent.Lookup(name)
			call := r.ForCall(Site{Tree: cfg.RepoPath}, k, callEnv)
			want := c.held[name]
			switch {
			case want == nil && call.Keys != nil:
				t.Errorf("%s: %s's calls get a hold of %q", c.name, name, call.Keys.Vars())
			case want != nil && (call.Keys == nil || strings.Join(call.Keys.Vars(), ",") != strings.Join(want, ",")):
				t.Errorf("%s: %s's calls get %+v, want %q held", c.name, name, call.Keys, want)
			case want != nil && (call.Allow.Permits("127.0.0.1:4321") || call.Access.TCP != nil && len(call.Access.TCP.Connect) > 0):
				t.Errorf("%s: %s's call may still reach its base URL's host: %q %+v", c.name, name, call.Allow.Entries(), call.Access.TCP)
			}
		}
		if check := r.ForCall(Site{Tree: cfg.RepoPath}, nil, nil); check.Keys != nil {
			t.Errorf("%s: a check gets a hold", c.name)
		}
		for _, l := range c.line {
			if !strings.Contains(r.Line(), l) {
				t.Errorf("%s: the start line does not say %q:\n%s", c.name, l, r.Line())
			}
		}
	}
}

// TestKeyHoldOnlyConfined: an unheld base URL's loopback port stays open to
// the call, as before; the rules of a machine taken as unenforced, and of a
// description, hold nothing (their calls never reach an endpoint).
func TestKeyHoldOnlyConfined(t *testing.T) {
	t.Parallel()
	full := confine.Support{ABI: 7, Files: true, TCP: true, Seccomp: true, Supervise: true, PIDNamespace: true}
	env := map[string]string{"ANTHROPIC_API_KEY": "sk-ant-x", "ANTHROPIC_BASE_URL": "http://127.0.0.1:4321"}
	m := machine{home: t.TempDir(), getenv: func(k string) string { return env[k] }, euid: os.Geteuid()}
	k, _ := agent.Lookup("claude")
	off, err := newRulesOn(configOf(t, "PEAL_CONFINE_KEY_PROXY=off"), nil, full, true, m)
	if err != nil {
		t.Fatal(err)
	}
	if call := off.ForCall(Site{Tree: t.TempDir()}, k, []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:4321"}); call.Keys != nil || !call.Allow.Permits("127.0.0.1:4321") {
		t.Errorf("off: %+v, allow %q", call.Keys, call.Allow.Entries())
	}
	un, _ := newRulesOn(configOf(t), nil, full, true, m)
	un.AsUnenforced()
	desc, _ := newRulesOn(configOf(t), nil, full, false, m)
	for name, r := range map[string]*Rules{"unenforced": un, "description": desc} {
		if call := r.ForCall(Site{Tree: t.TempDir()}, k, nil); call.Keys != nil {
			t.Errorf("%s: a hold", name)
		}
	}
	if line := desc.keys.describe(k); !strings.Contains(line, "its model key (ANTHROPIC_API_KEY) held by peal's endpoint, which forwards to 127.0.0.1:4321, the calls given a placeholder") {
		t.Errorf("description: %q", line)
	}
}

// TestKeysKeptFromCalls: no key variable of peal's environment reaches a
// call in clear where peal holds the kind's key, whatever the login, nor
// where the login it holds nothing of does not use it; a configuration
// file of the CLI (Codex's, in a folder its calls write) that sends the
// key to a host the user did not name, or names another variable as the
// key, gets nothing held and nothing passed. The start line names what is
// held, what stays in the calls' reach and what is kept from them.
func TestKeysKeptFromCalls(t *testing.T) {
	t.Parallel()
	full := confine.Support{ABI: 7, Files: true, TCP: true, Seccomp: true, Supervise: true, PIDNamespace: true}
	codex := []string{"PEAL_AGENT_KIND=codex"}
	provider := func(url, envKey string) string {
		return "model_provider = \"atk\"\n[model_providers.atk]\nbase_url = \"" + url + "\"\nenv_key = \"" + envKey + "\"\n"
	}
	all := map[string]string{"CODEX_API_KEY": "sk-codex-real", "OPENAI_API_KEY": "sk-openai-real", "GITHUB_TOKEN": "ghp-real"}
	cases := []struct {
		name     string
		cfg      []string
		env      map[string]string // over all
		codexCfg string
		held     []string // the variables held
		withheld []string
		line     string
	}{
		{name: "codex's key", cfg: codex, held: []string{"CODEX_API_KEY", "OPENAI_API_KEY"},
			line: "codex's model key (CODEX_API_KEY, OPENAI_API_KEY) held by peal's endpoint, which forwards to api.openai.com, its calls given a placeholder"},
		{name: "OPENAI_API_KEY alone", cfg: codex, env: map[string]string{"CODEX_API_KEY": ""}, withheld: []string{"OPENAI_API_KEY"},
			line: "codex's login in its calls' reach (CODEX_API_KEY is not set: codex exec logs in with what `codex login` keeps in its folder); OPENAI_API_KEY kept from codex's calls"},
		{name: "openai_base_url elsewhere", cfg: codex, codexCfg: `openai_base_url = "http://127.0.0.1:9999/v1"`, withheld: []string{"CODEX_API_KEY", "OPENAI_API_KEY"},
			line: "codex's model key (CODEX_API_KEY, OPENAI_API_KEY) neither held nor passed to its calls: its base URL names 127.0.0.1:9999"},
		{name: "a provider elsewhere", cfg: codex, codexCfg: provider("http://127.0.0.1:9999/v1", "OPENAI_API_KEY"), withheld: []string{"CODEX_API_KEY", "OPENAI_API_KEY"},
			line: "codex's model key (OPENAI_API_KEY (provider atk)) neither held nor passed to its calls"},
		{name: "a provider naming GITHUB_TOKEN", cfg: append(codex, "PEAL_CONFINE_NETWORK_ALLOW=127.0.0.1:9999"), codexCfg: provider("http://127.0.0.1:9999/v1", "GITHUB_TOKEN"),
			withheld: []string{"CODEX_API_KEY", "OPENAI_API_KEY"},
			line:     "GITHUB_TOKEN, the env_key of its provider atk in "},
		{name: "a provider the user allowed", cfg: append(codex, "PEAL_CONFINE_NETWORK_ALLOW=127.0.0.1:9999"), codexCfg: provider("http://127.0.0.1:9999/v1", "OPENAI_API_KEY"),
			held: []string{"OPENAI_API_KEY"}, withheld: []string{"CODEX_API_KEY"},
			line: "codex's model key (OPENAI_API_KEY (provider atk)) held by peal's endpoint, which forwards to 127.0.0.1:9999, its calls given a placeholder; CODEX_API_KEY kept from codex's calls"},
		{name: "CODEX_API_KEY passed by the user", cfg: append(codex, "PEAL_CONFINE_NETWORK_ALLOW=127.0.0.1:9999", "PEAL_CONFINE_ENV_PASS=CODEX_API_KEY"),
			codexCfg: provider("http://127.0.0.1:9999/v1", "OPENAI_API_KEY"), held: []string{"OPENAI_API_KEY"},
			line: "its calls given a placeholder, CODEX_API_KEY in its calls' reach (confine_env_pass)"},
		{name: "confine_key_proxy = off", cfg: append(codex, "PEAL_CONFINE_KEY_PROXY=off"), codexCfg: `openai_base_url = "http://127.0.0.1:9999/v1"`,
			line: "the agents' model keys in their calls' environment (confine_key_proxy = off)"},
	}
	for _, c := range cases {
		env := maps.Clone(all)
		maps.Copy(env, c.env)
		home := t.TempDir()
		if c.codexCfg != "" {
			os.MkdirAll(filepath.Join(home, ".codex"), 0o755)
			if err := os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(c.codexCfg), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cfg := configOf(t, append([]string{"PEAL_CONFINE=auto", "PEAL_AGENT_CMD=/bin/true"}, c.cfg...)...)
		r, err := newRulesOn(cfg, nil, full, true, machine{home: home, getenv: func(k string) string { return env[k] }, euid: os.Geteuid()})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		k, _ := agent.Lookup("codex")
		call := r.ForCall(Site{Tree: cfg.RepoPath}, k, nil)
		var held []string
		if call.Keys != nil {
			held = call.Keys.Vars()
		}
		// What the call inherits of peal's environment: no key in clear
		// but those the user passes; those held are replaced by their
		// placeholders as it starts.
		var peal []string
		for _, k := range slices.Sorted(maps.Keys(env)) {
			if env[k] != "" {
				peal = append(peal, k+"="+env[k])
			}
		}
		inherited := call.Environ(peal)
		var withheld []string
		for _, v := range []string{"CODEX_API_KEY", "OPENAI_API_KEY"} {
			if env[v] != "" && !slices.Contains(held, v) && !slices.Contains(inherited, v+"="+env[v]) {
				withheld = append(withheld, v)
			}
		}
		if !slices.Equal(held, c.held) || !slices.Equal(withheld, c.withheld) {
			t.Errorf("%s: held %q, withheld %q; want %q, %q", c.name, held, withheld, c.held, c.withheld)
		}
		for _, kv := range inherited {
			name, value, _ := strings.Cut(kv, "=")
			if strings.HasSuffix(value, "-real") && !slices.Contains(held, name) && !slices.Contains(cfg.ConfineEnvPass, name) && cfg.ConfineKeyProxy != "off" {
				t.Errorf("%s: the call inherits %s in clear", c.name, kv)
			}
		}
		if !strings.Contains(r.Line(), c.line) {
			t.Errorf("%s: the start line does not say %q:\n%s", c.name, c.line, r.Line())
		}
	}
}
