package fakes

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

// The fake agent imitates each agent CLI when it is started under that CLI's
// name (a symlink named claude, codex, gemini, opencode, or agent for the
// Cursor CLI): it checks its argv the way the CLI does, reads the prompt
// where the CLI does, emits the CLI's events with structured output, and
// prints the CLI's own failure messages, word for word. Each CLI is one
// value of CLIs, keyed by peal's name for its kind.

// CLI is how the fake agent imitates one agent CLI.
type CLI struct {
	// Names are the program names the fake answers to as this CLI.
	Names []string
	// Sub is a subcommand every call starts with ("exec", "run"); "" for
	// none. Root are the options with a value the CLI takes before it
	// (codex's -c); several of one are kept one a line.
	Sub  string
	Root []string
	// Values and Bools are the options the CLI accepts, with and without a
	// value. Anything else starting with '-' is a usage error: Usage is the
	// CLI's message (on stderr) and exit code for it.
	Values, Bools []string
	Usage         func(arg string) (string, int)
	// ModelFlag names the model; DefaultModel is the model the CLI asks for
	// without it, as measured ("" when not measured).
	ModelFlag, DefaultModel string
	// Structured are the options that ask for the event stream, Writes those
	// that let the agent edit and run commands unattended: "opt" (given) or
	// "opt=value"; any one is enough.
	Structured, Writes []string
	// Status is the CLI's login status command: its argv, and what it
	// prints with a stored session and without (nil: it has none).
	Status *Status
	// Refuse is what the CLI checks before it works, on the call's options
	// and the environment: the refusal it prints, or nil.
	Refuse func(a Args) *Failure
	// RunDenied is what the CLI prints for a command it may not run, the
	// command in place of %s.
	RunDenied string
	// Events are the CLI's events for an answer, or for the error the
	// outcome reports (Outcome.EventError), in session: after the line
	// that names the session (SessionFlags.Line), which comes first.
	Events func(text string, out Outcome, session string) []any
	// Session is how the CLI begins and resumes sessions.
	Session *SessionFlags
	// Failures are the CLI's canned failures, by name (FailNoCredentials,
	// ...). In a text, {model} stands for the model the call asked for.
	Failures map[string]Failure
}

// Status is a CLI's login status command.
type Status struct {
	Argv []string
	// In and Out are what it prints with a stored session and without.
	In, Out Failure
}

// Args are a call's options and positional arguments, as the CLI reads them.
type Args struct {
	Opts       map[string]string // option → value ("" for one without)
	Positional []string
}

// Has reports whether the option was given.
func (a Args) Has(opt string) bool { _, ok := a.Opts[opt]; return ok }

// Any reports whether one of the options ("opt" or "opt=value") was given.
func (a Args) Any(opts []string) bool {
	for _, o := range opts {
		name, value, withValue := strings.Cut(o, "=")
		if v, ok := a.Opts[name]; ok && (!withValue || v == value) {
			return true
		}
	}
	return false
}

// Parse reads argv as the CLI does; a usage error is the failure it prints.
// A word that resumes a session (SessionFlags.ResumeSub) is a positional
// argument, and so is the id after it.
func (c *CLI) Parse(argv []string) (Args, *Failure) {
	a := Args{Opts: map[string]string{}}
	usage := func(arg string) (Args, *Failure) {
		text, code := c.Usage(arg)
		return a, &Failure{Stderr: true, Text: text, Exit: code}
	}
	for len(argv) > 1 && slices.Contains(c.Root, argv[0]) {
		v := argv[1]
		if prev, ok := a.Opts[argv[0]]; ok {
			v = prev + "\n" + v
		}
		a.Opts[argv[0]] = v
		argv = argv[2:]
	}
	if c.Sub != "" {
		if len(argv) == 0 || argv[0] != c.Sub {
			first := ""
			if len(argv) > 0 {
				first = argv[0]
			}
			return usage(first)
		}
		argv = argv[1:]
	}
	resuming := false
	for i := 0; i < len(argv); i++ {
		arg := argv[i]
		switch {
		case resuming && slices.Contains(c.Session.NotAfter, arg):
			return usage(arg)
		case c.Session != nil && c.Session.ResumeSub != "" && arg == c.Session.ResumeSub && len(a.Positional) == 0:
			resuming = true
			a.Positional = append(a.Positional, arg)
		case arg == "-" || !strings.HasPrefix(arg, "-"):
			a.Positional = append(a.Positional, arg)
		case slices.Contains(c.Bools, arg):
			a.Opts[arg] = ""
		case slices.Contains(c.Values, arg) && i+1 < len(argv):
			a.Opts[arg] = argv[i+1]
			i++
		default:
			return usage(arg)
		}
	}
	return a, nil
}

// Model is the model the call asks for.
func (c *CLI) Model(a Args) string {
	if m, ok := a.Opts[c.ModelFlag]; ok {
		return m
	}
	return c.DefaultModel
}

// KindOf is the kind of CLI the fake imitates under a program name; "" for
// the plain fake.
func KindOf(program string) string {
	for kind, c := range CLIs {
		if slices.Contains(c.Names, program) {
			return kind
		}
	}
	return ""
}

// SessionEnv set to "1" makes a fake CLI report a stored login session
// (its status command says logged in; the Cursor fake in print mode still
// wants CURSOR_API_KEY, as some versions of the real CLI do).
const SessionEnv = "FAKE_AGENT_SESSION"

// Canned failures an Outcome can name in its Failure field.
const (
	FailNoCredentials     = "no_credentials"
	FailConnectionRefused = "connection_refused"
	FailInvalidKey        = "invalid_key"
	FailUnauthorized      = "unauthorized"    // the API answers 401
	FailForbidden         = "forbidden"       // the API answers 403
	FailModelNotFound     = "model_not_found" // the API answers 404 for the model
	FailRateLimit         = "rate_limit"
	FailOverloaded        = "overloaded"
	// The API answers 429 with a Retry-After of 7 s: what the CLI shows of
	// it after its own retries.
	FailRetryAfter = "retry_after"
	// The CLI retries a rate limit by itself and shows each refusal, for
	// ever (the API's 429 never lifts).
	FailRateLimitRetries = "rate_limit_retries"
	FailOutOfCredit      = "out_of_credit" // the account is out of quota or credit
	FailOverContext      = "over_context"  // the prompt is larger than the model's context window
	FailConfigRace       = "config_race"
	FailStoreRace        = "store_race" // two first starts race to set up the CLI's database
	FailRoot             = "root"
)

// Failure is how a CLI shows one canned failure.
type Failure struct {
	Stderr bool   // on stderr (else stdout)
	Text   string // printed as is, with a final newline
	// Events, when set, is printed instead of Text when the call asks for
	// the CLI's event stream: its events, one JSON object a line.
	Events string
	Exit   int
	// Forever: the CLI never exits; it repeats Repeat (when set) on the
	// same stream.
	Forever bool
	Repeat  string
}

// MissingModelMessage is the message of the API's 404 for a model it does
// not know, in the fakes and in the mock API of the integration tests; the
// CLIs that relay the API's words print it.
const MissingModelMessage = "model: {model} was not found"

// CLIs are the agent CLIs the fake imitates, by kind, with the messages of
// the real CLIs as measured (see docs/agents.md).
var CLIs = map[string]*CLI{
	"cursor": {
		Names:      []string{"agent", "cursor-agent"},
		Values:     []string{"--workspace", "--output-format", "--sandbox", "--model", "--resume"},
		Bools:      []string{"--print", "--plan", "--trust", "--force", "-f", "--yolo"},
		Usage:      func(a string) (string, int) { return fmt.Sprintf("error: unknown option '%s'", a), 1 },
		ModelFlag:  "--model",
		Structured: []string{"--output-format=stream-json"},
		Writes:     []string{"--force", "-f", "--yolo"},
		Status:     &Status{Argv: []string{"status"}, In: Failure{Text: "✓ Logged in as fake@example.com"}, Out: Failure{Text: "Not logged in"}},
		Refuse: func(a Args) *Failure {
			// Print mode wants the key: a stored session is not enough.
			if os.Getenv("CURSOR_API_KEY") == "" {
				return &Failure{Text: CursorLoginPrompt, Forever: true}
			}
			if !a.Has("--trust") && !a.Any([]string{"--force", "-f", "--yolo"}) {
				return &Failure{Text: CursorTrustRequired}
			}
			return nil
		},
		RunDenied: "Command denied (requires approval; pass --force to allow): %s",
		Events:    streamJSONEvents,
		// Not measured: the fake's words for a chat it cannot resume are its
		// own, and peal does not know them.
		Session: &SessionFlags{Resume: "--resume", NewID: uuid4, Line: streamJSONInit,
			Lost: func(id string) Failure {
				return Failure{Stderr: true, Exit: 1, Text: "Error: could not load chat " + id}
			}},
		Failures: map[string]Failure{
			FailInvalidKey:        {Text: "Invalid Cursor API key. Check the value of CURSOR_API_KEY.", Exit: 0},
			FailRateLimit:         {Text: "You've hit your usage limit. Try again in 2 minutes, or upgrade your plan.", Exit: 0},
			FailConnectionRefused: {Stderr: true, Exit: 1, Text: "ConnectError: [unavailable] connect ECONNREFUSED 127.0.0.1:443"},
			FailConfigRace: {Stderr: true, Exit: 1,
				Text: "Error: ENOENT: no such file or directory, rename '/root/.cursor/cli-config.json.tmp' -> '/root/.cursor/cli-config.json'"},
		},
	},
	"claude": {
		Names:     []string{"claude"},
		Values:    []string{"--output-format", "--permission-mode", "--model", "--session-id", "--resume"},
		Bools:     []string{"-p", "--print", "--verbose"},
		Usage:     func(a string) (string, int) { return fmt.Sprintf("error: unknown option '%s'", a), 1 },
		ModelFlag: "--model", DefaultModel: "claude-opus-4-8[1m]",
		Structured: []string{"--output-format=stream-json"},
		Writes:     []string{"--permission-mode=bypassPermissions"},
		Status: &Status{Argv: []string{"auth", "status"},
			In:  Failure{Text: "{\n  \"loggedIn\": true,\n  \"authMethod\": \"none\"\n}"},
			Out: Failure{Text: "{\n  \"loggedIn\": false,\n  \"authMethod\": \"none\"\n}", Exit: 1}},
		Refuse: func(a Args) *Failure {
			if a.Any([]string{"--output-format=stream-json"}) && !a.Has("--verbose") {
				return &Failure{Stderr: true, Text: "Error: When using --print, --output-format=stream-json requires --verbose", Exit: 1}
			}
			if a.Has("--resume") && a.Has("--session-id") {
				return &Failure{Stderr: true, Text: "Error: --session-id can only be used with --continue or --resume if --fork-session is also specified.", Exit: 1}
			}
			return nil
		},
		RunDenied: "Permission to run %s was denied.",
		Events:    streamJSONEvents,
		// Measured with claude 2.1.197.
		Session: &SessionFlags{Begin: "--session-id", Resume: "--resume", NewID: uuid4, Line: streamJSONInit, PerFolder: true,
			Lost: func(id string) Failure {
				msg := "No conversation found with session ID: " + id
				res, _ := json.Marshal(map[string]any{"type": "result", "subtype": "error_during_execution", "is_error": true, "session_id": uuid4(), "errors": []string{msg}})
				return Failure{Stderr: true, Exit: 1, Text: msg, Events: string(res)}
			},
			Taken: func(id string) Failure {
				return Failure{Stderr: true, Exit: 1, Text: "Error: Session ID " + id + " is already in use."}
			}},
		Failures: map[string]Failure{
			FailNoCredentials:     {Text: "Not logged in · Please run /login", Exit: 1},
			FailConnectionRefused: {Text: "API Error: Unable to connect to API (ConnectionRefused)", Exit: 1},
			FailInvalidKey:        {Text: "Invalid API key · Fix external API key", Exit: 1},
			FailRateLimit:         {Text: claudeRateLimited, Exit: 1},
			FailOverloaded:        {Text: "API Error: Repeated 529 Overloaded errors", Exit: 1},
			FailRoot:              {Stderr: true, Text: "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons", Exit: 1},
			FailUnauthorized:      {Text: "Invalid API key · Fix external API key", Exit: 1},
			FailForbidden:         {Text: "Failed to authenticate. API Error: 403 Your API key does not have permission to use the specified resource.", Exit: 1},
			FailModelNotFound: {Exit: 1,
				Text: "There's an issue with the selected model ({model}). It may not exist or you may not have access to it. Run --model to pick a different model."},
			// Measured with claude 2.1.197 against the mock API's refusals.
			FailOutOfCredit: {Exit: 1, Text: "Credit balance is too low",
				Events: claudeAPIError("Credit balance is too low", "billing_error", 400)},
			FailOverContext: {Exit: 1, Text: "Prompt is too long · the request is ~212345 tokens (limit 200000) but this conversation is only ~2818 tokens — " +
				"the rest is system prompt, tool definitions, and attachment content. A single-exchange conversation cannot be compacted; " +
				"reduce attached files/tools or start with less context."},
			// Its one retry of its own (peal's CLAUDE_CODE_MAX_RETRIES=1)
			// waits the server's retry-after; only its events show it.
			FailRetryAfter: {Exit: 1, Text: claudeRateLimited,
				Events: `{"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":7000,"error_status":429,"error":"rate_limit"}` + "\n" +
					claudeAPIError(claudeRateLimited, "rate_limit", 429)},
		},
	},
	"codex": {
		Names: []string{"codex"},
		Sub:   "exec",
		// -c key=value sets a value of its configuration (peal's model
		// endpoint as a provider's base URL).
		Root:   []string{"-c"},
		Values: []string{"-C", "-s", "-m"},
		Bools:  []string{"--skip-git-repo-check", "--json", "--dangerously-bypass-approvals-and-sandbox"},
		Usage: func(a string) (string, int) {
			return fmt.Sprintf("error: unexpected argument '%s' found\n\nUsage: codex exec [OPTIONS] [PROMPT]", a), 2
		},
		ModelFlag: "-m", DefaultModel: "gpt-6.1-sol",
		Structured: []string{"--json"},
		Writes:     []string{"--dangerously-bypass-approvals-and-sandbox"},
		Status: &Status{Argv: []string{"login", "status"},
			In: Failure{Stderr: true, Text: "Logged in using ChatGPT"}, Out: Failure{Stderr: true, Text: "Not logged in", Exit: 1}},
		RunDenied: "Permission to run %s was denied.",
		Events: func(text string, out Outcome, _ string) []any {
			events := []any{map[string]any{"type": "turn.started"}}
			if e := out.EventError; e != "" {
				return append(events, map[string]any{"type": "error", "message": e}, map[string]any{"type": "turn.failed", "error": map[string]any{"message": e}})
			}
			return append(events, map[string]any{"type": "item.completed", "item": map[string]any{"type": "agent_message", "text": text}},
				map[string]any{"type": "turn.completed", "usage": map[string]any{"input_tokens": out.InputTokens, "cached_input_tokens": out.CachedTokens, "output_tokens": out.OutputTokens}})
		},
		// Measured with codex 0.171.0: `resume <id>` after exec's options;
		// a thread resumes in any folder; usage counts the whole thread.
		Session: &SessionFlags{ResumeSub: "resume", NotAfter: []string{"-C", "-s"}, NewID: uuid4, Cumulative: true,
			Line: func(id string) any { return map[string]any{"type": "thread.started", "thread_id": id} },
			Lost: func(id string) Failure {
				return Failure{Stderr: true, Exit: 1, Text: "Error: thread/resume: thread/resume failed: no rollout found for thread id " + id + " (code -32600)"}
			}},
		Failures: map[string]Failure{
			FailNoCredentials: {Stderr: true, Forever: true,
				Text:   "ERROR: Reconnecting... 1/5\nwarning: Falling back from WebSockets to HTTPS transport. stream disconnected before completion: failed to lookup address information: Name does not resolve",
				Repeat: "ERROR: Reconnecting... waiting for network"},
			FailConnectionRefused: {Stderr: true, Forever: true,
				Text:   "ERROR: Reconnecting... 1/5\nwarning: Falling back from WebSockets to HTTPS transport. stream disconnected before completion: Connection refused (os error 111)",
				Repeat: "ERROR: Reconnecting... waiting for network"},
			FailInvalidKey: {Stderr: true, Text: "ERROR: unexpected status 401 Unauthorized: Incorrect API key provided", Exit: 1},
			FailRateLimit:  {Stderr: true, Text: "ERROR: exceeded retry limit, last status: 429 Too Many Requests", Exit: 1},
			FailUnauthorized: {Stderr: true, Exit: 1,
				Text: "ERROR: unexpected status 401 Unauthorized: invalid x-api-key, url: http://127.0.0.1:46631/v1/responses"},
			FailForbidden: {Stderr: true, Exit: 1,
				Text: "ERROR: unexpected status 403 Forbidden: Forbidden, url: http://127.0.0.1:40857/v1/responses"},
			// The warning comes with any model codex has no metadata for;
			// the API's message follows, twice (codex 0.169).
			FailModelNotFound: {Stderr: true, Exit: 1,
				Text: "warning: Model metadata for `{model}` not found. Defaulting to fallback metadata; this can degrade performance and cause issues.\n" +
					"ERROR: " + MissingModelMessage + "\nERROR: " + MissingModelMessage},
			// Measured with codex 0.171.0: OpenAI's insufficient_quota and
			// context_length_exceeded, each said twice; a failed turn ends
			// with its footer.
			FailOutOfCredit: {Stderr: true, Exit: 1,
				Text: "ERROR: Quota exceeded. Check your plan and billing details.\nERROR: Quota exceeded. Check your plan and billing details."},
			FailOverContext: {Stderr: true, Exit: 1, Text: "ERROR: " + codexOverContext + "\nERROR: " + codexOverContext + "\ntokens used\n0"},
			// Five retries of its own, each after the Retry-After; its lines
			// say nothing of why, or how long.
			FailRetryAfter: {Stderr: true, Exit: 1,
				Text: "ERROR: Reconnecting... 1/5\nERROR: Reconnecting... 2/5\nERROR: Reconnecting... 3/5\nERROR: Reconnecting... 4/5\nERROR: Reconnecting... 5/5\n" +
					"ERROR: exceeded retry limit, last status: 429 Too Many Requests\nERROR: exceeded retry limit, last status: 429 Too Many Requests"},
		},
	},
	"gemini": {
		Names:     []string{"gemini"},
		Values:    []string{"--approval-mode", "--output-format", "-m", "-p", "--session-id", "--resume"},
		Bools:     []string{"--skip-trust"},
		Usage:     func(a string) (string, int) { return "Unknown arguments: " + strings.TrimLeft(a, "-"), 1 },
		ModelFlag: "-m", DefaultModel: "gemini-3.1-pro-preview-customtools",
		Structured: []string{"--output-format=stream-json"},
		Writes:     []string{"--approval-mode=yolo"},
		Refuse: func(a Args) *Failure {
			if !a.Has("--skip-trust") {
				return &Failure{Stderr: true, Exit: 55,
					Text: "Gemini CLI is not running in a trusted directory. To proceed, either use `--skip-trust`, set the `GEMINI_CLI_TRUST_WORKSPACE=true` environment variable, or trust this directory in interactive mode."}
			}
			if a.Has("--resume") && a.Has("--session-id") {
				return &Failure{Stderr: true, Exit: 1, Text: "The flags --resume, --session-id, and --session-file are mutually exclusive. Please provide only one."}
			}
			return nil
		},
		RunDenied: "Permission to run %s was denied.",
		// Measured with gemini 0.61.0: exit 42 for a session it cannot
		// resume or an id it has.
		Session: &SessionFlags{Begin: "--session-id", Resume: "--resume", NewID: uuid4, PerFolder: true,
			Line: func(id string) any {
				return map[string]any{"type": "init", "session_id": id, "model": "gemini-2.5-flash"}
			},
			Lost: func(id string) Failure {
				return Failure{Stderr: true, Exit: 42, Text: "Error resuming session: Invalid session identifier \"" + id + "\".\n" +
					"  Searched for sessions in /root/.gemini/tmp/repo/chats.\n" +
					"  Use --list-sessions to see available sessions, then use --resume {number}, --resume {uuid}, or --resume latest."}
			},
			Taken: func(id string) Failure {
				return Failure{Stderr: true, Exit: 42, Text: "Error starting session: Session ID \"" + id + "\" already exists. Use --resume to resume it, or provide a different ID."}
			}},
		Events: func(text string, out Outcome, _ string) []any {
			var events []any
			if e := out.EventError; e != "" {
				return append(events, map[string]any{"type": "result", "status": "error", "error": map[string]any{"type": "Error", "message": e}})
			}
			return append(events, map[string]any{"type": "message", "role": "assistant", "content": text, "delta": true},
				map[string]any{"type": "result", "status": "success", "stats": map[string]any{"input_tokens": out.InputTokens, "cached": out.CachedTokens, "output_tokens": out.OutputTokens}})
		},
		Failures: map[string]Failure{
			FailNoCredentials: {Stderr: true, Exit: 41,
				Text: "Please set an Auth method in your /root/.gemini/settings.json or specify one of the following environment variables before running: GEMINI_API_KEY, GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_GENAI_USE_GCA"},
			FailConnectionRefused: {Stderr: true, Exit: 1,
				Text: "exception TypeError: fetch failed sending request\nAn unexpected critical error occurred:[object Object]"},
			FailRateLimit: {Stderr: true, Exit: 1, Text: "[API Error: Resource has been exhausted (e.g. check quota). RESOURCE_EXHAUSTED]"},
			// Measured with gemini 0.61.0: a quota the API names per day is
			// the CLI's TerminalQuotaError, at once.
			FailOutOfCredit: {Stderr: true, Exit: 1, Text: geminiQuotaError("TerminalQuotaError: You have exhausted your daily quota on this model.",
				"'You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\\n' +\n"+
					"      '* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 250, model: {model}'",
				"undefined")},
			FailOverContext: {Stderr: true, Exit: 1, Text: geminiAPIError(
				`_ApiError: {"error":{"code":400,"message":"The input token count (1212345) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`, "status: 400")},
			// It retries a 429 by itself, ten tries, each after the server's
			// retry time at least, and says so; then the error.
			FailRetryAfter: {Stderr: true, Exit: 1, Text: geminiRetries(9, "Resource has been exhausted (e.g. check quota).\nSuggested retry after 7s.") +
				"Attempt 10 failed: Resource has been exhausted (e.g. check quota).\nSuggested retry after 7s.. Max attempts reached\n" +
				geminiQuotaError("RetryableQuotaError: Resource has been exhausted (e.g. check quota).\nSuggested retry after 7s.", "'Resource has been exhausted (e.g. check quota).'", "7000")},
			// A per-minute quota that never lifts: its retries go on.
			FailRateLimitRetries: {Stderr: true, Forever: true,
				Text:   geminiRetries(1, geminiMinuteQuota),
				Repeat: strings.TrimSuffix(geminiRetries(1, geminiMinuteQuota), "\n")},
			// An API error the CLI has no message of its own for: the error's
			// JSON, a stack, the status, then a critical error.
			FailUnauthorized: {Stderr: true, Exit: 1, Text: geminiAPIError(`_ApiError: {"error":{"code":401,"message":"invalid x-api-key","status":"UNAUTHENTICATED"}}`, "status: 401")},
			FailForbidden:    {Stderr: true, Exit: 1, Text: geminiAPIError(`_ApiError: {"error":{"code":403,"message":"Permission denied on resource.","status":"PERMISSION_DENIED"}}`, "status: 403")},
			// Google answers a wrong key with 400 INVALID_ARGUMENT.
			FailInvalidKey: {Stderr: true, Exit: 1, Text: geminiAPIError(`_ApiError: {"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}`, "status: 400")},
			// A 404 for the model: the CLI's own error class and the API's
			// message, then the code.
			FailModelNotFound: {Stderr: true, Exit: 1, Text: geminiAPIError("ModelNotFoundError: "+MissingModelMessage, "code: 404")},
		},
	},
	"opencode": {
		Names:     []string{"opencode"},
		Sub:       "run",
		Values:    []string{"--dir", "--agent", "--format", "-m", "--session"},
		Bools:     []string{"--auto"},
		Usage:     func(a string) (string, int) { return "Unknown arguments: " + strings.TrimLeft(a, "-"), 1 },
		ModelFlag: "-m", DefaultModel: "opencode/big-pickle",
		Structured: []string{"--format=json"},
		Writes:     []string{"--auto"},
		RunDenied:  "Permission to run %s was denied.",
		Events: func(text string, out Outcome, session string) []any {
			if e := out.EventError; e != "" {
				return []any{map[string]any{"type": "error", "sessionID": session, "error": map[string]any{"name": "APIError", "data": map[string]any{"message": e}}}}
			}
			return []any{map[string]any{"type": "text", "sessionID": session, "part": map[string]any{"type": "text", "text": text}},
				map[string]any{"type": "step_finish", "sessionID": session, "part": map[string]any{"cost": out.CostUSD,
					"tokens": map[string]any{"input": out.InputTokens - out.CachedTokens, "output": out.OutputTokens, "cache": map[string]any{"read": out.CachedTokens}}}}}
		},
		// Measured with opencode 1.18.33: a session resumed in another
		// folder never exits.
		Session: &SessionFlags{Resume: "--session", NewID: opencodeID, Hangs: true,
			Line: func(id string) any {
				return map[string]any{"type": "step_start", "sessionID": id, "part": map[string]any{}}
			},
			Lost: func(string) Failure {
				return Failure{Stderr: true, Exit: 1, Text: "\x1b[91m\x1b[1mError: \x1b[0mSession not found"}
			}},
		Failures: map[string]Failure{
			FailNoCredentials:     {Stderr: true, Exit: 1, Text: "\x1b[91m\x1b[1mError: \x1b[0mCannot connect to API: Unable to connect. Is the computer able to access the url?"},
			FailConnectionRefused: {Stderr: true, Exit: 1, Text: "\x1b[91m\x1b[1mError: \x1b[0mCannot connect to API: Unable to connect. Is the computer able to access the url?"},
			FailInvalidKey:        {Stderr: true, Exit: 1, Text: "\x1b[91m\x1b[1mError: \x1b[0minvalid x-api-key"},
			FailRateLimit:         {Stderr: true, Exit: 1, Text: "\x1b[91m\x1b[1mError: \x1b[0mRate limit exceeded, please try again in 20 seconds"},
			// Measured with opencode 1.18.33 and an OpenAI-compatible
			// provider: it retries a 429 silently (nine requests; over a
			// minute without a Retry-After), then relays the API's words.
			FailOutOfCredit: {Stderr: true, Exit: 1,
				Text: "\x1b[0m\n> plan · {model}\n\x1b[0m\n\x1b[91m\x1b[1mError: \x1b[0m" +
					"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."},
			FailOverContext: {Stderr: true, Exit: 1, Text: "\x1b[91m\x1b[1mError: \x1b[0m" + opencodeOverContext + "\n\x1b[91m\x1b[1mError: \x1b[0m" + opencodeOverContext},
			FailRetryAfter:  {Stderr: true, Exit: 1, Text: "\x1b[91m\x1b[1mError: \x1b[0mRate limit reached for requests. Please try again in 7s."},
			FailUnauthorized: {Stderr: true, Exit: 1,
				Text: "\x1b[91m\x1b[1mError: \x1b[0mIncorrect API key provided: sk-te**. You can find your API key at https://platform.openai.com/account/api-keys."},
			FailForbidden: {Stderr: true, Exit: 1,
				Text: "\x1b[91m\x1b[1mError: \x1b[0mForbidden: {\"error\":{\"code\":null,\"message\":\"Forbidden\",\"param\":null,\"type\":\"server_error\"}}"},
			// The model's name without its provider, then the API's message.
			FailModelNotFound: {Stderr: true, Exit: 1,
				Text: "\x1b[0m\n> build · {model}\n\x1b[0m\n\x1b[91m\x1b[1mError: \x1b[0m" + MissingModelMessage},
			// Two first starts in one data folder (a parallel block on a
			// fresh machine) both create opencode's tables (opencode 1.18).
			FailStoreRace: {Stderr: true, Exit: 1,
				Text: "\x1b[91m\x1b[1mError: \x1b[0mUnexpected error\n\nFailed query: \n        CREATE TABLE `workspace` (\n          `id` text PRIMARY KEY,\n" +
					"          `project_id` text NOT NULL,\n          CONSTRAINT `fk_workspace_project_id_project_id_fk` FOREIGN KEY (`project_id`) REFERENCES `project`(`id`) ON DELETE CASCADE\n" +
					"        );\n      \nparams: "},
		},
	},
}

// The measured words of some refusals.
const (
	claudeRateLimited   = "API Error: Request rejected (429) · Number of request tokens has exceeded your per-minute rate limit"
	codexOverContext    = "Codex ran out of room in the model's context window. Start a new thread or clear earlier history before retrying."
	opencodeOverContext = "This model's maximum context length is 200000 tokens. However, your messages resulted in 212345 tokens. Please reduce the length of the messages."
	geminiMinuteQuota   = "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n" +
		"* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 10, model: {model}\n" +
		"Please retry in 1s.\nSuggested retry after 1s."
)

// claudeAPIError is how Claude Code's stream-json reports an API error: an
// assistant message of its own that names the error, then a failed result.
func claudeAPIError(text, kind string, status int) string {
	msg, _ := json.Marshal(map[string]any{"type": "assistant", "error": kind,
		"message": map[string]any{"model": "<synthetic>", "role": "assistant", "content": []any{map[string]any{"type": "text", "text": text}}}})
	result, _ := json.Marshal(map[string]any{"type": "result", "subtype": "success", "is_error": true, "api_error_status": status, "result": text})
	return string(msg) + "\n" + string(result)
}

// geminiRetries are the Gemini CLI's lines for n tries that failed with a
// quota it retries by itself (its RetryableQuotaError).
func geminiRetries(n int, msg string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "Attempt %d failed: %s. Retrying after %dms...\n", i, msg, 7000+i*211)
	}
	return b.String()
}

// geminiQuotaError is how the Gemini CLI reports a quota error it gives up
// on (measured with gemini 0.61.0): the path of its error report and the
// error, a stack, and the error's cause with the API's message.
func geminiQuotaError(err, message, delayMS string) string {
	return "Error when talking to Gemini API Full report available at: /tmp/gemini-client-error-Turn.run-sendMessageStream-2026-11-27T01-00-02-898Z.json " + err + "\n" +
		"    at classifyGoogleError (file:///usr/lib/node_modules/@google/gemini-cli/bundle/chunk-JDPZ4CE3.js:307344:16)\n" +
		"    at retryWithBackoff (file:///usr/lib/node_modules/@google/gemini-cli/bundle/chunk-JDPZ4CE3.js:308062:29) {\n" +
		"  cause: {\n    code: 429,\n    message: " + message + ",\n    details: [ [Object], [Object] ]\n  },\n" +
		"  retryDelayMs: " + delayMS + ",\n  reason: undefined,\n  status: 429\n}\n" +
		"An unexpected critical error occurred:[object Object]"
}

// streamJSONEvents are Claude Code's stream-json events, which the Cursor
// CLI's follow: every line names the session. The prompt's tokens are
// split as Claude Code splits them: uncached, then read from the cache.
func streamJSONEvents(text string, out Outcome, session string) []any {
	result := map[string]any{"type": "result", "subtype": "success", "is_error": out.EventError != "", "result": text, "total_cost_usd": out.CostUSD,
		"session_id": session, "usage": map[string]any{"input_tokens": out.InputTokens - out.CachedTokens, "cache_read_input_tokens": out.CachedTokens, "output_tokens": out.OutputTokens}}
	if out.EventError != "" {
		result["result"] = out.EventError
	}
	return []any{map[string]any{"type": "assistant", "session_id": session, "message": map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}},
		result}
}

// streamJSONInit is the first line of Claude Code's stream-json (and the
// Cursor CLI's): system/init, naming the session.
func streamJSONInit(id string) any {
	return map[string]any{"type": "system", "subtype": "init", "session_id": id}
}

// geminiAPIError is how the Gemini CLI reports an API error (measured with
// gemini 0.61.0): the path of its error report and the error on one line, a
// stack, the status or code, then a critical error.
func geminiAPIError(err, status string) string {
	return "Error when talking to Gemini API Full report available at: /tmp/gemini-client-error-Turn.run-sendMessageStream-2026-11-24T13-33-52-949Z.json " + err + "\n" +
		"    at throwErrorIfNotOK (file:///usr/lib/node_modules/@google/gemini-cli/bundle/chunk-JDPZ4CE3.js:267833:24)\n" +
		"    at async Turn.run (file:///usr/lib/node_modules/@google/gemini-cli/bundle/chunk-JDPZ4CE3.js:333001:24) {\n" +
		"  " + status + "\n}\n" +
		"An unexpected critical error occurred:[object Object]"
}

// TextFor is the failure's text for a call that asked for model.
func (f Failure) TextFor(model string) string {
	return strings.ReplaceAll(f.Text, "{model}", model)
}

// Cursor's refusals and prompts, as the fake prints them.
const (
	CursorTrustRequired = "⚠ Workspace Trust Required\n" +
		"This folder has not been trusted yet.\n" +
		"To proceed, you can either:\n" +
		"  • Run 'agent' interactively to decide\n" +
		"  • Pass --trust, --yolo, or -f if you trust this directory"
	CursorLoginPrompt = "Not logged in. Opening browser for login…\nWaiting for browser authentication (press Ctrl+C to cancel)"
)

// Leftover is a kind of process an agent leaves running: Outcome makes the
// fake agent start it and then hang.
type Leftover struct {
	Name    string
	Outcome Outcome
}

// Leftovers are what an agent can leave behind for peal to stop: a
// grandchild in the call's process group that ignores SIGTERM, and a daemon
// in a session of its own.
func Leftovers() []Leftover {
	return []Leftover{
		{"in the group", Outcome{Grandchild: true, GrandchildIgnoreTerm: true, Hang: true}},
		{"a daemon", Outcome{Daemon: true, Hang: true}},
	}
}
