package agent

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"peal/confine"
	"peal/phase"
)

// Codex (binary `codex`): `codex exec` with the prompt on stdin ("-"), the
// repository as its folder, a read-only sandbox for read-only calls and no
// sandbox nor approvals for writing calls. It never gives up on an outage by
// itself: the network stall watch ends such attempts.
func init() {
	register(&Kind{
		Name:          "codex",
		CLI:           "Codex CLI",
		DefaultCmd:    "codex",
		Args:          codexArgs,
		ModelFlag:     "-m",
		Provider:      "openai",
		PromptOnStdin: true,
		StdinArg:      "-",
		ShowsWork:     true,
		Failures: Failures{
			Fatal: []string{
				"401 unauthorized", "incorrect api key", "invalid x-api-key", "unexpected argument", "unrecognized subcommand",
				"not logged in", "403 forbidden",
			},
			// OpenAI's insufficient_quota, in its words: "ERROR: Quota
			// exceeded. Check your plan and billing details."
			OutOfQuota: []string{"quota exceeded. check your plan and billing details"},
			// The API's context_length_exceeded: "ERROR: Codex ran out of
			// room in the model's context window. Start a new thread or clear
			// earlier history before retrying." It does not say the sizes.
			OverContext: []string{"ran out of room in the model's context window"},
			RateLimit:   []string{"usage limit", "429 too many requests", "last status: 429"},
			// Not "Reconnecting... n/5": codex says so while it waits out a
			// 429's Retry-After too.
			Network:   []string{"os error 111", "error sending request"},
			ExitCodes: map[int]phase.Class{2: phase.Fatal}, // clap's usage errors
			// Its footer after a failed turn: "tokens used", then the count.
			Unquoted:  []string{"tokens used"},
			FatalHint: "set OPENAI_API_KEY (or CODEX_API_KEY), or run `codex login` once",
			QuotaHint: "add credit to the OpenAI account of OPENAI_API_KEY (or raise its plan's quota)",
		},
		Events:  codexEvents,
		Session: codexSession,
		Auth: Auth{
			Env:       []string{"OPENAI_API_KEY", "CODEX_API_KEY"},
			Status:    []string{"login", "status"},
			LoggedIn:  saysLoggedIn,
			BeforeRun: true, // without credentials it retries forever
			LoginHint: "set OPENAI_API_KEY (or CODEX_API_KEY) in the job's environment, or run `codex login` on the machine",
		},
		Confine: Confinement{
			// CODEX_SQLITE_HOME moves its databases out of CODEX_HOME.
			Folders: []string{"${CODEX_HOME:-~/.codex}", "${CODEX_SQLITE_HOME:-~/.codex}"},
			// The skills every agent CLI may share.
			Reads:       []string{"~/.agents/skills"},
			Credentials: []string{"${CODEX_HOME:-~/.codex}/auth.json"},
			// chatgpt.com serves a ChatGPT plan's requests, auth.openai.com
			// refreshes its login.
			Hosts: []string{"api.openai.com", "chatgpt.com", "auth.openai.com"},
			Env: []string{"OPENAI_API_KEY", "OPENAI_ORGANIZATION", "CODEX_API_KEY", "CODEX_HOME", "CODEX_SQLITE_HOME",
				"CODEX_CA_CERTIFICATE", "CODEX_OSS_PORT"},
			BaseURLs: []string{"CODEX_OSS_BASE_URL"},
			Keys: Keys{
				Logins: []Login{
					{Name: "`CODEX_API_KEY` (OpenAI's API; `OPENAI_API_KEY`, which `codex exec` does not send, is held too)", Held: true,
						How: "`-c openai_base_url=…` names peal's endpoint (the `openai_base_url` of `config.toml` is its upstream, if on `api.openai.com` or a host `confine_network_allow` names), which sends the key in `Authorization: Bearer`"},
					{Name: "the `env_key` of a provider of `~/.codex/config.toml` (`model_provider`): `CODEX_API_KEY`, `OPENAI_API_KEY` or a variable `confine_env_pass` passes", Held: true,
						How: "`-c model_providers.<id>.base_url=…` names peal's endpoint; the provider's `base_url` is its upstream, if on a host `confine_network_allow` names"},
					{Name: "`OPENAI_API_KEY` without `CODEX_API_KEY`", How: "kept from its calls: `codex exec` does not send it with its built-in provider"},
					{Name: "`codex login` (ChatGPT, or a key saved in `~/.codex/auth.json`)", How: "kept in its folder, which its calls read"},
				},
				Vars: codexKeyVars,
				Hold: codexKeys,
			},
			Notes: "measured with 0.171.0: it writes ~/.codex (its SQLite databases, `sessions/…/rollout-*.jsonl`, `skills/.system`, " +
				"shell snapshots); without it, `Error: failed to initialize in-process app-server client: Permission denied (os error 13)`. " +
				"It takes its base URL from its configuration (`openai_base_url`, `model_providers.*.base_url`), not from OPENAI_BASE_URL, " +
				"which it does not read: that host is the user's to allow (confine_network_allow). Refused without effect on the call: " +
				"ab.chatgpt.com (its metrics; `[analytics] enabled = false` stops them), github.com and api.github.com; in the home folder, " +
				"~/.bashrc (its shell snapshot); it looks for plugins in ~/.claude-plugin, ~/.codex-plugin and ~/.cursor-plugin",
		},
		VersionArgs: []string{"--version"},
		Notes: "writing calls pass --dangerously-bypass-approvals-and-sandbox: commands run without approval and without " +
			"codex's sandbox (which needs bubblewrap, often missing in containers)",
		Doc: Doc{
			Measured:      "0.169",
			NoCredentials: "no local check: it dials the API forever; peal checks first (below)",
			Unreachable:   "never exits: `stream disconnected before completion: Connection refused (os error 111)` or `failed to lookup address information`, then `ERROR: Reconnecting... waiting for network` → network, ended by the stall watch",
			InvalidKey:    "exit 1 in 13 s, `ERROR: unexpected status 401 Unauthorized: …` → fatal",
			RateLimit:     "`exceeded retry limit, last status: 429 Too Many Requests` → rate limit",
			Unauthorized:  "exit 1, `ERROR: unexpected status 401 Unauthorized: <the API's message>, url: …`",
			Forbidden:     "exit 1, `ERROR: unexpected status 403 Forbidden: <the API's message>, url: …`",
			ModelNotFound: "exit 1 in under 1 s (one request), the API's message after `ERROR:`, twice: `ERROR: model: M was not found` (OpenAI's own: `ERROR: The model … does not exist or you do not have access to it.`); the warning before it, ``Model metadata for `M` not found``, comes with any model codex has no metadata for and says nothing of the API",
			Outage:        "never exits: `Reconnecting... waiting for network` over and over",
			OutageBound:   "the stall watch: 30 s after its first network error", OutageAttempts: "3", OutageExit: "2 min 16 s",
			OutOfQuota: "exit 1 in under 1 s (one request), `ERROR: Quota exceeded. Check your plan and billing details.`, twice (OpenAI's 429 `insufficient_quota`)",
			OverContext: "exit 1 in under 1 s (one request), `ERROR: Codex ran out of room in the model's context window. Start a new thread or clear earlier history before retrying.`, " +
				"twice, then its footer `tokens used` and `0` (never quoted); it does not say the sizes",
			OwnRetries: "five retries, each after the `Retry-After` (`ERROR: Reconnecting... 1/5` … `5/5`, its words for an outage too), then " +
				"`ERROR: exceeded retry limit, last status: 429 Too Many Requests`: 6 s with `Retry-After: 1`, 50 s with 10; a 529: 30 requests in 25 s, then `ERROR: unexpected status 529 …`",
			RetryTime: "none: its lines say no time",
			CapExit:   "44 s (429, 2 attempts), 65 s (529)",
		},
	})
}

func codexArgs(c Call) []string {
	args := []string{"exec", "-C", c.Repo, "--skip-git-repo-check"}
	if c.Structured {
		args = append(args, "--json")
	}
	if ModeOf(c.Phase) == Write {
		return append(args, "--dangerously-bypass-approvals-and-sandbox")
	}
	return append(args, "-s", "read-only")
}

// codexEvents is `codex exec --json`.
var codexEvents = &Events{
	Parse:  parseCodexEvents,
	Answer: "the last `item.completed` of type `agent_message`",
	End:    "`turn.completed`",
	Error:  "`turn.failed`, `{\"type\":\"error\"}` when no turn completed",
	Usage:  "`usage` of `turn.completed` (`input_tokens`, cached included, `cached_input_tokens`, `output_tokens`), counting the whole thread",
	// Measured with codex 0.171.0: three calls of one thread reported
	// 240, 516 and 1024 input tokens.
	Cumulative: true,
}

// parseCodexEvents reads one line of `codex exec --json`: the thread's id
// (thread.started, its first line, before any request), agent messages as
// completed items, turn.completed (the end of the answer, with token
// usage), turn.failed and error events.
func parseCodexEvents(line []byte) (Event, bool) {
	var e struct {
		Type    string `json:"type"`
		Thread  string `json:"thread_id"`
		Message string `json:"message"`
		Item    struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"item"`
		Usage struct {
			Input  int64 `json:"input_tokens"`
			Cached int64 `json:"cached_input_tokens"`
			Output int64 `json:"output_tokens"`
		} `json:"usage"`
		Error any `json:"error"`
	}
	if !decodeLine(line, &e) || e.Type == "" {
		return Event{}, false
	}
	switch {
	case e.Type == "thread.started":
		return Event{Session: e.Thread}, true
	case e.Type == "item.completed" && e.Item.Type == "agent_message":
		return Event{Text: e.Item.Text}, true
	case e.Type == "turn.completed":
		return Event{Final: true, Usage: Usage{InputTokens: e.Usage.Input, OutputTokens: e.Usage.Output, CachedTokens: e.Usage.Cached}}, true
	case e.Type == "turn.failed":
		return Event{Final: true, Error: nonEmpty(errorText(e.Error), "the turn failed")}, true
	case e.Type == "error":
		return Event{Error: nonEmpty(e.Message, errorText(e.Error))}, true
	}
	return Event{}, true // other events (turn.started, ...) tell nothing
}

// codexSession: the CLI chooses the thread's id, and its first event
// (thread.started, printed before any request) names it; `resume <id>`
// continues it, after exec's own options (-C and -s are refused after it)
// and before the "-" that reads the prompt on stdin. Measured with codex
// 0.171.0.
var codexSession = &Session{
	Resume: func(id string) []string { return []string{"resume", id} },
	// An id that is no UUID is looked up as a thread name, and one not
	// found starts a new thread silently (exit 0).
	ID: uuidPattern,
	// Its words for an id with no rollout file, and for a rollout file that
	// is empty or garbage.
	Lost: []string{"thread/resume failed"},
	Doc: SessionDoc{
		Learnt: "`thread_id` of `thread.started`, the first line, printed before any request (also when the API cannot be reached)",
		Lost: "exit 1 in 0.2 s, stdout empty: `Error: thread/resume: thread/resume failed: no rollout found for thread id <id> (code -32600)` " +
			"(a rollout file that is empty or garbage: `… failed to read thread: … (code -32603)`)",
		Hazards: "`resume --last` takes the newest thread; `resume \"\"` or an id that is no UUID and names no thread starts a new thread silently (exit 0); " +
			"a thread resumes in any folder (`-C`), a worktree included",
	},
}

// codexKeyVars are the variables of Codex's keys. `codex exec` sends
// CODEX_API_KEY; OPENAI_API_KEY only where a provider's env_key names it
// (measured with 0.171.0: with OPENAI_API_KEY alone, its requests carry no
// key).
var codexKeyVars = []string{"CODEX_API_KEY", "OPENAI_API_KEY"}

// codexKeys is Codex's hold: the key of the provider its configuration
// picks (the built-in openai one: CODEX_API_KEY; another: its env_key),
// read from ~/.codex/config.toml before any call. Its calls write that
// folder, so a file an earlier run's call rewrote may be what peal reads:
// the base URL it names is where the key goes only on the API's own host
// or a host confine_network_allow names, and an env_key is read only when
// it names a key variable of Codex's or one confine_env_pass passes.
func codexKeys(m Machine) Hold {
	var cfg struct {
		Provider  string `toml:"model_provider"`
		OpenAIURL string `toml:"openai_base_url"`
		Providers map[string]struct {
			BaseURL string `toml:"base_url"`
			EnvKey  string `toml:"env_key"`
		} `toml:"model_providers"`
	}
	file := "~/.codex/config.toml"
	if path, ok := ExpandPath("${CODEX_HOME:-~/.codex}/config.toml", m.Home, m.Getenv); ok {
		file = path
		if data, err := m.ReadFile(path); err == nil {
			if err := toml.Unmarshal(data, &cfg); err != nil {
				return Hold{Why: "peal cannot read " + path + ": " + err.Error()}
			}
		}
	}
	id := cfg.Provider
	if id == "" {
		id = "openai"
	}
	set := func(key, value string) string { return key + "=" + strconv.Quote(value) }
	if p, ok := cfg.Providers[id]; ok && id != "openai" {
		login := "provider " + id
		if p.EnvKey == "" {
			return Hold{Login: login, Why: "its provider " + id + " names no env_key: no key to hold"}
		}
		if !m.keyVar(p.EnvKey, codexKeyVars) {
			return Hold{Login: p.EnvKey + " (" + login + ")", Withheld: true,
				Why: p.EnvKey + ", the env_key of its provider " + id + " in " + file + ", is neither one of " + strings.Join(codexKeyVars, ", ") +
					" nor passed by confine_env_pass, so peal neither reads nor sends it: name it on confine_env_pass if that key is the provider's"}
		}
		keys := setVars(m, p.EnvKey)
		if len(keys) == 0 {
			return Hold{Login: login, Why: p.EnvKey + ", the env_key of its provider " + id + ", is not set"}
		}
		login = p.EnvKey + " (" + login + ")"
		upstream, err := m.upstream(OpenAIAPI, "the base_url of its provider "+id+" in "+file, p.BaseURL, "/v1")
		if err != nil {
			return Hold{Login: login, Withheld: true, Why: err.Error()}
		}
		a, err := OpenAIAPI.held(OpenAIAPI.Name, upstream, "/v1", keys)
		if err != nil {
			return Hold{Login: login, Withheld: true, Why: "the base_url of its provider " + id + ": " + err.Error()}
		}
		key := "model_providers." + tomlKey(id) + ".base_url"
		return Hold{Login: login, APIs: []confine.HeldAPI{a}, Point: func(base, _ map[string]string) ([]string, []string) {
			return nil, []string{"-c", set(key, base[OpenAIAPI.Name])}
		}}
	}
	if id != "openai" {
		return Hold{Login: "provider " + id, Why: "its provider " + id + " is not one of its configuration's: a local model, no key to hold"}
	}
	keys := setVars(m, codexKeyVars...)
	if keys["CODEX_API_KEY"] == "" {
		return Hold{Why: "CODEX_API_KEY is not set: codex exec logs in with what `codex login` keeps in its folder"}
	}
	upstream, err := m.upstream(OpenAIAPI, "openai_base_url in "+file, cfg.OpenAIURL, "/v1")
	if err != nil {
		return Hold{Login: loginOf(keys), Withheld: true, Why: err.Error()}
	}
	a, err := OpenAIAPI.held(OpenAIAPI.Name, upstream, "/v1", keys)
	if err != nil {
		return Hold{Login: loginOf(keys), Withheld: true, Why: "openai_base_url: " + err.Error()}
	}
	return Hold{Login: loginOf(keys), APIs: []confine.HeldAPI{a}, Point: func(base, _ map[string]string) ([]string, []string) {
		return nil, []string{"-c", set("openai_base_url", base[OpenAIAPI.Name])}
	}}
}

// tomlKey is id as one key of a dotted TOML key.
func tomlKey(id string) string {
	if bareKey.MatchString(id) {
		return id
	}
	return strconv.Quote(id)
}

var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
