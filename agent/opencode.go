package agent

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"

	"peal/confine"
)

// opencode (binary `opencode`): `opencode run` with the prompt on stdin, the
// plan agent for read-only calls and --auto (approve what is not denied)
// for writing calls. It colours its stderr even without a terminal.
func init() {
	register(&Kind{
		Name:          "opencode",
		CLI:           "opencode",
		DefaultCmd:    "opencode",
		Args:          opencodeArgs,
		ModelFlag:     "-m", // provider/model
		PromptOnStdin: true,
		ShowsWork:     true,
		Failures: Failures{
			Fatal: []string{"invalid x-api-key", "invalid api key", "incorrect api key provided", "api key is missing", "unknown arguments",
				// A 403 of an OpenAI-compatible API: "Error: Forbidden: {...}".
				"error: forbidden"},
			ModelNotFound: []string{"providermodelnotfound"},
			Network:       []string{"cannot connect to api", "is the computer able to access the url"},
			RateLimit:     []string{"rate limit exceeded"},
			// Processes that start at the same time in a data folder that
			// has no database yet race to create its tables ("Failed
			// query: CREATE TABLE …"), or find it locked: the next start
			// finds it made.
			Transient: []string{"failed query:", "database is locked"},
			FatalHint: "configure a provider's API key for opencode (e.g. ANTHROPIC_API_KEY or OPENAI_API_KEY) and pick its model with `model`",
			QuotaHint: "add credit to the account of the provider whose key opencode uses, or pick another provider's model with `model`",
		},
		Events:  opencodeEvents,
		Session: opencodeSession,
		Confine: Confinement{
			Folders: []string{"${XDG_DATA_HOME:-~/.local/share}/opencode", "${XDG_STATE_HOME:-~/.local/state}/opencode",
				"${XDG_CACHE_HOME:-~/.cache}/opencode"},
			// Its configuration folder (opencode.json, plugins, agents) and
			// the file OPENCODE_CONFIG names.
			Reads: []string{"${XDG_CONFIG_HOME:-~/.config}/opencode", "${OPENCODE_CONFIG:-~/.config/opencode/opencode.json}",
				"~/.agents/skills"},
			Credentials: []string{"${XDG_DATA_HOME:-~/.local/share}/opencode/auth.json", "${XDG_DATA_HOME:-~/.local/share}/opencode/mcp-auth.json"},
			// The providers whose keys it reads (below), its own (opencode.ai)
			// and its list of models (models.opencode.ai).
			Hosts: []string{"api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com", "openrouter.ai",
				"opencode.ai", "models.opencode.ai"},
			Env: []string{"OPENCODE_*", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME",
				"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY", "OPENROUTER_API_KEY"},
			BaseURLs: []string{"ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"},
			Keys: Keys{
				Logins: []Login{
					{Name: "a built-in provider's variable (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, `GOOGLE_GENERATIVE_AI_API_KEY` or `GEMINI_API_KEY`, `OPENROUTER_API_KEY`)", Held: true,
						How: "`OPENCODE_CONFIG_CONTENT` gives the provider peal's endpoint as its `baseURL` and the placeholder as its `apiKey`; its `baseURL` (or `ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`) is the upstream, one of its files' only on the API's own host or a host `confine_network_allow` names"},
					{Name: "a provider of its configuration whose `apiKey` is `{env:VAR}` (`npm` one of " + opencodeSDKNames() + "; `VAR` a built-in provider's variable or one `confine_env_pass` passes)", Held: true,
						How: "the same; the provider's `baseURL` is the upstream, if on a host `confine_network_allow` names (or given in `OPENCODE_CONFIG_CONTENT`)"},
					{Name: "a key written in its configuration, or saved by `opencode auth login` (`~/.local/share/opencode/auth.json`)", How: "kept in its files, which its calls read"},
				},
				Vars: opencodeKeyVars,
				Hold: opencodeKeys,
			},
			Notes: "measured with 1.18.33: it writes ~/.local/share/opencode (its database, log and a git folder per project under " +
				"`snapshot/`), ~/.local/state/opencode (locks), ~/.cache/opencode and a 5 MB library in the call's TMPDIR; without its " +
				"folders it crashes at start (`Bun v1.3.14 (Linux x64 baseline)`). Its configuration folder ~/.config/opencode stays " +
				"read-only: the plugin install it starts there fails on the refused registry.npmjs.org (a warning in its log) and the " +
				"call completes; that install reads ~/.npmrc, a secret it goes on without. Without its configuration folder it falls back to " +
				"opencode.ai's models and stops on the refused host. It reads ANTHROPIC_BASE_URL and OPENAI_BASE_URL; a provider of its configuration (`options.baseURL`) " +
				"is the user's to allow, and another provider's key the user's to pass",
		},
		VersionArgs: []string{"--version"},
		Notes:       "writing calls pass --auto: every permission that is not explicitly denied is granted",
		Doc: Doc{
			Measured:      "1.18",
			NoCredentials: "falls back to a free model it cannot reach: `Error: Cannot connect to API: Unable to connect. Is the computer able to access the url?` (coloured, on stderr) → network",
			Unreachable:   "same",
			InvalidKey:    "exit 1, `Error: invalid x-api-key` → fatal",
			RateLimit:     "`rate limit` → rate limit",
			Unauthorized:  "exit 1, `Error: <the API's message>` (OpenAI's `Incorrect API key provided…`, Anthropic's `invalid x-api-key`)",
			Forbidden:     "exit 1 after its own retries (7 requests, ~75 s), `Error: Forbidden: {\"error\":…}`",
			ModelNotFound: "exit 1 in about 4 s (two requests), `Error: <the API's message>` (coloured): `Error: model: M was not found`, or OpenAI's `… does not exist or you do not have access to it.` A model (`-m provider/model`) that its own configuration does not list fails before any request with `UnknownError`, `Unexpected server error. Check server logs for details.`, which says nothing of the model: an ordinary failure",
			Outage:        "exit 1 after about 66 s, silent until its one error line (it retries on its own and has no setting for it)",
			OutageBound:   "the CLI, and `network_give_up_sec`: the third attempt would start past 110 s", OutageAttempts: "2", OutageExit: "2 min 29 s",
			OutOfQuota: "relays the API's words after `Error:`: OpenAI's `You exceeded your current quota, please check your plan and billing details. …` after 9 requests and 76 s of silent retries, " +
				"Google's per-day quota the same way (74 s), Anthropic's `Your credit balance is too low to access the Anthropic API. …` in about 5 s (two requests)",
			OverContext: "exit 1 in 3–7 s (three requests), the API's words after `Error:`: `This model's maximum context length is 200000 tokens. However, your messages resulted in 212345 tokens. …` (OpenAI), " +
				"`prompt is too long: 212345 tokens > 200000 maximum` (Anthropic), `The input token count (1212345) exceeds the maximum number of tokens allowed (1048576).` (Google)",
			OwnRetries: "retries a 429 or 529 silently, nine requests: about 8 s with `Retry-After: 1`, 68 s with 10, 76 s without one, 1 min 43 s for a 529; the silence counts as waited",
			RetryTime:  "the API's words: `Please try again in 1s.` (OpenAI), `Please retry in 1s.` (Google); with structured output, the `retry-after` header its error event carries",
			CapExit:    "51 s (429, 3 attempts), 72 s (529, 1 attempt)",
		},
	})
}

func opencodeArgs(c Call) []string {
	args := []string{"run", "--dir", c.Repo}
	if ModeOf(c.Phase) == Write {
		args = append(args, "--auto")
	} else {
		args = append(args, "--agent", "plan")
	}
	if c.Structured {
		args = append(args, "--format", "json")
	}
	return args
}

// opencodeEvents is `opencode run --format json`.
var opencodeEvents = &Events{
	Parse:  parseOpencodeEvents,
	Answer: "the last `text` part",
	End:    "(none: the process ends when the session is idle)",
	Error:  "`{\"type\":\"error\"}`",
	Usage:  "each `step_finish`'s tokens (`input` without the cache, `cache.read`, `cache.write`, `output`, `reasoning`) and `cost`, summed",
}

// parseOpencodeEvents reads one line of `run --format json`: text parts,
// step_finish with tokens and cost (one per step, summed), and error
// events. It has no final result event: the process ends when the session
// is idle. Every line names its session (sessionID), an error's too.
func parseOpencodeEvents(line []byte) (Event, bool) {
	var e struct {
		Type    string `json:"type"`
		Session string `json:"sessionID"`
		Part    struct {
			Text   string  `json:"text"`
			Cost   float64 `json:"cost"`
			Tokens struct {
				Input     int64 `json:"input"`
				Output    int64 `json:"output"`
				Reasoning int64 `json:"reasoning"`
				Cache     struct {
					Read  int64 `json:"read"`
					Write int64 `json:"write"`
				} `json:"cache"`
			} `json:"tokens"`
		} `json:"part"`
		Error any `json:"error"`
	}
	if !decodeLine(line, &e) || e.Type == "" {
		return Event{}, false
	}
	ev := Event{Session: e.Session}
	switch e.Type {
	case "text":
		ev.Text = e.Part.Text
	case "step_finish":
		t := e.Part.Tokens
		ev.Usage = Usage{InputTokens: t.Input + t.Cache.Read + t.Cache.Write, OutputTokens: t.Output + t.Reasoning, CachedTokens: t.Cache.Read, CostUSD: e.Part.Cost}
	case "error":
		ev.Error = nonEmpty(errorText(e.Error), "opencode reported an error")
	}
	return ev, true
}

// opencodeSession: the CLI chooses the session's id, and every line of its
// events names it, an error's too; --session continues it. A session
// resumed from another folder hangs, silent, so peal never resumes one
// there. Measured with opencode 1.18.33.
var opencodeSession = &Session{
	Resume: func(id string) []string { return []string{"--session", id} },
	// --session "" starts a new session.
	ID:   regexp.MustCompile(`^ses_[0-9A-Za-z]{8,64}$`),
	Lost: []string{"session not found"},
	Doc: SessionDoc{
		Learnt: "`sessionID` on every `--format json` line, an `error` line's too",
		Lost:   "exit 1 in 1 s, stdout empty, stderr `Error: Session not found` (coloured); the same for a database without its WAL, or after `opencode session delete`",
		Hazards: "`-c`/`--continue` takes the last session and `--session \"\"` starts a new one; a session resumed in another folder (a worktree too) " +
			"runs in its first folder and never exits, silent",
	},
}

// opencode's providers whose key peal can hold: the built-in ones it turns
// on from a variable, and those of the user's configuration whose apiKey
// is "{env:VAR}", by the SDK (npm) they use. Each gets a path of its own
// at the endpoint, given by OPENCODE_CONFIG_CONTENT, which opencode merges
// over its configuration's files, with the placeholder as its apiKey.
var (
	opencodeBuiltins = []struct {
		id       string
		sdk      string
		vars     []string
		baseVar  string
		upstream string // "": the API's own
	}{
		{"anthropic", "@ai-sdk/anthropic", []string{"ANTHROPIC_API_KEY"}, "ANTHROPIC_BASE_URL", ""},
		{"openai", "@ai-sdk/openai", []string{"OPENAI_API_KEY"}, "OPENAI_BASE_URL", ""},
		{"google", "@ai-sdk/google", []string{"GOOGLE_GENERATIVE_AI_API_KEY", "GEMINI_API_KEY"}, "", ""},
		{"openrouter", "@openrouter/ai-sdk-provider", []string{"OPENROUTER_API_KEY"}, "", "https://openrouter.ai/api/v1"},
	}
	opencodeSDKs = map[string]struct {
		api      *API
		basePath string
	}{
		"@ai-sdk/anthropic":           {AnthropicAPI, "/v1"},
		"@ai-sdk/openai":              {OpenAIAPI, "/v1"},
		"@ai-sdk/openai-compatible":   {OpenAIAPI, "/v1"},
		"@ai-sdk/google":              {GoogleAPI, "/v1beta"},
		"@openrouter/ai-sdk-provider": {OpenAIAPI, "/v1"},
	}
	envRef     = regexp.MustCompile(`^\{env:([A-Za-z_][A-Za-z0-9_]*)\}$`)
	providerID = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
)

func opencodeSDKNames() string {
	names := slices.Sorted(maps.Keys(opencodeSDKs))
	for i, n := range names {
		names[i] = "`" + n + "`"
	}
	return strings.Join(names, ", ")
}

// opencodeProvider is what peal reads of a provider of opencode's
// configuration.
type opencodeProvider struct {
	NPM     string `json:"npm"`
	Options struct {
		BaseURL *string `json:"baseURL"`
		APIKey  *string `json:"apiKey"`
	} `json:"options"`
}

// opencodeKeyVars are the variables of the keys of opencode's built-in
// providers.
var opencodeKeyVars = []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY", "OPENROUTER_API_KEY"}

// opencodeKeys is opencode's hold: every provider whose key is in a
// variable peal can hold, read from the user's configuration (its global
// files and OPENCODE_CONFIG, never the work tree's) before any call. What
// a file says is taken as a call may have written it (OPENCODE_CONFIG may
// name one in the tree): a baseURL it gives is where a key goes only on
// the API's own host or a host confine_network_allow names, and a
// "{env:VAR}" is read only for a key variable of opencode's built-in
// providers or one confine_env_pass passes. OPENCODE_CONFIG_CONTENT, in
// peal's environment, is the user's.
func opencodeKeys(m Machine) Hold {
	providers := map[string]*opencodeProvider{}
	var files []string
	if p, ok := ExpandPath("${XDG_CONFIG_HOME:-~/.config}/opencode", m.Home, m.Getenv); ok {
		for _, name := range []string{"config.json", "opencode.json", "opencode.jsonc"} {
			files = append(files, p+"/"+name)
		}
	}
	if p := m.Getenv("OPENCODE_CONFIG"); p != "" {
		files = append(files, p)
	}
	// from: the file each provider's baseURL was last given by ("": peal's
	// environment).
	from := map[string]string{}
	read := func(what string, data []byte) string {
		var c struct {
			Provider map[string]json.RawMessage `json:"provider"`
		}
		if err := json.Unmarshal(stripJSONComments(data), &c); err != nil {
			return "peal cannot read " + what + ": " + err.Error()
		}
		for id, raw := range c.Provider {
			p := providers[id]
			if p == nil {
				p = &opencodeProvider{}
				providers[id] = p
			}
			var own opencodeProvider
			json.Unmarshal(raw, &own)
			json.Unmarshal(raw, p) // the fields set here replace the earlier files'
			if own.Options.BaseURL != nil {
				from[id] = what
			}
		}
		return ""
	}
	for _, f := range files {
		if data, err := m.ReadFile(f); err == nil {
			if why := read(f, data); why != "" {
				return Hold{Why: why}
			}
		}
	}
	var content map[string]any
	if c := m.Getenv("OPENCODE_CONFIG_CONTENT"); c != "" {
		if why := read("OPENCODE_CONFIG_CONTENT", []byte(c)); why != "" {
			return Hold{Why: why}
		}
		for id, what := range from {
			if what == "OPENCODE_CONFIG_CONTENT" {
				from[id] = "" // the user's, as the rest of peal's environment
			}
		}
		json.Unmarshal(stripJSONComments([]byte(c)), &content)
	}
	var apis []confine.HeldAPI
	apiKeyOf := map[string]string{} // provider → the variable of its apiKey
	var logins, refused []string
	// hold holds provider id's keys, sent to upstream (from: the file that
	// gave it, "" for peal's environment or the provider's own address).
	hold := func(id, sdk, upstream, from, keyVar string, keys map[string]string, own ...string) {
		s, ok := opencodeSDKs[sdk]
		if !ok || !providerID.MatchString(id) {
			return
		}
		if from != "" {
			var err error
			if upstream, err = m.upstream(s.api, "the baseURL of its provider "+id+" in "+from, upstream, s.basePath, own...); err != nil {
				refused = append(refused, "provider "+id+": "+err.Error())
				return
			}
		}
		a, err := s.api.held(id, upstream, s.basePath, keys)
		if err != nil {
			refused = append(refused, "provider "+id+": "+err.Error())
			return
		}
		apis = append(apis, a)
		apiKeyOf[id] = keyVar
		logins = append(logins, id+" ("+keyVar+")")
	}
	for _, id := range slices.Sorted(maps.Keys(providers)) {
		p := providers[id]
		if p.Options.APIKey == nil {
			continue
		}
		ref := envRef.FindStringSubmatch(*p.Options.APIKey)
		if ref == nil {
			continue // a key written in the configuration stays in reach
		}
		if !m.keyVar(ref[1], opencodeKeyVars) {
			refused = append(refused, "provider "+id+": its apiKey names "+ref[1]+", neither a key variable of opencode's built-in providers nor passed by "+
				"confine_env_pass, so peal neither reads nor sends it: name it on confine_env_pass if that key is the provider's")
			continue
		}
		keys := setVars(m, ref[1])
		if len(keys) == 0 {
			continue
		}
		sdk, upstream, source := p.NPM, "", ""
		var own []string
		for _, b := range opencodeBuiltins {
			if b.id == id {
				sdk, upstream = nonEmpty(sdk, b.sdk), nonEmpty(m.Getenv(b.baseVar), b.upstream)
				own = append(own, b.upstream)
			}
		}
		if p.Options.BaseURL != nil {
			upstream, source = *p.Options.BaseURL, from[id]
		}
		hold(id, sdk, upstream, source, ref[1], keys, own...)
	}
	for _, b := range opencodeBuiltins {
		if p := providers[b.id]; p != nil && p.Options.APIKey != nil {
			continue // its configuration gives its key
		}
		keys := setVars(m, b.vars...)
		if len(keys) == 0 {
			continue
		}
		upstream, source := b.upstream, ""
		if b.baseVar != "" && m.Getenv(b.baseVar) != "" {
			upstream = m.Getenv(b.baseVar)
		}
		if p := providers[b.id]; p != nil && p.Options.BaseURL != nil {
			upstream, source = *p.Options.BaseURL, from[b.id]
		}
		first := ""
		for _, v := range b.vars {
			if keys[v] != "" {
				first = v
				break
			}
		}
		hold(b.id, b.sdk, upstream, source, first, keys, b.upstream)
	}
	if len(apis) == 0 {
		if len(refused) > 0 {
			return Hold{Withheld: true, Why: strings.Join(refused, "; ")}
		}
		return Hold{Why: "no provider's key is in a variable peal can hold: a key in its configuration, or saved by `opencode auth login`, is kept in its files"}
	}
	return Hold{Login: "providers " + strings.Join(logins, ", "), APIs: apis, Why: strings.Join(refused, "; "), Point: func(base, placeholder map[string]string) ([]string, []string) {
		cfg := map[string]any{}
		maps.Copy(cfg, content)
		prov, _ := cfg["provider"].(map[string]any)
		prov = maps.Clone(prov)
		if prov == nil {
			prov = map[string]any{}
		}
		for id, v := range apiKeyOf {
			p, _ := prov[id].(map[string]any)
			p = maps.Clone(p)
			if p == nil {
				p = map[string]any{}
			}
			opts, _ := p["options"].(map[string]any)
			opts = maps.Clone(opts)
			if opts == nil {
				opts = map[string]any{}
			}
			opts["baseURL"], opts["apiKey"] = base[id], placeholder[v]
			p["options"] = opts
			prov[id] = p
		}
		cfg["provider"] = prov
		data, _ := json.Marshal(cfg)
		return []string{"OPENCODE_CONFIG_CONTENT=" + string(data)}, nil
	}}
}

// stripJSONComments is JSONC without its comments (opencode's files may
// have them).
func stripJSONComments(b []byte) []byte {
	out := make([]byte, 0, len(b))
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString:
			out = append(out, c)
			if c == '\\' && i+1 < len(b) {
				i++
				out = append(out, b[i])
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
			out = append(out, c)
		case c == '/' && i+1 < len(b) && b[i+1] == '/':
			for i < len(b) && b[i] != '\n' {
				i++
			}
			if i < len(b) {
				out = append(out, '\n')
			}
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			i += 2
			for i+1 < len(b) && (b[i] != '*' || b[i+1] != '/') {
				i++
			}
			i++
		default:
			out = append(out, c)
		}
	}
	return out
}
