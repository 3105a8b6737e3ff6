package agent

import "testing"

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
