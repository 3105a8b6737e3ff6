package agent

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestLoginQuote: a login check that says no quotes the line that says
// why, as each CLI prints it (measured: `claude auth status` 2.1.197 and
// `codex login status` under a HOME without credentials), not the last
// line of the output; a check that cannot start says so, and is no
// verdict on the credentials.
func TestLoginQuote(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		kind, out string
		exit      int
		want      string
	}{
		{"claude", "{\n  \"loggedIn\": false,\n  \"authMethod\": \"none\",\n  \"apiProvider\": \"firstParty\"\n}\n", 1,
			"no credential variable set (ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN, CLAUDE_CODE_USE_BEDROCK, CLAUDE_CODE_USE_VERTEX) and `claude auth status` says: \"loggedIn\": false"},
		{"codex", "Not logged in\n", 1, "no credential variable set (OPENAI_API_KEY, CODEX_API_KEY) and `codex login status` says: Not logged in"},
	} {
		k, err := Lookup(tc.kind)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "out-"+tc.kind), []byte(tc.out), 0o644); err != nil {
			t.Fatal(err)
		}
		cli := filepath.Join(dir, tc.kind)
		script := "#!/bin/sh\ncat '" + filepath.Join(dir, "out-"+tc.kind) + "'\nexit " + string(rune('0'+tc.exit)) + "\n"
		if err := os.WriteFile(cli, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		st := k.CheckAuth(context.Background(), cli, dir, []string{"PATH=" + os.Getenv("PATH")}, nil)
		if st.OK || !st.Known || st.Err != nil || st.Detail != tc.want {
			t.Errorf("%s: %+v\nwant detail %q", tc.kind, st, tc.want)
		}
	}
	k, _ := Lookup("cursor")
	st := k.CheckAuth(context.Background(), filepath.Join(dir, "missing"), dir, nil, nil)
	if st.OK || st.Known || st.Err == nil {
		t.Errorf("a check that cannot start: %+v", st)
	}
}
