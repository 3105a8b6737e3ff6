package policy

import (
	"os"
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
			line: []string{"claude's model key (ANTHROPIC_API_KEY) held by peal's endpoint, its calls given a placeholder"}},
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
			line: []string{"cursor's login in its calls' reach (its CLI (Cursor CLI) takes no other base URL for its API)"}},
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
	if line := desc.keys.describe(k); !strings.Contains(line, "its model key (ANTHROPIC_API_KEY) held by peal's endpoint, which forwards to 127.0.0.1:4321") {
		t.Errorf("description: %q", line)
	}
}
