package fakes

import "strconv"

// The fake agent imitates each agent CLI when it is started under that CLI's
// name (a symlink named claude, codex, gemini, opencode, or agent for the
// Cursor CLI): it checks its argv the way the CLI does, reads the prompt
// where the CLI does, emits the CLI's events with structured output, and
// prints the CLI's own failure messages, word for word.

// Kind names the fake answers to; any other name is the plain fake.
var KindNames = map[string]string{
	"agent": "cursor", "cursor-agent": "cursor", "claude": "claude", "codex": "codex", "gemini": "gemini", "opencode": "opencode",
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
	FailUnauthorized      = "unauthorized" // the API answers 401
	FailForbidden         = "forbidden"    // the API answers 403
	FailRateLimit         = "rate_limit"
	FailOverloaded        = "overloaded"
	FailConfigRace        = "config_race"
	FailStoreRace         = "store_race" // two first starts race to set up the CLI's database
	FailRoot              = "root"
)

// Failure is how a CLI shows one canned failure.
type Failure struct {
	Stderr bool   // on stderr (else stdout)
	Text   string // printed as is, with a final newline
	Exit   int
	// Forever: the CLI never exits; it repeats Repeat on the same stream.
	Forever bool
	Repeat  string
}

// Failures are the messages of the real CLIs, as measured (see
// docs/agents.md).
var Failures = map[string]map[string]Failure{
	"claude": {
		FailNoCredentials:     {Text: "Not logged in · Please run /login", Exit: 1},
		FailConnectionRefused: {Text: "API Error: Unable to connect to API (ConnectionRefused)", Exit: 1},
		FailInvalidKey:        {Text: "Invalid API key · Fix external API key", Exit: 1},
		FailRateLimit:         {Text: "API Error: Request rejected (429) · Number of requests has exceeded your rate limit", Exit: 1},
		FailOverloaded:        {Text: "API Error: Repeated 529 Overloaded errors", Exit: 1},
		FailRoot:              {Stderr: true, Text: "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons", Exit: 1},
		FailUnauthorized:      {Text: "Invalid API key · Fix external API key", Exit: 1},
		FailForbidden:         {Text: "Failed to authenticate. API Error: 403 Your API key does not have permission to use the specified resource.", Exit: 1},
	},
	"codex": {
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
	},
	"gemini": {
		FailNoCredentials: {Stderr: true, Exit: 41,
			Text: "Please set an Auth method in your /root/.gemini/settings.json or specify one of the following environment variables before running: GEMINI_API_KEY, GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_GENAI_USE_GCA"},
		FailConnectionRefused: {Stderr: true, Exit: 1,
			Text: "exception TypeError: fetch failed sending request\nAn unexpected critical error occurred:[object Object]"},
		FailRateLimit: {Stderr: true, Exit: 1, Text: "[API Error: Resource has been exhausted (e.g. check quota). RESOURCE_EXHAUSTED]"},
		// An API error the CLI has no message of its own for: the error's
		// JSON, a stack, the status, then a critical error.
		FailUnauthorized: {Stderr: true, Exit: 1, Text: geminiAPIError(`{"error":{"code":401,"message":"invalid x-api-key","status":"UNAUTHENTICATED"}}`, 401)},
		FailForbidden:    {Stderr: true, Exit: 1, Text: geminiAPIError(`{"error":{"code":403,"message":"Permission denied on resource.","status":"PERMISSION_DENIED"}}`, 403)},
		// Google answers a wrong key with 400 INVALID_ARGUMENT.
		FailInvalidKey: {Stderr: true, Exit: 1, Text: geminiAPIError(`{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}`, 400)},
	},
	"opencode": {
		FailNoCredentials:     {Stderr: true, Exit: 1, Text: "\x1b[91m\x1b[1mError: \x1b[0mCannot connect to API: Unable to connect. Is the computer able to access the url?"},
		FailConnectionRefused: {Stderr: true, Exit: 1, Text: "\x1b[91m\x1b[1mError: \x1b[0mCannot connect to API: Unable to connect. Is the computer able to access the url?"},
		FailInvalidKey:        {Stderr: true, Exit: 1, Text: "\x1b[91m\x1b[1mError: \x1b[0minvalid x-api-key"},
		FailRateLimit:         {Stderr: true, Exit: 1, Text: "\x1b[91m\x1b[1mError: \x1b[0mRate limit exceeded, please try again in 20 seconds"},
		FailUnauthorized: {Stderr: true, Exit: 1,
			Text: "\x1b[91m\x1b[1mError: \x1b[0mIncorrect API key provided: sk-te**. You can find your API key at https://platform.openai.com/account/api-keys."},
		FailForbidden: {Stderr: true, Exit: 1,
			Text: "\x1b[91m\x1b[1mError: \x1b[0mForbidden: {\"error\":{\"code\":null,\"message\":\"Forbidden\",\"param\":null,\"type\":\"server_error\"}}"},
		// Two first starts in one data folder (a parallel block on a
		// fresh machine) both create opencode's tables (opencode 1.18).
		FailStoreRace: {Stderr: true, Exit: 1,
			Text: "\x1b[91m\x1b[1mError: \x1b[0mUnexpected error\n\nFailed query: \n        CREATE TABLE `workspace` (\n          `id` text PRIMARY KEY,\n" +
				"          `project_id` text NOT NULL,\n          CONSTRAINT `fk_workspace_project_id_project_id_fk` FOREIGN KEY (`project_id`) REFERENCES `project`(`id`) ON DELETE CASCADE\n" +
				"        );\n      \nparams: "},
	},
	"cursor": {
		FailInvalidKey:        {Text: "Invalid Cursor API key. Check the value of CURSOR_API_KEY.", Exit: 0},
		FailRateLimit:         {Text: "You've hit your usage limit. Try again in 2 minutes, or upgrade your plan.", Exit: 0},
		FailConnectionRefused: {Stderr: true, Exit: 1, Text: "ConnectError: [unavailable] connect ECONNREFUSED 127.0.0.1:443"},
		FailConfigRace: {Stderr: true, Exit: 1,
			Text: "Error: ENOENT: no such file or directory, rename '/root/.cursor/cli-config.json.tmp' -> '/root/.cursor/cli-config.json'"},
	},
}

// geminiAPIError is how the Gemini CLI reports an API error it has no
// message of its own for (measured with gemini 0.61.0).
func geminiAPIError(body string, status int) string {
	return "Error when talking to Gemini API Full report available at: /tmp/gemini-client-error-Turn.run-sendMessageStream-2026-11-24T13-33-52-949Z.json _ApiError: " + body + "\n" +
		"    at throwErrorIfNotOK (file:///usr/lib/node_modules/@google/gemini-cli/bundle/chunk-JDPZ4CE3.js:267833:24)\n" +
		"    at async Turn.run (file:///usr/lib/node_modules/@google/gemini-cli/bundle/chunk-JDPZ4CE3.js:333001:24) {\n" +
		"  status: " + strconv.Itoa(status) + "\n}\n" +
		"An unexpected critical error occurred:[object Object]"
}

// Cursor's refusals and prompts, as the fake prints them.
const (
	CursorTrustRequired = "⚠ Workspace Trust Required\n" +
		"This folder has not been trusted yet.\n" +
		"To proceed, you can either:\n" +
		"  • Run 'agent' interactively to decide\n" +
		"  • Pass --trust, --yolo, or -f if you trust this directory"
	CursorLoginPrompt = "Not logged in. Opening browser for login…\nWaiting for browser authentication (press Ctrl+C to cancel)"
	CursorDenied      = "Command denied (requires approval; pass --force to allow): "
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
