package agent

import (
	"encoding/json"
	"strings"
)

// Claude Code (binary `claude`): print mode, the prompt on stdin, write
// access by bypassing permission prompts, and its own retries capped so that
// an outage fails in seconds rather than after minutes of silent retries.
func init() {
	register(&Kind{
		Name:          "claude",
		CLI:           "Claude Code",
		DefaultCmd:    "claude",
		Args:          claudeArgs,
		ModelFlag:     "--model",
		Provider:      "anthropic",
		PromptOnStdin: true,
		// One retry of its own: after the server's retry-after when it
		// gives one (the CLI waits up to a minute, and gives up at once on
		// a longer one), else after half a second. A short rate limit then
		// costs one wait of the server's time; an outage, half a second.
		Env: []string{"CLAUDE_CODE_MAX_RETRIES=1"},
		Failures: Failures{
			Fatal: []string{
				"not logged in · please run /login", "please run /login", "invalid api key · fix external api key",
				"cannot be used with root/sudo privileges", "oauth token has expired",
				"unknown option", "error: unknown", "error: option",
				// A 403: "Failed to authenticate. API Error: 403 Your API key
				// does not have permission to use the specified resource."
				"failed to authenticate", "api error: 403",
			},
			// Its own words for the API's not_found_error: "There's an issue
			// with the selected model (M). It may not exist or you may not
			// have access to it. Run --model to pick a different model."
			ModelNotFound: []string{"issue with the selected model"},
			// Its own words for an account without credit ("Credit balance
			// is too low", common to all kinds) and for a subscription whose
			// usage or spend is used up.
			OutOfQuota: []string{"credit balance is too low", "out of usage credits", "monthly spend limit", "org is out of usage"},
			// "You've hit your session limit · resets 2:16am (UTC)": a
			// subscription's limit, which resets.
			RateLimit: []string{"usage limit reached", "limit reached", "overloaded_error", "request rejected (429)", "you've hit your",
				"temporarily limiting requests"},
			Network:   []string{"unable to connect to api", "failedtoopensocket", "connectionrefused"},
			FatalHint: "set ANTHROPIC_API_KEY (or log in with `claude` once)",
			FatalHints: map[string]string{
				"root/sudo": "run peal as a user other than root, or set IS_SANDBOX=1 when the machine is a throwaway sandbox",
			},
			QuotaHint: "add credit to the Anthropic account of the key (Plans & Billing) or raise its spend limit",
		},
		Events:  streamJSON,
		Session: claudeSession,
		Auth: Auth{
			Env:    []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"},
			Status: []string{"auth", "status"},
			// `claude auth status` prints a JSON object, "loggedIn" first
			// of its members: its line is the one to quote.
			LoggedIn: func(out string, _ int) (bool, bool, string) {
				var s struct {
					LoggedIn *bool `json:"loggedIn"`
				}
				if i := strings.IndexByte(out, '{'); i >= 0 && json.Unmarshal([]byte(out[i:]), &s) == nil && s.LoggedIn != nil {
					line := ""
					for _, l := range strings.Split(out[i:], "\n") {
						if strings.Contains(l, `"loggedIn"`) {
							line = strings.TrimSuffix(strings.TrimSpace(l), ",")
							break
						}
					}
					return *s.LoggedIn, true, line
				}
				return saysLoggedIn(out, 0)
			},
			LoginHint: "set ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN (from `claude setup-token`) in the job's environment",
		},
		Confine: Confinement{
			Folders: []string{"${CLAUDE_CONFIG_DIR:-~/.claude}"},
			// ~/.claude.json: its settings and state beside its folder.
			Reads:       []string{"~/.claude.json"},
			Credentials: []string{"${CLAUDE_CONFIG_DIR:-~/.claude}/.credentials.json"},
			// platform.claude.com refreshes a subscription login's token.
			Hosts: []string{"api.anthropic.com", "platform.claude.com"},
			Env: []string{
				"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_MODEL", "ANTHROPIC_SMALL_FAST_MODEL", "ANTHROPIC_DEFAULT_*",
				"ANTHROPIC_CUSTOM_HEADERS", "ANTHROPIC_VERTEX_PROJECT_ID", "CLAUDE_CODE_*", "CLAUDE_CONFIG_DIR", "IS_SANDBOX",
				"DISABLE_AUTOUPDATER", "DISABLE_TELEMETRY", "DISABLE_ERROR_REPORTING", "MAX_THINKING_TOKENS",
				"BASH_DEFAULT_TIMEOUT_MS", "BASH_MAX_TIMEOUT_MS", "API_TIMEOUT_MS", "CLOUD_ML_REGION", "VERTEX_REGION_*",
			},
			BaseURLs: []string{"ANTHROPIC_BASE_URL", "ANTHROPIC_BEDROCK_BASE_URL", "ANTHROPIC_VERTEX_BASE_URL"},
			Keys: Keys{
				Logins: []Login{
					{Name: "`ANTHROPIC_API_KEY`", Held: true, How: "`ANTHROPIC_BASE_URL` names peal's endpoint, which sends the key in `x-api-key`"},
					{Name: "`ANTHROPIC_AUTH_TOKEN`", Held: true, How: "the same; the endpoint sends the token in `Authorization: Bearer`"},
					{Name: "`CLAUDE_CODE_OAUTH_TOKEN` (a subscription's token from `claude setup-token`)",
						How: "in the call's environment: the CLI uses it beyond the model API (its account, its limits)"},
					{Name: "Bedrock or Vertex AI (`CLAUDE_CODE_USE_BEDROCK`, `CLAUDE_CODE_USE_VERTEX`)",
						How: "cloud credentials, the user's to pass (`confine_env_pass`)"},
					{Name: "`/login` (a subscription, `~/.claude/.credentials.json`)", How: "kept in its folder, which its calls read"},
				},
				Vars: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"},
				Hold: envKeys{api: AnthropicAPI, keyVars: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"},
					unheld: []string{"CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"},
					reach:  map[string][]string{"CLAUDE_CODE_OAUTH_TOKEN": {"CLAUDE_CODE_OAUTH_TOKEN"}}, baseVar: "ANTHROPIC_BASE_URL"}.hold,
			},
			Notes: "measured with 2.1.197: it writes its sessions, plans and shell snapshots in ~/.claude (without it, its Bash tool fails " +
				"with `EACCES: permission denied, mkdir '~/.claude'` and the call still exits 0). ~/.claude.json, a file directly in the home " +
				"folder that it rewrites through a lock and a renamed temporary file, stays read-only: it goes on without it (`--debug`: " +
				"`continuing without persisting`); it is the one file of the home folder besides its folder and git's configuration that it reads. " +
				"Refused without effect on the call: the listing of the home folder (about 20 times a call), ~/.bashrc and ~/.profile, which its " +
				"Bash tool's shell snapshot sources. peal does not set CLAUDE_CONFIG_DIR to move it: that would change where the CLI reads its " +
				"settings (and, in its code, the name of its macOS Keychain entry). With Bedrock or Vertex, its cloud credentials and host " +
				"are the user's to pass and allow (confine_env_pass, confine_network_allow; ~/.aws and ~/.config/gcloud are secrets)",
		},
		VersionArgs: []string{"--version"},
		Notes: "writing calls pass --permission-mode bypassPermissions: every edit and command is allowed, without prompts. " +
			"As root, Claude Code refuses this unless IS_SANDBOX=1 says the machine is a throwaway sandbox",
		Doc: Doc{
			Measured:      "2.1",
			NoCredentials: "exit 1 in 1 s, stdout `Not logged in · Please run /login` → fatal",
			Unreachable:   "exit 1, `API Error: Unable to connect to API (ConnectionRefused)` (or `FailedToOpenSocket`) → network",
			InvalidKey:    "exit 1, `Invalid API key · Fix external API key` → fatal",
			RateLimit:     "`API Error: Request rejected (429) · …`, `Repeated 529 Overloaded errors` → rate limit",
			Unauthorized:  "exit 1, stdout `Invalid API key · Fix external API key`",
			Forbidden:     "exit 1, stdout `Failed to authenticate. API Error: 403 Your API key does not have permission to use the specified resource.`",
			ModelNotFound: "exit 1 in 1–2 s (two requests), stdout `There's an issue with the selected model (M). It may not exist or you may not have access to it. Run --model to pick a different model.`",
			Outage:        "exit 1 in about 1.5 s: peal sets `CLAUDE_CODE_MAX_RETRIES=1`, the CLI's own retry knob: one retry after half a second",
			OutageBound:   "the CLI", OutageAttempts: "3", OutageExit: "35 s",
			OutOfQuota: "exit 1 in about 1 s (one request), stdout `Credit balance is too low` (Anthropic's 400 `Your credit balance is too low…`); " +
				"with structured output, an assistant message with `\"error\":\"billing_error\"`",
			OverContext: "exit 1 in about 1 s (one request), stdout `Prompt is too long · the request is ~212345 tokens (limit 200000) but this conversation is only ~2818 tokens — …`",
			OwnRetries: "one retry of its own (peal's `CLAUDE_CODE_MAX_RETRIES=1`), after the server's `retry-after` (up to a minute; a longer one ends it at once) " +
				"or half a second, then `API Error: Request rejected (429) · …` or `API Error: 529 Overloaded. …`; with structured output the retry is a `system/api_retry` event",
			RetryTime: "structured output only: `api_retry`'s `retry_delay_ms` when it is whole seconds (the server's `retry-after`; its own backoff is jittered), " +
				"`rate_limit_event`'s `resetsAt`; a subscription's limit also in text: `You've hit your session limit · resets 2:16am (UTC)`",
			CapExit: "45 s (429, 3 attempts), 43 s (529)",
		},
	})
}

func claudeArgs(c Call) []string {
	args := []string{"-p"}
	if c.Structured {
		args = append(args, "--output-format", "stream-json", "--verbose")
	}
	if ModeOf(c.Phase) == Write {
		return append(args, "--permission-mode", "bypassPermissions")
	}
	return append(args, "--permission-mode", "plan")
}

// claudeSession: peal chooses the id (--session-id takes only a UUID) and
// resumes it with --resume, which also reads a value that is no UUID as a
// session title to search: only a UUID is ever passed. Measured with
// claude 2.1.197.
var claudeSession = &Session{
	Chosen: true,
	Begin:  func(id string) []string { return []string{"--session-id", id} },
	Resume: func(id string) []string { return []string{"--resume", id} },
	ID:     uuidPattern,
	// Its words for an id it never made, a session file that is empty,
	// garbage or gone, and a session of an unrelated folder.
	Lost: []string{"no conversation found with session id"},
	Doc: SessionDoc{
		Learnt: "`session_id` on every stream-json line",
		Lost: "exit 1 in under 1 s, stderr `No conversation found with session ID: <id>` (the same for an empty, garbled or deleted session file, " +
			"and for a session of an unrelated folder; a worktree of the same repository resumes it)",
		Hazards: "`-c`/`--continue` takes the folder's newest session, `--resume` with no value opens a picker and with a value that is no UUID searches " +
			"titles; a `--session-id` used before is refused (`Session ID <id> is already in use.`), so a failed first call's retry takes a new id",
	},
}
