package agent

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"peal/internal/testkit/fakes"
	"peal/phase"
)

func TestArgvAndStdin(t *testing.T) {
	t.Parallel()
	opts := Options{Sandbox: "disabled", Trust: true, Force: true}
	cases := []struct {
		kind, phase string
		model       string
		structured  bool
		want        []string // after the program
		stdin       bool
	}{
		{"cursor", "plan", "", false, []string{"--print", "--plan", "--workspace", "/r", "--output-format", "text", "--trust", "P"}, false},
		{"cursor", "normalize", "m", false, []string{"--print", "--plan", "--workspace", "/r", "--output-format", "text", "--trust", "--model", "m", "P"}, false},
		{"cursor", "triage", "", false, []string{"--print", "--workspace", "/r", "--sandbox", "disabled", "--trust", "P"}, false},
		{"cursor", "execute", "m", false, []string{"--print", "--workspace", "/r", "--sandbox", "disabled", "--trust", "--force", "--model", "m", "P"}, false},
		{"cursor", "plan", "", true, []string{"--print", "--plan", "--workspace", "/r", "--output-format", "stream-json", "--trust", "P"}, false},
		{"cursor", "address", "", true, []string{"--print", "--workspace", "/r", "--sandbox", "disabled", "--output-format", "stream-json", "--trust", "--force", "P"}, false},
		{"claude", "plan", "", false, []string{"-p", "--permission-mode", "plan"}, true},
		{"claude", "execute", "opus", true, []string{"-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "bypassPermissions", "--model", "opus"}, true},
		{"codex", "triage", "", false, []string{"exec", "-C", "/r", "--skip-git-repo-check", "-s", "read-only", "-"}, true},
		{"codex", "address", "o3", true, []string{"exec", "-C", "/r", "--skip-git-repo-check", "--json", "--dangerously-bypass-approvals-and-sandbox", "-m", "o3", "-"}, true},
		{"gemini", "plan", "g", false, []string{"--skip-trust", "--approval-mode", "plan", "-m", "g"}, true},
		{"gemini", "execute", "", true, []string{"--skip-trust", "--approval-mode", "yolo", "--output-format", "stream-json"}, true},
		{"opencode", "normalize", "", false, []string{"run", "--dir", "/r", "--agent", "plan"}, true},
		{"opencode", "execute", "p/m", true, []string{"run", "--dir", "/r", "--auto", "--format", "json", "-m", "p/m"}, true},
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		k, err := Lookup(tc.kind)
		if err != nil {
			t.Fatal(err)
		}
		covered[tc.kind] = true
		inv, err := k.Invocation("/bin/x", Call{Phase: phase.Name(tc.phase), Repo: "/r", Model: tc.model, Prompt: "P", Structured: tc.structured, Options: opts})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(inv.Argv[1:], tc.want) || inv.Argv[0] != "/bin/x" {
			t.Errorf("%s %s: argv %q\nwant %q", tc.kind, tc.phase, inv.Argv[1:], tc.want)
		}
		if tc.stdin != (string(inv.Stdin) == "P") || tc.stdin == inv.PromptInArgv() {
			t.Errorf("%s %s: stdin %q, prompt in argv %v", tc.kind, tc.phase, inv.Stdin, inv.PromptInArgv())
		}
	}
	for _, name := range Names() {
		if !covered[name] {
			t.Errorf("kind %s has no row here: its argv is pinned nowhere", name)
		}
	}
}

func TestCursorTrustAndForceCanBeTurnedOff(t *testing.T) {
	t.Parallel()
	k, _ := Lookup("cursor")
	for _, o := range []Options{{Sandbox: "enabled"}, {Sandbox: "enabled", Trust: true}, {Sandbox: "enabled", Force: true}} {
		inv, _ := k.Invocation("agent", Call{Phase: "execute", Repo: "/r", Prompt: "P", Options: o})
		if slices.Contains(inv.Argv, "--trust") != o.Trust || slices.Contains(inv.Argv, "--force") != o.Force {
			t.Errorf("options %+v: argv %q", o, inv.Argv)
		}
		plan, _ := k.Invocation("agent", Call{Phase: "plan", Repo: "/r", Prompt: "P", Options: o})
		if slices.Contains(plan.Argv, "--force") {
			t.Errorf("a plan call never gets --force: %q", plan.Argv)
		}
	}
}

func TestPromptTooLongForAnArgument(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", MaxArgLen+1)
	cursor, _ := Lookup("cursor")
	_, err := cursor.Invocation("agent", Call{Phase: "execute", Repo: "/r", Prompt: long})
	var pe *PromptTooLongError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "execute prompt is 131072 bytes") || !strings.Contains(err.Error(), "stdin") {
		t.Fatalf("err = %v", err)
	}
	if _, err := cursor.Invocation("agent", Call{Phase: "execute", Repo: "/r", Prompt: long[1:]}); err != nil {
		t.Fatalf("a prompt of exactly the limit: %v", err)
	}
	claude, _ := Lookup("claude")
	inv, err := claude.Invocation("claude", Call{Phase: "execute", Repo: "/r", Prompt: long + long})
	if err != nil || len(inv.Stdin) != 2*len(long) {
		t.Fatalf("stdin has no such limit: %v", err)
	}
}

// A NUL byte in a prompt (an agent's plan text, a review) cannot be an
// argument: it is shown as U+FFFD on every kind, so that the call is made.
func TestPromptNUL(t *testing.T) {
	t.Parallel()
	for _, name := range Names() {
		k, _ := Lookup(name)
		inv, err := k.Invocation(name, Call{Phase: "execute", Repo: "/r", Prompt: "a\x00b"})
		if err != nil {
			t.Fatal(err)
		}
		prompt := string(inv.Stdin)
		if inv.PromptInArgv() {
			prompt = inv.Argv[len(inv.Argv)-1]
		}
		if prompt != "a\uFFFDb" {
			t.Errorf("%s: prompt %q", name, prompt)
		}
	}
}

// TestEnvCapsOwnRetries: Claude Code retries once by itself, which waits
// the server's retry-after when there is one, and no more.
func TestEnvCapsOwnRetries(t *testing.T) {
	t.Parallel()
	k, _ := Lookup("claude")
	inv, _ := k.Invocation("claude", Call{Phase: "plan", Prompt: "P"})
	if !slices.Equal(inv.Env, []string{"CLAUDE_CODE_MAX_RETRIES=1"}) {
		t.Fatalf("env %q", inv.Env)
	}
}

// res is a finished attempt for the classification tables.
func res(exit int, stdout, stderr string) phase.Result {
	return phase.Result{Phase: "execute", ExitCode: exit, Stdout: stdout, Stderr: stderr}
}

func classify(t *testing.T, kind string, u UserPatterns, r phase.Result) phase.Verdict {
	t.Helper()
	k, err := Lookup(kind)
	if err != nil {
		t.Fatal(err)
	}
	return k.Rules(u).Classifier(nil, nil, func() time.Time { return time.Unix(1_700_000_000, 0) })(r)
}

var builtin = UserPatterns{Builtin: true}

// TestClassificationTable: every measured failure of every CLI gets its
// class, and its message quotes the line that explains it.
func TestClassificationTable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		kind  string
		r     phase.Result
		class phase.Class
		quote string
	}{
		// claude
		{"claude", res(1, "Not logged in · Please run /login\n", ""), phase.Fatal, "Not logged in · Please run /login"},
		{"claude", res(1, "API Error: Unable to connect to API (ConnectionRefused)\n", ""), phase.Network, "Unable to connect to API (ConnectionRefused)"},
		{"claude", res(1, "API Error: Unable to connect to API (FailedToOpenSocket)\n", ""), phase.Network, "FailedToOpenSocket"},
		{"claude", res(1, "Invalid API key · Fix external API key\n", ""), phase.Fatal, "Invalid API key · Fix external API key"},
		{"claude", res(1, "", "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons\n"), phase.Fatal, "or set IS_SANDBOX=1"},
		{"claude", res(1, "", "error: unknown option '--plan'\n"), phase.Fatal, "unknown option '--plan'"},
		{"claude", res(1, "API Error: Request rejected (429) · Number of requests has exceeded your rate limit\n", ""), phase.RateLimited, "(429)"},
		{"claude", res(1, "API Error: Repeated 529 Overloaded errors\n", ""), phase.RateLimited, "Overloaded"},
		// codex
		{"codex", res(-1, "", "warning: Codex could not find bubblewrap on PATH.\nERROR: Reconnecting... 1/5\nstream disconnected before completion: failed to lookup address information: Name does not resolve\nERROR: Reconnecting... waiting for network\n"), phase.Network, "failed to lookup address information: Name does not resolve"},
		{"codex", res(-1, "", "stream disconnected before completion: Connection refused (os error 111)\n"), phase.Network, "Connection refused (os error 111)"},
		{"codex", res(1, "", "ERROR: Reconnecting... 5/5\nERROR: unexpected status 401 Unauthorized: Incorrect API key provided\n"), phase.Fatal, "401 Unauthorized: Incorrect API key provided"},
		{"codex", res(2, "", "error: unexpected argument '--print' found\n\nUsage: codex exec [OPTIONS] [PROMPT]\n"), phase.Fatal, "unexpected argument '--print' found"},
		{"codex", res(1, "", "ERROR: exceeded retry limit, last status: 429 Too Many Requests\n"), phase.RateLimited, "429 Too Many Requests"},
		// gemini
		{"gemini", res(41, "", "Please set an Auth method in your /root/.gemini/settings.json or specify one of the following environment variables before running: GEMINI_API_KEY\n"), phase.Fatal, "Please set an Auth method"},
		{"gemini", res(41, "", "Invalid auth method selected.\n"), phase.Fatal, "Invalid auth method selected."},
		{"gemini", res(55, "", "Gemini CLI is not running in a trusted directory.\n"), phase.Fatal, "not running in a trusted directory"},
		{"gemini", res(52, "", "some configuration problem\n"), phase.Fatal, "some configuration problem"},
		{"gemini", res(1, "", "exception TypeError: fetch failed sending request\nAn unexpected critical error occurred:[object Object]\n"), phase.Network, "exception TypeError: fetch failed sending request"},
		{"gemini", res(1, "", "[API Error: Resource has been exhausted (e.g. check quota). RESOURCE_EXHAUSTED]\n"), phase.RateLimited, "RESOURCE_EXHAUSTED"},
		{"gemini", res(1, "", "Unknown arguments: plan, workspace\n"), phase.Fatal, "Unknown arguments: plan, workspace"},
		// opencode (colours its stderr)
		{"opencode", res(1, "", "\x1b[0m\n> build · big-pickle\n\x1b[0m\n\x1b[91m\x1b[1mError: \x1b[0mCannot connect to API: Unable to connect. Is the computer able to access the url?\n"), phase.Network, "Error: Cannot connect to API: Unable to connect."},
		{"opencode", res(1, "", "\x1b[91m\x1b[1mError: \x1b[0minvalid x-api-key\n"), phase.Fatal, "Error: invalid x-api-key"},
		// opencode with an OpenAI-compatible provider relays OpenAI's 401.
		{"opencode", res(1, "", "\x1b[91m\x1b[1mError: \x1b[0mIncorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.\n"), phase.Fatal, "Error: Incorrect API key provided"},
		// opencode: two first starts in one data folder
		{"opencode", res(1, "", "\x1b[91m\x1b[1mError: \x1b[0mUnexpected error\n\nFailed query: \n        CREATE TABLE `workspace` (\n        );\n      \nparams: \n"), phase.Transient, "Failed query:"},
		{"opencode", res(1, "", "\x1b[91m\x1b[1mError: \x1b[0mUnexpected error\n\ndatabase is locked\n"), phase.Transient, "database is locked"},
		// cursor
		{"cursor", res(1, "", "Error: ENOENT: no such file or directory, rename '/root/.cursor/cli-config.json.tmp' -> '/root/.cursor/cli-config.json'\n"), phase.Transient, "cli-config.json.tmp"},
		{"cursor", res(1, "", "ConnectError: [unavailable] connect ECONNREFUSED 127.0.0.1:443\n"), phase.Network, "ECONNREFUSED"},
		{"cursor", res(0, fakes.CursorTrustRequired+"\n", ""), phase.Fatal, "Workspace Trust Required"},
		{"cursor", res(0, "Invalid Cursor API key. Check the value of CURSOR_API_KEY.\n", ""), phase.Fatal, "Invalid Cursor API key"},
		{"cursor", res(0, "You've hit your usage limit. Try again in 2 minutes, or upgrade your plan.\n", ""), phase.RateLimited, "usage limit"},
		{"cursor", res(1, "", "compile error in main.go\n"), phase.Ordinary, "compile error in main.go"},
		{"cursor", res(0, "the plan\n", ""), phase.Succeeded, ""},
	}
	for _, tc := range cases {
		v := classify(t, tc.kind, builtin, tc.r)
		if v.Class != tc.class {
			t.Errorf("%s %q/%q: class %s, want %s (err %v)", tc.kind, tc.r.Stdout, tc.r.Stderr, v.Class, tc.class, v.Err)
			continue
		}
		if tc.class == phase.Succeeded {
			continue
		}
		msg := v.Err.Error()
		if !strings.Contains(msg, tc.quote) || strings.Contains(msg, "\x1b") || strings.Contains(msg, "[object Object]") || strings.Contains(msg, "\n") {
			t.Errorf("%s: message %q does not quote %q cleanly", tc.kind, msg, tc.quote)
		}
	}
}

// TestFakeFailuresAreClassified: the fake's canned failures, which the
// runner tests use, are classified as the real messages they copy.
func TestFakeFailuresAreClassified(t *testing.T) {
	t.Parallel()
	want := map[string]phase.Class{
		fakes.FailNoCredentials: phase.Fatal, fakes.FailInvalidKey: phase.Fatal, fakes.FailRoot: phase.Fatal,
		fakes.FailConnectionRefused: phase.Network, fakes.FailRateLimit: phase.RateLimited, fakes.FailOverloaded: phase.RateLimited,
		fakes.FailConfigRace: phase.Transient, fakes.FailStoreRace: phase.Transient, fakes.FailUnauthorized: phase.Fatal, fakes.FailForbidden: phase.Fatal,
		fakes.FailModelNotFound: phase.Fatal, fakes.FailOutOfCredit: phase.Fatal, fakes.FailOverContext: phase.Fatal,
		fakes.FailRetryAfter: phase.RateLimited, fakes.FailRateLimitRetries: phase.RateLimited,
	}
	for kind, cli := range fakes.CLIs {
		for name, f := range cli.Failures {
			class := want[name]
			if kind == "codex" && name == fakes.FailNoCredentials || kind == "opencode" && name == fakes.FailNoCredentials {
				// Without credentials, codex dials the API forever and
				// opencode falls back to a free model it cannot reach.
				class = phase.Network
			}
			text := f.TextFor("m") + "\n" + f.TextFor(f.Repeat)
			r := res(f.Exit, text, "")
			if f.Stderr {
				r = res(f.Exit, "", text)
			}
			if f.Forever {
				r.ExitCode = -1
			}
			v := classify(t, kind, builtin, r)
			if v.Class != class {
				t.Errorf("%s %s: %s, want %s (%v)", kind, name, v.Class, class, v.Err)
			}
			var unknown *UnknownModelError
			if got, want := errors.As(v.Err, &unknown), name == fakes.FailModelNotFound; got != want {
				t.Errorf("%s %s: a model that does not exist: %v, want %v (%v)", kind, name, got, want, v.Err)
			}
			var quota *QuotaError
			if got, want := errors.As(v.Err, &quota), name == fakes.FailOutOfCredit; got != want {
				t.Errorf("%s %s: out of quota: %v, want %v (%v)", kind, name, got, want, v.Err)
			}
			var window *ContextWindowError
			if got, want := errors.As(v.Err, &window), name == fakes.FailOverContext; got != want {
				t.Errorf("%s %s: over the context window: %v, want %v (%v)", kind, name, got, want, v.Err)
			}
		}
	}
}

// TestEveryKindHasAFake: the fake agent imitates every kind, under the
// kind's usual binary, and no kind peal does not have.
func TestEveryKindHasAFake(t *testing.T) {
	t.Parallel()
	for _, name := range Names() {
		k, _ := Lookup(name)
		cli, ok := fakes.CLIs[name]
		if !ok {
			t.Errorf("the fake agent does not imitate %s: add its value to fakes.CLIs", name)
			continue
		}
		if fakes.KindOf(k.DefaultCmd) != name {
			t.Errorf("the fake imitates %s under %q, not under its usual binary %q", name, cli.Names, k.DefaultCmd)
		}
		if cli.ModelFlag != k.ModelFlag {
			t.Errorf("%s: the fake takes the model after %q, peal passes it after %q", name, cli.ModelFlag, k.ModelFlag)
		}
		// Sessions: the fake begins and resumes them as the kind declares,
		// and its words for one it cannot resume are the kind's.
		switch {
		case (k.Session != nil) != (cli.Session != nil):
			t.Errorf("%s: peal continues sessions %v, the fake %v", name, k.Session != nil, cli.Session != nil)
		case k.Session != nil:
			if k.Session.Chosen != (cli.Session.Begin != "") {
				t.Errorf("%s: peal chooses the ids %v, the fake takes one %v", name, k.Session.Chosen, cli.Session.Begin != "")
			}
			f := cli.Session.Lost("be06e92d-7e30-408b-a760-4199698be73e")
			res := phase.Result{ExitCode: f.Exit, Stdout: f.Text + "\n"}
			if f.Stderr {
				res = phase.Result{ExitCode: f.Exit, Stderr: f.Text + "\n"}
			}
			if _, lost := k.Session.LostIn(res, false); !lost {
				t.Errorf("%s: the fake's words for a session it cannot resume (%q) are not the kind's", name, f.Text)
			}
		}
	}
	for name := range fakes.CLIs {
		if _, err := Lookup(name); err != nil {
			t.Errorf("the fake imitates %s, which is no kind: %v", name, err)
		}
	}
}

func TestUserPatternsExtendOrReplace(t *testing.T) {
	t.Parallel()
	hiccup := res(1, "", "upstream hiccup\n")
	notLogged := res(1, "Not logged in · Please run /login\n", "")
	if v := classify(t, "claude", UserPatterns{Network: []string{"HICCUP"}, Builtin: true}, hiccup); v.Class != phase.Network {
		t.Errorf("a user pattern: %s", v.Class)
	}
	if v := classify(t, "claude", UserPatterns{Network: []string{"hiccup"}, Builtin: true}, notLogged); v.Class != phase.Fatal {
		t.Errorf("user patterns extend the built-in ones: %s", v.Class)
	}
	if v := classify(t, "claude", UserPatterns{Network: []string{"hiccup"}}, notLogged); v.Class != phase.Ordinary {
		t.Errorf("without the built-in patterns: %s", v.Class)
	}
	if v := classify(t, "gemini", UserPatterns{}, res(41, "", "whatever\n")); v.Class != phase.Ordinary {
		t.Errorf("without the built-in patterns exit codes mean nothing: %s", v.Class)
	}
	if v := classify(t, "claude", UserPatterns{Fatal: []string{"quota gone"}}, res(1, "", "quota gone\n")); v.Class != phase.Fatal {
		t.Errorf("a user fatal pattern alone: %s", v.Class)
	}
}

func TestRefusalOnlyInShortOutput(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("A step of the plan.\n", 200) + "Handle the case where the user is not logged in.\n"
	if v := classify(t, "cursor", builtin, res(0, long, "")); v.Class != phase.Succeeded {
		t.Errorf("a long answer that mentions the words is no refusal: %s %v", v.Class, v.Err)
	}
	if v := classify(t, "cursor", builtin, res(0, "ok\n", "Error: not logged in\n")); v.Class != phase.Fatal {
		t.Errorf("stderr of an exit-0 call: %s", v.Class)
	}
	short := "1. Rate limit the API calls.\n2. Unauthorized requests get 401; invalid API keys are logged.\n"
	for _, kind := range Names() {
		if v := classify(t, kind, builtin, res(0, short, "")); v.Class != phase.Succeeded {
			t.Errorf("%s: a short answer about rate limits and keys is no refusal: %s %v", kind, v.Class, v.Err)
		}
	}
	// The kind's own messages, in a short answer but not where a refusal
	// stands (its first line), or as an item of a list, are the answer's.
	for _, answer := range []string{
		"Plan:\n2. Not logged in users get a 302 to /login.\n",
		"The redirect.\nNot logged in users get a 302 to /login.\nYou've hit your usage limit? No: the limiter counts per key.\n",
	} {
		if v := classify(t, "cursor", builtin, res(0, answer, "")); v.Class != phase.Succeeded {
			t.Errorf("an answer %q is no refusal: %s %v", answer, v.Class, v.Err)
		}
	}
	if v := classify(t, "cursor", builtin, res(0, "Not logged in\n", "")); v.Class != phase.Fatal {
		t.Errorf("a refusal as the whole output: %s", v.Class)
	}
	if v := classify(t, "cursor", UserPatterns{Fatal: []string{"quota gone"}}, res(0, "Quota gone for today\n", "")); v.Class != phase.Fatal {
		t.Errorf("a user fatal pattern at the start of a line refuses: %s", v.Class)
	}
	v := classify(t, "cursor", builtin, res(0, fakes.CursorTrustRequired, ""))
	if v.Class != phase.Fatal || !strings.Contains(v.Err.Error(), "exited 0 but did nothing: ⚠ Workspace Trust Required") || !strings.Contains(v.Err.Error(), "keep cursor_trust on") {
		t.Errorf("trust refusal: %v", v.Err)
	}
}

func TestAnswerFailureIsOrdinary(t *testing.T) {
	t.Parallel()
	k, _ := Lookup("cursor")
	failure := func(r phase.Result) error {
		if !strings.Contains(r.Stdout, "## Task") {
			return errors.New("no task heading")
		}
		return nil
	}
	v := k.Rules(builtin).Classifier(failure, nil, nil)(res(0, "I could not connect to the database, so: no tasks\n", ""))
	if v.Class != phase.Ordinary || v.Err.Error() != "no task heading" {
		t.Fatalf("%s %v", v.Class, v.Err)
	}
}

func TestResetWait(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	cases := map[string]time.Duration{
		"Claude AI usage limit reached|" + "1772362800":                      time.Hour,
		"You've hit your usage limit. Try again in 2 minutes":                2 * time.Minute,
		"Rate limit exceeded, please try again in 20 seconds":                20 * time.Second,
		"quota exhausted; retry after 1.5h":                                  90 * time.Minute,
		"usage limit reached; resets at 2026-03-01T10:05:00Z":                5 * time.Minute,
		"429 Too Many Requests":                                              0,
		"resets in 1 minute\nlater: try again in 30s":                        30 * time.Second,
		"usage limit reached; resets at 2026-03-01T09:00:00Z (already past)": 0,
	}
	for text, want := range cases {
		if got := ResetWait(text, now); got != want {
			t.Errorf("%q: %s, want %s", text, got, want)
		}
	}
	v := classify(t, "cursor", builtin, res(0, "You've hit your usage limit. Try again in 2 minutes.\n", ""))
	if v.Class != phase.RateLimited || v.Wait != 2*time.Minute {
		t.Fatalf("%s wait %s", v.Class, v.Wait)
	}
}

func TestExtraArgsBeforeThePrompt(t *testing.T) {
	t.Parallel()
	extra := []string{"-c", "openai_base_url=http://127.0.0.1:1/v1"}
	codex, _ := Lookup("codex")
	inv, _ := codex.Invocation("codex", Call{Phase: "plan", Repo: "/r", Prompt: "P", Extra: extra})
	if got := strings.Join(inv.Argv[len(inv.Argv)-3:], " "); got != "-c openai_base_url=http://127.0.0.1:1/v1 -" {
		t.Fatalf("codex argv %q", inv.Argv)
	}
	cursor, _ := Lookup("cursor")
	inv, _ = cursor.Invocation("agent", Call{Phase: "plan", Repo: "/r", Prompt: "P", Model: "m", Extra: []string{"--x"}})
	if got := strings.Join(inv.Argv[len(inv.Argv)-4:], " "); got != "--model m --x P" {
		t.Fatalf("cursor argv %q", inv.Argv)
	}
}

// TestQuoteShowsTheMatch: a long line whose failure message comes after a
// long path (gemini prints its error report's path first) is quoted from a
// little before the message, not cut before it.
func TestQuoteShowsTheMatch(t *testing.T) {
	t.Parallel()
	line := "Error when talking to Gemini API Full report available at: /" + strings.Repeat("deep/", 60) +
		`gemini-client-error.json _ApiError: {"error":{"code":401,"message":"invalid x-api-key","status":"UNAUTHENTICATED"}}`
	v := classify(t, "gemini", builtin, res(1, "", line+"\n  status: 401\n}\nAn unexpected critical error occurred:[object Object]\n"))
	if v.Class != phase.Fatal || !strings.Contains(v.Err.Error(), `…`) ||
		!strings.Contains(v.Err.Error(), `_ApiError: {"error":{"code":401,"message":"invalid x-api-key","status":"UNAUTHENTICATED"}}`) {
		t.Fatalf("%s: %v", v.Class, v.Err)
	}
	short := `_ApiError: {"error":{"code":401,"message":"invalid x-api-key","status":"UNAUTHENTICATED"}}`
	if v := classify(t, "gemini", builtin, res(1, "", short+"\n")); !strings.Contains(v.Err.Error(), "status 1: "+short+" (set GEMINI_API_KEY") {
		t.Fatalf("a short line is quoted whole: %v", v.Err)
	}
}

// TestModelNotFoundClassified: each CLI's words for a model its API does
// not know, as measured against an API answering 404, are fatal and told
// apart (*UnknownModelError), quoting the CLI; codex's warning about a model
// it has no metadata for is not such a failure.
func TestModelNotFoundClassified(t *testing.T) {
	t.Parallel()
	const warning = "warning: Model metadata for `m` not found. Defaulting to fallback metadata; this can degrade performance and cause issues.\n"
	cases := []struct {
		kind  string
		r     phase.Result
		quote string
	}{
		{"claude", res(1, "There's an issue with the selected model (m). It may not exist or you may not have access to it. Run --model to pick a different model.\n", ""),
			"There's an issue with the selected model (m)."},
		{"codex", res(1, "", warning+"ERROR: model: m was not found\nERROR: model: m was not found\n"), "ERROR: model: m was not found"},
		// OpenAI's own message for model_not_found.
		{"codex", res(1, "", warning+"ERROR: The model `m` does not exist or you do not have access to it.\n"), "ERROR: The model `m` does not exist"},
		{"gemini", res(1, "", "Error when talking to Gemini API Full report available at: /tmp/gemini-client-error-Turn.run-sendMessageStream-2026-11-26T05-26-49-237Z.json ModelNotFoundError: model: m was not found\n"+
			"    at classifyGoogleError (file:///x/chunk.js:307292:12)\n  code: 404\n}\nAn unexpected critical error occurred:[object Object]\n"), "…ModelNotFoundError: model: m was not found"},
		{"opencode", res(1, "", "\x1b[0m\n> plan · m\n\x1b[0m\n\x1b[91m\x1b[1mError: \x1b[0mmodel: m was not found\n"), "Error: model: m was not found"},
		{"opencode", res(1, "", "\x1b[91m\x1b[1mError: \x1b[0mThe model does not exist or you do not have access to it.\n"), "Error: The model does not exist"},
	}
	for _, tc := range cases {
		v := classify(t, tc.kind, builtin, tc.r)
		var unknown *UnknownModelError
		if v.Class != phase.Fatal || !errors.As(v.Err, &unknown) || !strings.HasPrefix(unknown.Said, tc.quote) || unknown.Kind != tc.kind {
			t.Errorf("%s: %s %v, want fatal, told apart, quoting %q", tc.kind, v.Class, v.Err, tc.quote)
		}
		if strings.Contains(v.Err.Error(), "code: 404") || strings.Contains(v.Err.Error(), "warning:") {
			t.Errorf("%s: quotes the wrong line: %v", tc.kind, v.Err)
		}
	}
	// A model without metadata is no failure, and says nothing of one.
	if v := classify(t, "codex", builtin, res(0, "the plan\n", warning)); v.Class != phase.Succeeded {
		t.Errorf("exit 0 with the warning: %s %v", v.Class, v.Err)
	}
	v := classify(t, "codex", builtin, res(1, "", warning+"ERROR: compile error\n"))
	var unknown *UnknownModelError
	if v.Class != phase.Ordinary || errors.As(v.Err, &unknown) {
		t.Errorf("exit 1 with the warning: %s %v", v.Class, v.Err)
	}
}
