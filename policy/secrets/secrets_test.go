package secrets

import (
	"slices"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	env := map[string]string{"CARGO_HOME": "/opt/cargo", "XDG_CACHE_HOME": "/c", "HF_HOME": "relative", "GOENV": "/g/env"}
	getenv := func(n string) string { return env[n] }
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"~/.ssh", "/h/.ssh", true},
		{"${CARGO_HOME:-~/.cargo}/config.toml", "/opt/cargo/config.toml", true},
		{"${HF_TOKEN_PATH:-${HF_HOME:-$CACHE/huggingface}/token}", "/c/huggingface/token", true},
		{"${GOENV:-$CONFIG/go/env}", "/g/env", true},
		{"$CONFIG/gh", "/h/.config/gh", true},
		{"$DATA/keyrings", "/h/.local/share/keyrings", true},
		{"${UNCLOSED:-~/x", "", false},
		{"relative/path", "", false},
	} {
		got, ok := Expand(c.in, "/h", getenv)
		if got != c.want || ok != c.ok {
			t.Errorf("Expand(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestIn: every file of the list has a full path in a home folder, none
// twice; without a home folder there is none.
func TestIn(t *testing.T) {
	paths := In("/h", nil)
	if len(paths) != len(Files) {
		t.Fatalf("%d paths for %d files", len(paths), len(Files))
	}
	for i, p := range paths {
		if !strings.HasPrefix(p, "/h/") || slices.Contains(paths[:i], p) {
			t.Errorf("%s: %q", Files[i].Tool, p)
		}
	}
	if got := In("", nil); got != nil {
		t.Errorf("no home: %q", got)
	}
}
