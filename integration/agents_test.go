package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"peal/internal/gitrepo"
	"peal/internal/testkit/mockllm"
)

// testKey is the only credential the tests use: a fake key that the mock
// checks.
const testKey = "sk-test-mock"

// pealMock is the mock of a peal run whose agent calls are confined (the
// default): it takes the key only from peal's model endpoint, which holds
// it while the CLI holds a placeholder.
func pealMock(script mockllm.Script) *mockllm.Server {
	return mockllm.New(script, mockllm.WithKey(testKey), mockllm.ThroughPeal())
}

// agent is how the tests drive one CLI.
type agent struct {
	// kind is peal's agent_kind and the CLI's binary name.
	kind string
	// setup writes the CLI's configuration for a mock API at url into home
	// and returns the environment that points the CLI at it. key is the API
	// key to configure, "" for none. capRetries turns the CLI's own retries
	// off, so a failure comes back at once; tests through peal leave them
	// as they are, since capping them is peal's job.
	setup func(t *testing.T, home, url, key string, capRetries bool) []string
	// protocol is the model API the CLI speaks.
	protocol mockllm.Protocol
	// plan and execute are the argv after the binary of a read-only and a
	// writing call, the prompt being on stdin.
	plan, execute []string
	// stateFiles are the files (a glob under HOME) where the CLI keeps a
	// call's session: a confined call must still write them.
	stateFiles string
	// baseInConfig: the CLI reads its base URL from the configuration
	// setup writes, not from a variable peal knows.
	baseInConfig bool
}

var agents = []agent{
	{
		kind:     "claude",
		protocol: mockllm.Anthropic,
		setup: func(t *testing.T, home, url, key string, capRetries bool) []string {
			env := []string{
				"ANTHROPIC_BASE_URL=" + url,
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
				"DISABLE_AUTOUPDATER=1",
			}
			if key != "" {
				env = append(env, "ANTHROPIC_API_KEY="+key)
			}
			if capRetries {
				env = append(env, "CLAUDE_CODE_MAX_RETRIES=0")
			}
			if os.Geteuid() == 0 {
				// Claude Code refuses to bypass permissions as root unless it
				// is told that it runs in a sandbox, which a test is.
				env = append(env, "IS_SANDBOX=1")
			}
			return env
		},
		plan:       []string{"-p", "--permission-mode", "plan", "--output-format", "text"},
		execute:    []string{"-p", "--permission-mode", "acceptEdits"},
		stateFiles: ".claude/projects/*/*.jsonl",
	},
	{
		kind:     "codex",
		protocol: mockllm.Responses,
		setup: func(t *testing.T, home, url, key string, capRetries bool) []string {
			// A provider of our own: it speaks the Responses API over plain
			// HTTP (the built-in one tries WebSockets first), and a model
			// name Codex does not know gives the classic tool set
			// (exec_command) instead of its JavaScript code mode.
			retries := ""
			if capRetries {
				retries = "request_max_retries = 0\nstream_max_retries = 0\n"
			}
			cfg := fmt.Sprintf("model = \"mock-model\"\nmodel_provider = \"mock\"\n\n"+
				"[model_providers.mock]\nname = \"mock\"\nbase_url = %q\nenv_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n%s",
				url+"/v1", retries)
			writeFile(t, filepath.Join(home, ".codex", "config.toml"), cfg)
			if key == "" {
				return nil
			}
			return []string{"OPENAI_API_KEY=" + key}
		},
		plan:         []string{"exec", "-s", "read-only", "-"},
		execute:      []string{"exec", "-s", "workspace-write", "-"},
		stateFiles:   ".codex/sessions/*/*/*/rollout-*.jsonl",
		baseInConfig: true,
	},
	{
		kind:     "gemini",
		protocol: mockllm.Gemini,
		setup: func(t *testing.T, home, url, key string, capRetries bool) []string {
			if key == "" {
				// No settings and no key: the CLI stops before any request.
				return nil
			}
			settings := `{"security":{"auth":{"selectedType":"gemini-api-key"}}`
			if capRetries {
				settings += `,"general":{"maxAttempts":1}`
			}
			writeFile(t, filepath.Join(home, ".gemini", "settings.json"), settings+"}\n")
			return []string{"GEMINI_API_KEY=" + key, "GOOGLE_GEMINI_BASE_URL=" + url}
		},
		// An explicit model skips the CLI's model router, whose side
		// requests retry on their own budget whatever maxAttempts says.
		plan:       []string{"--skip-trust", "--approval-mode", "plan", "-m", "gemini-2.5-flash", "-p", ""},
		execute:    []string{"--skip-trust", "--approval-mode", "yolo", "-m", "gemini-2.5-flash", "-p", ""},
		stateFiles: ".gemini/tmp/*/chats/session-*.jsonl",
	},
	opencodeOn(mockllm.Chat),
}

// opencodeOn is opencode with a provider of its own that speaks protocol
// (an OpenAI-compatible one for Chat, Anthropic's or Google's SDK for
// theirs), so that it relays that provider's words.
func opencodeOn(protocol mockllm.Protocol) agent {
	sdk := map[mockllm.Protocol][2]string{
		mockllm.Chat:      {"@ai-sdk/openai-compatible", "/v1"},
		mockllm.Anthropic: {"@ai-sdk/anthropic", "/v1"},
		mockllm.Gemini:    {"@ai-sdk/google", "/v1beta"},
	}[protocol]
	return agent{
		kind:     "opencode",
		protocol: protocol,
		setup: func(t *testing.T, home, url, key string, capRetries bool) []string {
			// The key in a variable its configuration names, as a user
			// keeps it out of the file: peal's model endpoint can then hold
			// it.
			keyVar := map[mockllm.Protocol]string{mockllm.Chat: "OPENAI_API_KEY", mockllm.Anthropic: "ANTHROPIC_API_KEY", mockllm.Gemini: "GEMINI_API_KEY"}[protocol]
			auth := ""
			if key != "" {
				auth = `,"apiKey":"{env:` + keyVar + `}"`
			}
			cfg := fmt.Sprintf(`{"$schema":"https://opencode.ai/config.json","autoupdate":false,"share":"disabled",`+
				`"provider":{"mock":{"npm":%q,"name":"Mock",`+
				`"options":{"baseURL":%q%s},"models":{"mock-model":{"name":"Mock model"},"mock-missing-model":{"name":"A model the API does not know"}}}},`+
				`"model":"mock/mock-model","small_model":"mock/mock-model"}`, sdk[0], url+sdk[1], auth)
			path := filepath.Join(home, ".config", "opencode", "opencode.json")
			writeFile(t, path, cfg)
			env := []string{
				"OPENCODE_CONFIG=" + path,
				"OPENCODE_DISABLE_AUTOUPDATE=1",
				"OPENCODE_DISABLE_MODELS_FETCH=1",
				"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
			}
			if key != "" {
				env = append(env, keyVar+"="+key)
			}
			return env
		},
		plan:         []string{"run", "--agent", "plan"},
		execute:      []string{"run"},
		stateFiles:   ".local/share/opencode/opencode.db*",
		baseInConfig: true,
	}
}

// pealEnv is the environment of a peal run through a: the sandbox's, and
// a's configuration for the mock model at url with key (configEnv).
func (a agent) pealEnv(t *testing.T, sb *sandbox, url, key string) []string {
	t.Helper()
	return append(append([]string(nil), sb.base...), a.configEnv(t, sb.home, url, key)...)
}

// configEnv writes a's configuration for the mock model at url with key
// into home (see setup) and returns the variables a peal run through a
// needs: a CLI that reads its base URL from its own configuration, which
// peal does not read, needs that host on confine_network_allow, as its user
// would set it.
func (a agent) configEnv(t *testing.T, home, url, key string) []string {
	t.Helper()
	env := a.setup(t, home, url, key, false)
	if a.baseInConfig {
		u, err := neturl.Parse(url)
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, "PEAL_CONFINE_NETWORK_ALLOW="+u.Host)
	}
	return env
}

// taskFolder finds, in the body of a request a CLI sent, the worktree of
// the state folder state the CLI works in (its prompt names its working
// folder, as every CLI's does): the run's worktree where files are
// confined, or a parallel task's; "" when the body names none.
func taskFolder(state string) func(body []byte) string {
	re := regexp.MustCompile(regexp.QuoteMeta(filepath.Join(state, "worktrees")+string(filepath.Separator)) + `[\w.-]+`)
	return func(body []byte) string { return string(re.Find(body)) }
}

// eachAgent runs fn as a parallel subtest per CLI, named by its kind, so
// that one CLI's case can be run alone (-run TestX/claude).
func eachAgent(t *testing.T, fn func(t *testing.T, a agent)) {
	for _, a := range agents {
		t.Run(a.kind, func(t *testing.T) {
			t.Parallel()
			fn(t, a)
		})
	}
}

// findCLI returns the path of a CLI, from PEAL_AGENT_BIN_DIR or PATH, or
// skips the test.
func findCLI(t *testing.T, name string) string {
	t.Helper()
	if dir := os.Getenv("PEAL_AGENT_BIN_DIR"); dir != "" {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
		t.Skipf("%s is not installed in PEAL_AGENT_BIN_DIR (%s)", name, dir)
	}
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed (not on PATH; set PEAL_AGENT_BIN_DIR to the folder of the agent CLIs)", name)
	}
	return p
}

// sandbox is one test's private world: HOME, TMPDIR and a git repository
// with one commit.
type sandbox struct {
	home, tmp, repo string
	// base is the environment every process of the test starts from: no
	// variable of the developer's own (no credentials), only PATH, HOME,
	// TMPDIR and a locale.
	base []string
}

func newSandbox(t *testing.T, binDir string) *sandbox {
	t.Helper()
	root := t.TempDir()
	s := &sandbox{home: filepath.Join(root, "home"), tmp: filepath.Join(root, "tmp"), repo: filepath.Join(root, "repo")}
	for _, d := range []string{s.home, s.tmp, s.repo} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The CLI's own folder first: codex and gemini are node scripts, so
	// node must stay reachable through the rest of PATH.
	s.base = []string{
		"PATH=" + binDir + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + s.home,
		"TMPDIR=" + s.tmp,
		"LANG=C.UTF-8",
		"NO_COLOR=1",
	}
	writeFile(t, filepath.Join(s.repo, "README.md"), "test repository\n")
	git := func(args ...string) {
		if _, err := gitrepo.Plain(s.repo, s.base...).Command(args...).Run(context.Background()); err != nil {
			t.Fatalf("%v", err)
		}
	}
	git("init", "-q")
	git("-c", "user.email=t@example.invalid", "-c", "user.name=t", "add", ".")
	git("-c", "user.email=t@example.invalid", "-c", "user.name=t", "commit", "-qm", "init")
	return s
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// result is what a finished process left.
type result struct {
	code           int
	stdout, stderr string
	elapsed        time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("exit %d after %s\nstdout:\n%s\nstderr:\n%s", r.code, r.elapsed.Round(time.Millisecond), tail(r.stdout), tail(r.stderr))
}

// tail keeps the end of a long output for a failure message.
func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

// run runs argv in dir with env, stdin from the given text (nil: /dev/null),
// and kills the process group when limit passes.
func run(t *testing.T, dir string, env []string, stdin *string, limit time.Duration, argv ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	if stdin != nil {
		cmd.Stdin = strings.NewReader(*stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	setGroup(cmd)
	// A helper left holding the pipes must not hold the test.
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), elapsed: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s did not finish within %s\n%s", filepath.Base(argv[0]), limit, r)
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%s: %v", argv[0], err)
	}
	return r
}

// modelRequests are the requests that reached a model endpoint.
func modelRequests(s *mockllm.Server) []mockllm.Request {
	var out []mockllm.Request
	for _, r := range s.Requests() {
		if r.Protocol != mockllm.Unknown {
			out = append(out, r)
		}
	}
	return out
}

// describe lists a mock's requests for a failure message.
func describe(s *mockllm.Server) string {
	var b strings.Builder
	for _, r := range s.Requests() {
		call := ""
		if r.Call != nil {
			call = " call " + r.Call.Name
		}
		fmt.Fprintf(&b, "  %s %s model=%s tools=%d results=%d -> %d%s\n", r.Protocol, r.Path, r.Model, len(r.Tools), r.ToolResults, r.Status, call)
		if r.LastToolResult != "" {
			fmt.Fprintf(&b, "    last tool result: %.200q\n", r.LastToolResult)
		}
	}
	return b.String()
}
