package agent

import (
	"encoding/json"
	"path/filepath"

	"peal/phase"
)

// Gemini CLI (binary `gemini`): non-interactive with the prompt on stdin,
// --skip-trust for a repository it has not seen, plan approval mode for
// read-only calls and yolo for writing calls. Its exit codes name its fatal
// errors.
func init() {
	register(&Kind{
		Name:          "gemini",
		CLI:           "Gemini CLI",
		DefaultCmd:    "gemini",
		Args:          geminiArgs,
		ModelFlag:     "-m",
		Provider:      "google",
		PromptOnStdin: true,
		Failures: Failures{
			Fatal: []string{
				"please set an auth method", "invalid auth method", "api key not valid", "not running in a trusted directory",
				"unknown arguments", "permission_denied",
				// An API error the CLI does not know prints its JSON and
				// status: `_ApiError: {"error":{"code":401,...,"status":
				// "UNAUTHENTICATED"}}`, then `status: 401`.
				`"code":401`, `"code":403`, "unauthenticated", "status: 401", "status: 403",
			},
			// A 404 for the model: `… ModelNotFoundError: <the API's
			// message>` on the line of its error report, then `code: 404`.
			ModelNotFound: []string{"modelnotfounderror", `"status":"not_found"`},
			// Its own words for a quota the API names per day (the CLI's
			// TerminalQuotaError): "You have exhausted your daily quota on
			// this model."
			OutOfQuota: []string{"exhausted your daily quota"},
			RateLimit:  []string{"resource has been exhausted"},
			ExitCodes: map[int]phase.Class{
				41: phase.Fatal, // authentication
				42: phase.Fatal, // bad input
				44: phase.Fatal, // sandbox
				52: phase.Fatal, // configuration
				55: phase.Fatal, // untrusted workspace
			},
			// An API error is printed after the path of the CLI's error
			// report: the quote starts at the error.
			QuoteFrom: []string{"_ApiError:", "ModelNotFoundError:", "TerminalQuotaError:", "RetryableQuotaError:"},
			// The fields of the error object it dumps after the stack.
			Unquoted:  []string{"at ", "status:", "code:", "cause:", "details:", "message:", "retrydelayms:", "reason:"},
			FatalHint: "set GEMINI_API_KEY (or GOOGLE_API_KEY, or Vertex AI's variables) in the job's environment",
			QuotaHint: "enable billing for, or raise the quota of, the Google Cloud project of GEMINI_API_KEY (a daily quota comes back the next day)",
		},
		Events:  geminiEvents,
		Session: geminiSession,
		Auth: Auth{
			Env:       []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA"},
			LoginHint: "set GEMINI_API_KEY in the job's environment",
		},
		Confine: Confinement{
			Folders: []string{"${GEMINI_CLI_HOME:-~}/.gemini"},
			// The skills every agent CLI may share.
			Reads: []string{"~/.agents/skills"},
			Credentials: []string{"${GEMINI_CLI_HOME:-~}/.gemini/oauth_creds.json", "${GEMINI_CLI_HOME:-~}/.gemini/gemini-credentials.json",
				"${GEMINI_CLI_HOME:-~}/.gemini/mcp-oauth-tokens.json", "${GEMINI_CLI_HOME:-~}/.gemini/a2a-oauth-tokens.json"},
			// cloudcode-pa serves a Google login's requests (Code Assist),
			// oauth2 refreshes it.
			Hosts: []string{"generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com", "oauth2.googleapis.com"},
			Env: []string{"GEMINI_*", "GOOGLE_API_KEY", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_GENAI_*",
				"GOOGLE_APPLICATION_CREDENTIALS"},
			BaseURLs: []string{"GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL"},
			Keys: Keys{
				Logins: []Login{
					{Name: "`GEMINI_API_KEY`", Held: true, How: "`GOOGLE_GEMINI_BASE_URL` names peal's endpoint, which sends the key in `x-goog-api-key` (or `Authorization: Bearer` under `GEMINI_API_KEY_AUTH_MECHANISM=bearer`)"},
					{Name: "Vertex AI (`GOOGLE_GENAI_USE_VERTEXAI`, `GOOGLE_API_KEY`, Google Cloud credentials)", How: "cloud credentials, the user's to pass"},
					{Name: "Login with Google (`GOOGLE_GENAI_USE_GCA`, or chosen in `~/.gemini/settings.json`)", How: "kept in its folder (`oauth_creds.json`), which its calls read"},
					{Name: "a key the CLI saved, or one in `~/.gemini/.env`", How: "kept in its folder, which its calls read"},
				},
				Vars: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"},
				Hold: geminiKeys,
			},
			Notes: "measured with 0.61.0: it writes ~/.gemini (projects.json through a renamed temporary file, installation_id, " +
				"`history/`, `tmp/<project>/chats/session-*.jsonl`); without it, exit 1 on `EACCES: permission denied, open " +
				"'~/.gemini/projects.json.<uuid>.tmp'`. Refused without effect on the call: play.googleapis.com (its usage statistics, " +
				"twice a call; `privacy.usageStatisticsEnabled = false` in its settings stops them), and ~/.bashrc. It reads a .env file from " +
				"the work tree up, then ~/.gemini/.env, then ~/.env: a key kept in ~/.env (a file of the home folder, read by allow list) " +
				"belongs in ~/.gemini/.env or the environment. With Vertex AI, its host " +
				"(REGION-aiplatform.googleapis.com) is the user's to allow, and gcloud's credentials in ~/.config/gcloud are a secret: " +
				"GOOGLE_APPLICATION_CREDENTIALS names a file elsewhere",
		},
		VersionArgs: []string{"--version"},
		Notes:       "writing calls pass --approval-mode yolo: every tool call is approved; --skip-trust runs in a folder gemini has not been told to trust",
		Doc: Doc{
			Measured:      "0.61",
			NoCredentials: "exit 41, `Please set an Auth method …` → fatal",
			Unreachable:   "exit 1 after about 19 s (three tries of its own), `exception TypeError: fetch failed sending request` (its last line, `An unexpected critical error occurred:[object Object]`, is never quoted) → network",
			InvalidKey:    "Google answers HTTP 400 `INVALID_ARGUMENT`; exit 1, `_ApiError: {\"error\":{\"code\":400,\"message\":\"API key not valid. Please pass a valid API key.\",\"status\":\"INVALID_ARGUMENT\"}}` → fatal",
			RateLimit:     "`RESOURCE_EXHAUSTED` → rate limit",
			Unauthorized:  "exit 1, `… _ApiError: {\"error\":{\"code\":401,\"message\":\"…\",\"status\":\"UNAUTHENTICATED\"}}`, a stack, `status: 401`, `An unexpected critical error occurred:[object Object]`: `UNAUTHENTICATED`, `\"code\":401` and `status: 401` are fatal",
			Forbidden:     "the same with `\"code\":403`, `PERMISSION_DENIED`, `status: 403`",
			ModelNotFound: "with a model set: exit 1 in about 2.5 s (one request), `Error when talking to Gemini API Full report available at: … ModelNotFoundError: <the API's message>`, a stack, then `code: 404` (never quoted). With no model set, the CLI does not exit: it falls back to its other default model and asks again and again, silently (26 000 requests in 5 minutes), until `idle_timeout_sec` or the phase timeout ends the attempt",
			Outage:        "exit 1 after about 19 s: the CLI retries by itself (3 tries, with backoff), printing `fetch failed` each time; it has no environment variable or flag for its retries (only `general.maxAttempts` in its settings file, which peal leaves to you)",
			OutageBound:   "the CLI", OutageAttempts: "3", OutageExit: "1 min 28 s",
			OutOfQuota: "a quota the API names per day: exit 1 in 2–3 s (one request), `…TerminalQuotaError: You have exhausted your daily quota on this model.`; " +
				"a 429 that names billing and gives no time to retry: `RetryableQuotaError: You exceeded your current quota, please check your plan and billing details. …` after its ten tries (3 min 48 s). " +
				"With no model set, a quota it does not retry makes it fall back to its other default model and ask again and again, silently (14 000 requests in 40 s), until the phase timeout: set `model`",
			OverContext: "exit 1 in about 2.5 s (one request), `…_ApiError: {\"error\":{\"code\":400,\"message\":\"The input token count (1212345) exceeds the maximum number of tokens allowed (1048576).\",…}}`, " +
				"a stack, then `status: 400` (never quoted)",
			OwnRetries: "ten tries of its own (no flag or variable caps them), each shown: `Attempt 1 failed: <the API's message>` and `Suggested retry after 1s.. Retrying after 5915ms...`, " +
				"waits of 5 s doubling to 30 s: over 5 minutes against a 429 that never lifts, 3 min 26 s against a 529; peal ends them at what is left of `rate_limit_max_wait_sec`",
			RetryTime: "Google's `Please retry in 26s.` and its `Suggested retry after 26s.`",
			CapExit:   "41 s (429 and 529, 1 attempt; more than 6 minutes before peal ended its retries)",
		},
	})
}

func geminiArgs(c Call) []string {
	args := []string{"--skip-trust"}
	if ModeOf(c.Phase) == Write {
		args = append(args, "--approval-mode", "yolo")
	} else {
		args = append(args, "--approval-mode", "plan")
	}
	if c.Structured {
		args = append(args, "--output-format", "stream-json")
	}
	return args
}

// geminiEvents is `gemini --output-format stream-json`.
var geminiEvents = &Events{
	Parse:  parseGeminiEvents,
	Answer: "the assistant `message` deltas, joined",
	End:    "`{\"type\":\"result\"}`",
	Error:  "a result with `status` other than `success`; `error` events of severity error",
	Usage:  "`stats.input_tokens` (cached included), `stats.cached`, `stats.output_tokens`",
}

// parseGeminiEvents reads one line of `--output-format stream-json`:
// the session's id (init), assistant message deltas, error events, and the
// final result with status and token stats.
func parseGeminiEvents(line []byte) (Event, bool) {
	var e struct {
		Type     string `json:"type"`
		Session  string `json:"session_id"`
		Role     string `json:"role"`
		Content  string `json:"content"`
		Delta    bool   `json:"delta"`
		Status   string `json:"status"`
		Severity string `json:"severity"`
		Message  string `json:"message"`
		Error    any    `json:"error"`
		Stats    struct {
			Input  int64 `json:"input_tokens"`
			Cached int64 `json:"cached"`
			Output int64 `json:"output_tokens"`
		} `json:"stats"`
	}
	if !decodeLine(line, &e) || e.Type == "" {
		return Event{}, false
	}
	switch e.Type {
	case "init":
		return Event{Session: e.Session}, true
	case "message":
		if e.Role != "assistant" {
			return Event{}, true
		}
		return Event{Text: e.Content, Delta: e.Delta}, true
	case "result":
		ev := Event{Final: true, Usage: Usage{InputTokens: e.Stats.Input, OutputTokens: e.Stats.Output, CachedTokens: e.Stats.Cached}}
		if e.Status != "" && e.Status != "success" {
			ev.Error = nonEmpty(errorText(e.Error), "the result reports "+e.Status)
		}
		return ev, true
	case "error":
		if e.Severity == "warning" {
			return Event{}, true
		}
		return Event{Error: nonEmpty(e.Message, errorText(e.Error))}, true
	}
	return Event{}, true
}

// geminiSession: peal chooses the id (--session-id takes any string; peal
// gives a UUID) and resumes it with --resume, which also takes `latest`, an
// index or "" (the latest session): only a UUID is ever passed. --resume
// and --session-id are mutually exclusive. Measured with gemini 0.61.0.
var geminiSession = &Session{
	Chosen: true,
	Begin:  func(id string) []string { return []string{"--session-id", id} },
	Resume: func(id string) []string { return []string{"--resume", id} },
	ID:     uuidPattern,
	// "Error resuming session: Invalid session identifier …" for an id it
	// does not know, "… No previous sessions found for this project." for
	// a folder without sessions or a session file that is gone; both exit
	// 42, its code for bad input.
	Lost:     []string{"error resuming session"},
	LostExit: []int{42},
	Doc: SessionDoc{
		Learnt: "`session_id` of `init`",
		Lost: "exit 42 in 1.5 s, stderr `Error resuming session: Invalid session identifier \"<id>\".`; in another folder (a worktree too) or with its " +
			"session file empty, garbled or gone, `Error resuming session: No previous sessions found for this project.`",
		Hazards: "`--resume latest`, `--resume <index>` and `--resume \"\"` take the latest session; a `--session-id` used before is refused " +
			"(exit 42, `Session ID \"<id>\" already exists`), and a first call that failed leaves its id dead both ways, so its retry takes a new id",
	},
}

// geminiKeys is the Gemini CLI's hold: GEMINI_API_KEY, unless its settings
// choose another way to log in.
func geminiKeys(m Machine) Hold {
	home, ok := ExpandPath("${GEMINI_CLI_HOME:-~}/.gemini/settings.json", m.Home, m.Getenv)
	if ok {
		var s struct {
			Security struct {
				Auth struct {
					SelectedType string `json:"selectedType"`
				} `json:"auth"`
			} `json:"security"`
		}
		if data, err := m.ReadFile(filepath.Clean(home)); err == nil && json.Unmarshal(data, &s) == nil {
			if t := s.Security.Auth.SelectedType; t != "" && t != "gemini-api-key" && t != "gateway" {
				return Hold{Login: t, Why: "its settings choose the login " + t + ", kept in its folder"}
			}
		}
	}
	return envKeys{api: GoogleAPI, keyVars: []string{"GEMINI_API_KEY"}, unheld: []string{"GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA"},
		reach: map[string][]string{"GOOGLE_GENAI_USE_VERTEXAI": {"GOOGLE_API_KEY"}}, baseVar: "GOOGLE_GEMINI_BASE_URL"}.hold(m)
}
