package agent

import (
	"encoding/json"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"testing"

	"peal/confine"
)

// testMachine is a machine of env and files (by full path), home /h.
func testMachine(env map[string]string, files map[string]string) Machine {
	return Machine{Home: "/h", Getenv: func(k string) string { return env[k] },
		ReadFile: func(p string) ([]byte, error) {
			if f, ok := files[p]; ok {
				return []byte(f), nil
			}
			return nil, fs.ErrNotExist
		}}
}

// chose is m where confine_network_allow names the hosts named (host:port)
// and confine_env_pass passes the variables passed.
func chose(m Machine, named, passed []string) Machine {
	m.Named = func(hp string) bool { return slices.Contains(named, hp) }
	m.Passed = func(v string) bool { return slices.Contains(passed, v) }
	return m
}

// heldOf is what a hold holds, said shortly: per API, its upstream and
// its keys' variables.
func heldOf(h Hold) []string {
	var out []string
	for _, a := range h.APIs {
		out = append(out, a.Name+" "+a.Upstream.String()+" "+a.BasePath+" "+strings.Join(slices.Sorted(maps.Keys(a.Keys)), ","))
	}
	return out
}

// TestKeyHolds: what each kind's hold takes, from peal's environment and
// the user's own configuration of its CLI, per login: the key variables
// and the upstream (the user's base URL, or the API's own); a login it
// cannot hold, with why.
func TestKeyHolds(t *testing.T) {
	t.Parallel()
	codexCfg := "/h/.codex/config.toml"
	ocCfg := "/h/.config/opencode/opencode.json"
	cases := []struct {
		name, kind string
		env        map[string]string
		files      map[string]string
		held       []string // heldOf; nil: nothing held
		why        string   // in Why, when nothing is held
	}{
		{"claude's API key", "claude", map[string]string{"ANTHROPIC_API_KEY": "k"}, nil,
			[]string{"anthropic https://api.anthropic.com  ANTHROPIC_API_KEY"}, ""},
		{"claude's key and token, its base URL", "claude", map[string]string{"ANTHROPIC_API_KEY": "k", "ANTHROPIC_AUTH_TOKEN": "t", "ANTHROPIC_BASE_URL": "https://gw.example/anthropic"}, nil,
			[]string{"anthropic https://gw.example/anthropic  ANTHROPIC_API_KEY,ANTHROPIC_AUTH_TOKEN"}, ""},
		{"claude's subscription token", "claude", map[string]string{"ANTHROPIC_API_KEY": "k", "CLAUDE_CODE_OAUTH_TOKEN": "o"}, nil, nil, "CLAUDE_CODE_OAUTH_TOKEN is set"},
		{"claude on Bedrock", "claude", map[string]string{"ANTHROPIC_API_KEY": "k", "CLAUDE_CODE_USE_BEDROCK": "1"}, nil, nil, "CLAUDE_CODE_USE_BEDROCK is set"},
		{"claude switched off Bedrock", "claude", map[string]string{"ANTHROPIC_API_KEY": "k", "CLAUDE_CODE_USE_BEDROCK": "0"}, nil,
			[]string{"anthropic https://api.anthropic.com  ANTHROPIC_API_KEY"}, ""},
		{"claude logged in", "claude", nil, nil, nil, "none of ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN is set"},
		{"claude to a plain remote URL", "claude", map[string]string{"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "http://gw.example"}, nil, nil, "over TLS only"},
		{"claude to a local model", "claude", map[string]string{"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "http://127.0.0.1:8080"}, nil,
			[]string{"anthropic http://127.0.0.1:8080  ANTHROPIC_API_KEY"}, ""},
		{"gemini's key", "gemini", map[string]string{"GEMINI_API_KEY": "k"}, nil,
			[]string{"google https://generativelanguage.googleapis.com  GEMINI_API_KEY"}, ""},
		{"gemini's settings choose a key", "gemini", map[string]string{"GEMINI_API_KEY": "k", "GOOGLE_GEMINI_BASE_URL": "http://localhost:9"},
			map[string]string{"/h/.gemini/settings.json": `{"security":{"auth":{"selectedType":"gemini-api-key"}}}`},
			[]string{"google http://localhost:9  GEMINI_API_KEY"}, ""},
		{"gemini's settings choose Google's login", "gemini", map[string]string{"GEMINI_API_KEY": "k"},
			map[string]string{"/h/.gemini/settings.json": `{"security":{"auth":{"selectedType":"oauth-personal"}}}`}, nil, "oauth-personal"},
		{"gemini on Vertex", "gemini", map[string]string{"GEMINI_API_KEY": "k", "GOOGLE_GENAI_USE_VERTEXAI": "true"}, nil, nil, "GOOGLE_GENAI_USE_VERTEXAI"},
		{"codex's key", "codex", map[string]string{"CODEX_API_KEY": "k", "OPENAI_API_KEY": "o"}, nil,
			[]string{"openai https://api.openai.com/v1 /v1 CODEX_API_KEY,OPENAI_API_KEY"}, ""},
		{"codex's key and base URL", "codex", map[string]string{"CODEX_API_KEY": "k"}, map[string]string{codexCfg: `openai_base_url = "https://gw.example/openai/v1"`},
			[]string{"openai https://gw.example/openai/v1 /v1 CODEX_API_KEY"}, ""},
		{"codex with OPENAI_API_KEY only", "codex", map[string]string{"OPENAI_API_KEY": "o"}, nil, nil, "CODEX_API_KEY is not set"},
		{"codex's provider", "codex", map[string]string{"OPENAI_API_KEY": "k"},
			map[string]string{codexCfg: "model_provider = \"mock\"\n[model_providers.mock]\nbase_url = \"http://127.0.0.1:7/v1\"\nenv_key = \"OPENAI_API_KEY\"\n"},
			[]string{"openai http://127.0.0.1:7/v1 /v1 OPENAI_API_KEY"}, ""},
		{"codex's provider without its key", "codex", nil,
			map[string]string{codexCfg: "model_provider = \"mock\"\n[model_providers.mock]\nbase_url = \"http://127.0.0.1:7/v1\"\nenv_key = \"CODEX_API_KEY\"\n"}, nil, "CODEX_API_KEY, the env_key of its provider mock, is not set"},
		{"codex on a local model", "codex", map[string]string{"CODEX_API_KEY": "k"}, map[string]string{codexCfg: `model_provider = "oss"`}, nil, "a local model"},
		{"codex's configuration unreadable", "codex", map[string]string{"CODEX_API_KEY": "k"}, map[string]string{codexCfg: `model_provider = `}, nil, "peal cannot read"},
		{"opencode's built-in providers", "opencode", map[string]string{"ANTHROPIC_API_KEY": "a", "GEMINI_API_KEY": "g", "OPENAI_BASE_URL": "https://gw.example/v1", "OPENAI_API_KEY": "o"}, nil,
			[]string{"anthropic https://api.anthropic.com/v1 /v1 ANTHROPIC_API_KEY", "openai https://gw.example/v1 /v1 OPENAI_API_KEY",
				"google https://generativelanguage.googleapis.com/v1beta /v1beta GEMINI_API_KEY"}, ""},
		{"opencode's providers of its configuration", "opencode", map[string]string{"MOCK_KEY": "m", "OPENROUTER_API_KEY": "r"},
			map[string]string{ocCfg: `{
				// a comment, as opencode allows
				"provider": {
					"mock": {"npm": "@ai-sdk/openai-compatible", "options": {"baseURL": "http://127.0.0.1:7/v1", "apiKey": "{env:MOCK_KEY}"}},
					"written": {"npm": "@ai-sdk/openai-compatible", "options": {"baseURL": "https://x.example/v1", "apiKey": "sk-in-the-file"}},
					"anthropic": {"options": {"apiKey": "sk-ant-in-the-file"}}
				}}`},
			[]string{"mock http://127.0.0.1:7/v1 /v1 MOCK_KEY", "openrouter https://openrouter.ai/api/v1 /v1 OPENROUTER_API_KEY"}, ""},
		{"opencode's keys all written", "opencode", nil, map[string]string{ocCfg: `{"provider":{"x":{"npm":"@ai-sdk/anthropic","options":{"apiKey":"k"}}}}`}, nil, "no provider's key"},
		{"cursor", "cursor", map[string]string{"CURSOR_API_KEY": "k"}, nil, nil, ""},
	}
	for _, c := range cases {
		k, _ := Lookup(c.kind)
		if k.Confine.Keys.Hold == nil {
			if c.held != nil {
				t.Errorf("%s: the kind holds nothing", c.name)
			}
			continue
		}
		// The user named the hosts of the base URLs of the CLIs' files on
		// confine_network_allow, and passes MOCK_KEY (confine_env_pass).
		h := k.Confine.Keys.Hold(chose(testMachine(c.env, c.files), []string{"127.0.0.1:7", "gw.example:443"}, []string{"MOCK_KEY"}))
		got := heldOf(h)
		if !slices.Equal(got, c.held) {
			t.Errorf("%s: held %q (why %q), want %q", c.name, got, h.Why, c.held)
			continue
		}
		if c.held == nil && (h.Why == "" || !strings.Contains(h.Why, c.why)) {
			t.Errorf("%s: why %q, want it to say %q", c.name, h.Why, c.why)
		}
		if c.held != nil && h.Point == nil {
			t.Errorf("%s: held, but no way to point the call at the endpoint", c.name)
		}
	}
}

// TestKeyHoldsOfAWrittenConfiguration: a CLI's configuration file that a
// call may have written (Codex's folder is its calls'; OPENCODE_CONFIG
// may name a file of the tree) decides neither where a key goes nor which
// variable is one. A base URL it names on a host that is neither the
// API's own nor named on confine_network_allow (by name: a wildcard does
// not do) gets nothing held and the login withheld, with the host to name
// in why; a key variable it names that is neither the kind's nor passed
// by confine_env_pass is never even read from peal's environment. What
// the user chose (confine_network_allow, confine_env_pass, a base URL in
// peal's environment) holds.
func TestKeyHoldsOfAWrittenConfiguration(t *testing.T) {
	t.Parallel()
	codexCfg := "/h/.codex/config.toml"
	ocCfg := "/h/.config/opencode/opencode.json"
	provider := func(url, envKey string) map[string]string {
		return map[string]string{codexCfg: "model_provider = \"atk\"\n[model_providers.atk]\nbase_url = \"" + url + "\"\nenv_key = \"" + envKey + "\"\n"}
	}
	keys := map[string]string{"CODEX_API_KEY": "sk-codex", "OPENAI_API_KEY": "sk-openai", "GITHUB_TOKEN": "ghp-x", "ANTHROPIC_API_KEY": "sk-ant"}
	cases := []struct {
		name, kind    string
		files         map[string]string
		env           map[string]string // over keys
		named, passed []string
		held          []string // heldOf
		withheld      bool
		why           string
		reach         []string
	}{
		{name: "codex's openai_base_url elsewhere", kind: "codex", files: map[string]string{codexCfg: `openai_base_url = "http://127.0.0.1:9999/v1"`},
			withheld: true, why: "its base URL names 127.0.0.1:9999 (openai_base_url in /h/.codex/config.toml), which is neither the openai API's own host nor named on confine_network_allow"},
		{name: "codex's openai_base_url on a wildcard's host", kind: "codex", files: map[string]string{codexCfg: `openai_base_url = "https://evil.example.com/v1"`},
			named: []string{"*.example.com"}, withheld: true, why: "name evil.example.com:443 on confine_network_allow"},
		{name: "codex's openai_base_url on the API's own host", kind: "codex", files: map[string]string{codexCfg: `openai_base_url = "https://api.openai.com/v1"`},
			held: []string{"openai https://api.openai.com/v1 /v1 CODEX_API_KEY,OPENAI_API_KEY"}},
		{name: "codex's openai_base_url on the API's host, plain", kind: "codex", files: map[string]string{codexCfg: `openai_base_url = "http://api.openai.com/v1"`},
			withheld: true, why: "api.openai.com:80"},
		{name: "codex's openai_base_url named by the user", kind: "codex", files: map[string]string{codexCfg: `openai_base_url = "http://127.0.0.1:9999/v1"`},
			named: []string{"127.0.0.1:9999"}, held: []string{"openai http://127.0.0.1:9999/v1 /v1 CODEX_API_KEY,OPENAI_API_KEY"}},
		{name: "codex's provider elsewhere", kind: "codex", files: provider("http://127.0.0.1:9999/v1", "OPENAI_API_KEY"),
			withheld: true, why: "the base_url of its provider atk in /h/.codex/config.toml"},
		{name: "codex's provider naming GITHUB_TOKEN", kind: "codex", files: provider("http://127.0.0.1:9999/v1", "GITHUB_TOKEN"), named: []string{"127.0.0.1:9999"},
			withheld: true, why: "GITHUB_TOKEN, the env_key of its provider atk in /h/.codex/config.toml, is neither one of CODEX_API_KEY, OPENAI_API_KEY nor passed by confine_env_pass"},
		{name: "codex's provider naming a variable the user passes", kind: "codex", files: provider("http://127.0.0.1:9999/v1", "GITHUB_TOKEN"),
			named: []string{"127.0.0.1:9999"}, passed: []string{"GITHUB_TOKEN"}, held: []string{"openai http://127.0.0.1:9999/v1 /v1 GITHUB_TOKEN"}},
		{name: "codex with OPENAI_API_KEY alone", kind: "codex", env: map[string]string{"CODEX_API_KEY": ""}, why: "CODEX_API_KEY is not set"},
		{name: "opencode's provider elsewhere", kind: "opencode", env: map[string]string{"ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": ""},
			files:  map[string]string{ocCfg: `{"provider":{"atk":{"npm":"@ai-sdk/openai-compatible","options":{"baseURL":"http://127.0.0.1:9999/v1","apiKey":"{env:CODEX_API_KEY}"}}}}`},
			passed: []string{"CODEX_API_KEY"}, withheld: true, why: "provider atk: its base URL names 127.0.0.1:9999 (the baseURL of its provider atk in " + ocCfg + ")"},
		{name: "opencode's built-in provider moved elsewhere", kind: "opencode", env: map[string]string{"OPENAI_API_KEY": ""},
			files:    map[string]string{ocCfg: `{"provider":{"anthropic":{"options":{"baseURL":"http://127.0.0.1:9999/v1"}}}}`},
			withheld: true, why: "provider anthropic: its base URL names 127.0.0.1:9999"},
		{name: "opencode's provider naming GITHUB_TOKEN", kind: "opencode", env: map[string]string{"ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": ""},
			files: map[string]string{ocCfg: `{"provider":{"atk":{"npm":"@ai-sdk/openai-compatible","options":{"baseURL":"http://127.0.0.1:9999/v1","apiKey":"{env:GITHUB_TOKEN}"}}}}`},
			named: []string{"127.0.0.1:9999"}, withheld: true, why: "provider atk: its apiKey names GITHUB_TOKEN, neither a key variable of opencode's built-in providers nor passed by confine_env_pass"},
		{name: "opencode's provider moved in peal's environment", kind: "opencode", env: map[string]string{"OPENAI_API_KEY": "",
			"OPENCODE_CONFIG_CONTENT": `{"provider":{"anthropic":{"options":{"baseURL":"http://127.0.0.1:8888/v1"}}}}`},
			files: map[string]string{ocCfg: `{"provider":{"anthropic":{"options":{"baseURL":"http://127.0.0.1:9999/v1"}}}}`},
			held:  []string{"anthropic http://127.0.0.1:8888/v1 /v1 ANTHROPIC_API_KEY"}},
		{name: "opencode's openrouter on its own host", kind: "opencode", env: map[string]string{"ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": "", "OPENROUTER_API_KEY": "r"},
			files: map[string]string{ocCfg: `{"provider":{"openrouter":{"options":{"baseURL":"https://openrouter.ai/api/v1"}}}}`},
			held:  []string{"openrouter https://openrouter.ai/api/v1 /v1 OPENROUTER_API_KEY"}},
		{name: "claude's base URL in peal's environment", kind: "claude", env: map[string]string{"ANTHROPIC_BASE_URL": "http://127.0.0.1:9999"},
			held: []string{"anthropic http://127.0.0.1:9999  ANTHROPIC_API_KEY"}},
		{name: "claude's base URL, plain and remote", kind: "claude", env: map[string]string{"ANTHROPIC_BASE_URL": "http://gw.example"},
			withheld: true, why: "set confine_key_proxy = off to hand the key to the calls"},
		{name: "claude's subscription token", kind: "claude", env: map[string]string{"CLAUDE_CODE_OAUTH_TOKEN": "o"}, why: "CLAUDE_CODE_OAUTH_TOKEN is set",
			reach: []string{"CLAUDE_CODE_OAUTH_TOKEN"}},
		{name: "gemini on Vertex", kind: "gemini", env: map[string]string{"GEMINI_API_KEY": "g", "GOOGLE_GENAI_USE_VERTEXAI": "1"}, why: "GOOGLE_GENAI_USE_VERTEXAI is set",
			reach: []string{"GOOGLE_API_KEY"}},
	}
	for _, c := range cases {
		env := maps.Clone(keys)
		maps.Copy(env, c.env)
		var read []string
		m := chose(testMachine(env, c.files), c.named, c.passed)
		getenv := m.Getenv
		m.Getenv = func(k string) string { read = append(read, k); return getenv(k) }
		if c.named != nil {
			allow, err := confine.ParseAllow("confine_network_allow", c.named...)
			if err != nil {
				t.Fatal(err)
			}
			m.Named = allow.Names
		}
		k, _ := Lookup(c.kind)
		h := k.Confine.Keys.Hold(m)
		if got := heldOf(h); !slices.Equal(got, c.held) {
			t.Errorf("%s: held %q (why %q), want %q", c.name, got, h.Why, c.held)
			continue
		}
		if h.Withheld != c.withheld || !strings.Contains(h.Why, c.why) || !slices.Equal(h.Reach, c.reach) {
			t.Errorf("%s: withheld %v, reach %q, why %q; want %v, %q, %q", c.name, h.Withheld, h.Reach, h.Why, c.withheld, c.reach, c.why)
		}
		if !slices.Contains(c.passed, "GITHUB_TOKEN") && slices.Contains(read, "GITHUB_TOKEN") {
			t.Errorf("%s: GITHUB_TOKEN, which nothing the user chose makes a key, was read from peal's environment", c.name)
		}
	}
}

// TestKeyVarsDeclared: every kind declares the variables of its keys, and
// each is one its calls read (Confine.Env): what the policy keeps from a
// call is what the call would otherwise have got.
func TestKeyVarsDeclared(t *testing.T) {
	t.Parallel()
	for _, name := range Names() {
		k, _ := Lookup(name)
		if len(k.Confine.Keys.Vars) == 0 {
			t.Errorf("%s declares no key variables", name)
		}
		for _, v := range k.Confine.Keys.Vars {
			if !slices.ContainsFunc(k.Confine.Env, func(p string) bool {
				prefix, wild := strings.CutSuffix(p, "*")
				return p == v || wild && strings.HasPrefix(v, prefix)
			}) {
				t.Errorf("%s: key variable %s is not one its calls read (Confine.Env)", name, v)
			}
		}
	}
}

// TestKeyPoints: how each kind's call is pointed at its endpoint: the
// variable, argument or configuration that names it, with the
// placeholders and never a key.
func TestKeyPoints(t *testing.T) {
	t.Parallel()
	base := func(h Hold) map[string]string {
		out := map[string]string{}
		for _, a := range h.APIs {
			out[a.Name] = "http://127.0.0.1:1/" + a.Name
		}
		return out
	}
	ph := map[string]string{"ANTHROPIC_API_KEY": "PH-A", "OPENAI_API_KEY": "PH-O", "MOCK_KEY": "PH-M", "CODEX_API_KEY": "PH-C", "GEMINI_API_KEY": "PH-G"}
	for _, c := range []struct {
		kind       string
		env, files map[string]string
		passed     []string
		wantEnv    []string
		wantArgs   []string
	}{
		{kind: "claude", env: map[string]string{"ANTHROPIC_API_KEY": "k"}, wantEnv: []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:1/anthropic"}},
		{kind: "gemini", env: map[string]string{"GEMINI_API_KEY": "k"}, wantEnv: []string{"GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:1/google"}},
		{kind: "codex", env: map[string]string{"CODEX_API_KEY": "k"}, wantArgs: []string{"-c", `openai_base_url="http://127.0.0.1:1/openai"`}},
		{kind: "codex", env: map[string]string{"MOCK_KEY": "k"}, passed: []string{"MOCK_KEY"},
			files:    map[string]string{"/h/.codex/config.toml": "model_provider = \"my mock\"\n[model_providers.\"my mock\"]\nbase_url = \"http://127.0.0.1:7/v1\"\nenv_key = \"MOCK_KEY\"\n"},
			wantArgs: []string{"-c", `model_providers."my mock".base_url="http://127.0.0.1:1/openai"`}},
	} {
		k, _ := Lookup(c.kind)
		h := k.Confine.Keys.Hold(chose(testMachine(c.env, c.files), []string{"127.0.0.1:7"}, c.passed))
		env, args := h.Point(base(h), ph)
		if !slices.Equal(env, c.wantEnv) || !slices.Equal(args, c.wantArgs) {
			t.Errorf("%s: env %q args %q, want %q %q (%s)", c.kind, env, args, c.wantEnv, c.wantArgs, h.Why)
		}
	}
	// opencode: its providers in OPENCODE_CONFIG_CONTENT, merged with the
	// user's own.
	k, _ := Lookup("opencode")
	h := k.Confine.Keys.Hold(chose(testMachine(map[string]string{"ANTHROPIC_API_KEY": "a", "MOCK_KEY": "m",
		"OPENCODE_CONFIG_CONTENT": `{"share":"disabled","provider":{"mock":{"options":{"timeout":5}}}}`},
		map[string]string{"/h/.config/opencode/opencode.json": `{"provider":{"mock":{"npm":"@ai-sdk/openai-compatible","options":{"baseURL":"http://127.0.0.1:7/v1","apiKey":"{env:MOCK_KEY}"}}}}`}),
		[]string{"127.0.0.1:7"}, []string{"MOCK_KEY"}))
	env, args := h.Point(base(h), ph)
	if len(env) != 1 || args != nil || !strings.HasPrefix(env[0], "OPENCODE_CONFIG_CONTENT=") {
		t.Fatalf("opencode: env %q args %q", env, args)
	}
	var cfg map[string]any
	if err := json.Unmarshal([]byte(strings.TrimPrefix(env[0], "OPENCODE_CONFIG_CONTENT=")), &cfg); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"share": "disabled", "provider": map[string]any{
		"mock":      map[string]any{"options": map[string]any{"timeout": 5.0, "baseURL": "http://127.0.0.1:1/mock", "apiKey": "PH-M"}},
		"anthropic": map[string]any{"options": map[string]any{"baseURL": "http://127.0.0.1:1/anthropic", "apiKey": "PH-A"}},
	}}
	if got, _ := json.Marshal(cfg); string(got) != mustJSON(want) {
		t.Errorf("opencode's configuration:\n%s\nwant\n%s", got, mustJSON(want))
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestAPIs: each API's routes are routes, and its usage reader reads what
// its answers say (the mock model APIs' tests read them through peal's
// endpoint, streamed and not).
func TestAPIs(t *testing.T) {
	t.Parallel()
	for _, a := range APIs {
		if _, err := confine.ParseRoutes(append(a.Routes, a.Open...)...); err != nil || len(a.Places) == 0 || a.Usage == nil {
			t.Errorf("%s: %v", a.Name, err)
		}
	}
	cases := []struct {
		api  *API
		docs []string
		want confine.Tokens
	}{
		{AnthropicAPI, []string{`{"type":"message_start","message":{"usage":{"input_tokens":10,"cache_creation_input_tokens":5,"cache_read_input_tokens":100,"output_tokens":1}}}`,
			`{"type":"content_block_delta"}`, `{"type":"message_delta","usage":{"output_tokens":42}}`}, confine.Tokens{Input: 115, Cached: 100, Output: 42}},
		{OpenAIAPI, []string{`{"type":"response.created","response":{"usage":null}}`,
			`{"type":"response.completed","response":{"usage":{"input_tokens":300,"input_tokens_details":{"cached_tokens":200},"output_tokens":7}}}`},
			confine.Tokens{Input: 300, Cached: 200, Output: 7}},
		{OpenAIAPI, []string{`{"choices":[],"usage":null}`, `{"choices":[],"usage":{"prompt_tokens":30,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":8}}}`},
			confine.Tokens{Input: 30, Cached: 8, Output: 4}},
		{GoogleAPI, []string{`{"candidates":[],"usageMetadata":{"promptTokenCount":50,"candidatesTokenCount":2}}`,
			`{"usageMetadata":{"promptTokenCount":50,"candidatesTokenCount":9,"thoughtsTokenCount":3,"cachedContentTokenCount":20}}`},
			confine.Tokens{Input: 50, Cached: 20, Output: 12}},
	}
	for _, c := range cases {
		var got confine.Tokens
		for _, d := range c.docs {
			c.api.Usage([]byte(d), &got)
		}
		if got != c.want {
			t.Errorf("%s: %+v, want %+v", c.api.Name, got, c.want)
		}
	}
}
