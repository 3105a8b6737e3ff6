package agent

import (
	"slices"
	"strings"
	"testing"

	"peal/phase"
)

// TestSessionArgv: a call that begins or continues a session carries the
// kind's session arguments after its own and before the model, the user's
// extra arguments and the prompt (codex: `resume <id>` after -C and -s, and
// before "-"); a read-only and a writing call each keep their own phase's
// flags.
func TestSessionArgv(t *testing.T) {
	t.Parallel()
	const uuid = "be06e92d-7e30-408b-a760-4199698be73e"
	cases := []struct {
		kind, phase string
		id          string
		resume      bool
		want        []string // after the program
	}{
		{"claude", "plan", uuid, false, []string{"-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "plan", "--session-id", uuid, "--model", "m", "--x"}},
		{"claude", "execute", uuid, true, []string{"-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "bypassPermissions", "--resume", uuid, "--model", "m", "--x"}},
		{"gemini", "plan", uuid, false, []string{"--skip-trust", "--approval-mode", "plan", "--output-format", "stream-json", "--session-id", uuid, "-m", "m", "--x"}},
		{"gemini", "address", uuid, true, []string{"--skip-trust", "--approval-mode", "yolo", "--output-format", "stream-json", "--resume", uuid, "-m", "m", "--x"}},
		// codex chooses its ids: a first call has no session argument.
		{"codex", "plan", "", false, []string{"exec", "-C", "/r", "--skip-git-repo-check", "--json", "-s", "read-only", "-m", "m", "--x", "-"}},
		{"codex", "execute", uuid, true, []string{"exec", "-C", "/r", "--skip-git-repo-check", "--json", "--dangerously-bypass-approvals-and-sandbox", "resume", uuid, "-m", "m", "--x", "-"}},
		{"codex", "plan", uuid, true, []string{"exec", "-C", "/r", "--skip-git-repo-check", "--json", "-s", "read-only", "resume", uuid, "-m", "m", "--x", "-"}},
		{"opencode", "execute", "ses_de58068acffe5icQe7VmATEd4j", true, []string{"run", "--dir", "/r", "--auto", "--format", "json", "--session", "ses_de58068acffe5icQe7VmATEd4j", "-m", "m", "--x"}},
		{"opencode", "plan", "ses_de58068acffe5icQe7VmATEd4j", true, []string{"run", "--dir", "/r", "--agent", "plan", "--format", "json", "--session", "ses_de58068acffe5icQe7VmATEd4j", "-m", "m", "--x"}},
		{"cursor", "execute", uuid, true, []string{"--print", "--workspace", "/r", "--sandbox", "enabled", "--output-format", "stream-json", "--resume", uuid, "--model", "m", "--x", "P"}},
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		k, _ := Lookup(tc.kind)
		covered[tc.kind] = true
		inv, err := k.Invocation("/bin/x", Call{Phase: phase.Name(tc.phase), Repo: "/r", Model: "m", Prompt: "P", Structured: true,
			Session: tc.id, Resume: tc.resume, Options: Options{Sandbox: "enabled"}, Extra: []string{"--x"}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(inv.Argv[1:], tc.want) {
			t.Errorf("%s %s (resume %v): argv %q\nwant %q", tc.kind, tc.phase, tc.resume, inv.Argv[1:], tc.want)
		}
	}
	for _, name := range Names() {
		if k, _ := Lookup(name); k.Session != nil && !covered[name] {
			t.Errorf("kind %s continues sessions and has no row here", name)
		}
	}
}

// TestSessionIDsNeverPickAnotherSession: an id that a CLI could read as an
// option, as "the newest session", as an index, as a title or as no id at
// all is refused before anything runs.
func TestSessionIDsNeverPickAnotherSession(t *testing.T) {
	t.Parallel()
	bad := []string{"latest", "--last", "-1", "1", "12345678", "not-a-uuid", "be06e92d-7e30-408b-a760", "a b", "../x"}
	for _, name := range Names() {
		k, _ := Lookup(name)
		if k.Session == nil {
			continue
		}
		for _, id := range bad {
			if k.Session.ValidID(id) {
				t.Errorf("%s takes the session id %q", name, id)
			}
			if _, err := k.Invocation("/bin/x", Call{Phase: "plan", Repo: "/r", Prompt: "P", Session: id, Resume: true}); err == nil {
				t.Errorf("%s: an invocation with the session id %q was made", name, id)
			}
		}
		if k.Session.Chosen && !k.Session.ValidID(NewID()) {
			t.Errorf("%s refuses the ids peal chooses", name)
		}
	}
}

func TestNewID(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 100 {
		id := NewID()
		if !uuidPattern.MatchString(id) || id[14] != '4' || !strings.ContainsRune("89ab", rune(id[19])) || seen[id] {
			t.Fatalf("id %q (seen %v)", id, seen[id])
		}
		seen[id] = true
	}
}

// TestSessionLost: each CLI's measured words for a session it cannot
// resume are told apart from its other failures.
func TestSessionLost(t *testing.T) {
	t.Parallel()
	cases := []struct {
		kind  string
		res   phase.Result
		named bool
		lost  bool
		quote string
	}{
		{"claude", phase.Result{ExitCode: 1, Stderr: "No conversation found with session ID: be06e92d-7e30-408b-a760-4199698be73e\n",
			Stdout: `{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["No conversation found with session ID: be06e92d-7e30-408b-a760-4199698be73e"]}` + "\n"},
			false, true, "No conversation found with session ID: be06e92d-7e30-408b-a760-4199698be73e"},
		{"claude", phase.Result{ExitCode: 1, Stdout: "API Error: Unable to connect to API (ConnectionRefused)\n"}, true, false, ""},
		{"codex", phase.Result{ExitCode: 1, Stderr: "Error: thread/resume: thread/resume failed: no rollout found for thread id 01a21a7f-6211-7fc0-9a1e-a0fa8555ca1f (code -32600)\n"},
			false, true, "Error: thread/resume: thread/resume failed: no rollout found for thread id 01a21a7f-6211-7fc0-9a1e-a0fa8555ca1f (code -32600)"},
		{"codex", phase.Result{ExitCode: 1, Stderr: "ERROR: exceeded retry limit, last status: 429 Too Many Requests\n"}, true, false, ""},
		{"gemini", phase.Result{ExitCode: 42, Stderr: "Error resuming session: Invalid session identifier \"be06e92d-7e30-408b-a760-4199698be73e\".\n" +
			"  Searched for sessions in /h/.gemini/tmp/repo/chats.\n  Use --list-sessions to see available sessions, then use --resume {number}, --resume {uuid}, or --resume latest.\n"},
			false, true, "Error resuming session: Invalid session identifier \"be06e92d-7e30-408b-a760-4199698be73e\"."},
		{"gemini", phase.Result{ExitCode: 42, Stderr: "Error resuming session: No previous sessions found for this project.\n"}, false, true,
			"Error resuming session: No previous sessions found for this project."},
		{"gemini", phase.Result{ExitCode: 42, Stderr: "something new\n"}, false, true, "something new"},
		{"gemini", phase.Result{ExitCode: 1, Stderr: "exception TypeError: fetch failed sending request\n"}, true, false, ""},
		{"opencode", phase.Result{ExitCode: 1, Stderr: "\x1b[91m\x1b[1mError: \x1b[0mSession not found\n"}, false, true, "Error: Session not found"},
		{"opencode", phase.Result{ExitCode: 1, Stderr: "\x1b[91m\x1b[1mError: \x1b[0minvalid x-api-key\n"}, true, false, ""},
		// The Cursor CLI was not measured: a failure before its events
		// named the session is taken as one it could not resume.
		{"cursor", phase.Result{ExitCode: 1, Stderr: "Error: chat not found\n"}, false, true, "Error: chat not found"},
		{"cursor", phase.Result{ExitCode: 1, Stderr: "ConnectError: [unavailable] connect ECONNREFUSED 127.0.0.1:443\n"}, true, false, ""},
	}
	for _, tc := range cases {
		k, _ := Lookup(tc.kind)
		quote, lost := k.Session.LostIn(tc.res, tc.named)
		if lost != tc.lost || quote != tc.quote {
			t.Errorf("%s %q: lost %v %q, want %v %q", tc.kind, tc.res.Stderr+tc.res.Stdout, lost, quote, tc.lost, tc.quote)
		}
	}
}

// TestUsageSince: a resumed call's own usage, from a CLI that counts the
// whole session (codex 0.171.0: 240 → 516 → 1024 input tokens over three
// calls), is the difference from the count before it.
func TestUsageSince(t *testing.T) {
	t.Parallel()
	first := Usage{InputTokens: 240, OutputTokens: 45, CachedTokens: 14}
	second := Usage{InputTokens: 516, OutputTokens: 90, CachedTokens: 28}
	if got := second.Since(first); got != (Usage{InputTokens: 276, OutputTokens: 45, CachedTokens: 14}) {
		t.Fatalf("since %+v", got)
	}
	if got := first.Since(Usage{}); got != first {
		t.Fatalf("a first call's own is its count: %+v", got)
	}
	// A count that went down (a session the CLI began anew) is new.
	if got := first.Since(second); got != first {
		t.Fatalf("a count that went down: %+v", got)
	}
}
