package agent

import (
	"time"

	"peal/phase"
)

// The Cursor CLI (binary `agent`). Its argv is Peal's, plus --trust on every
// call and --force on writing calls (each can be turned off); it takes the
// prompt only as its last argument.
func init() {
	register(&Kind{
		Name:       "cursor",
		CLI:        "Cursor CLI",
		DefaultCmd: "agent",
		Args:       cursorArgs,
		ModelFlag:  "--model",
		Provider:   "cursor",
		Failures: Failures{
			Fatal: []string{"invalid cursor api key", "invalid api key", "authentication failed", "authentication required", "not logged in"},
			Blocking: []string{
				"workspace trust required", "waiting for browser", "opening browser", "log in to cursor", "sign in to cursor",
				"press any key to sign in", "press enter to log in",
			},
			RateLimit: []string{"you've hit your usage limit", "hit your usage limit"},
			// Parallel processes race on the CLI's configuration file.
			Transient: []string{"cli-config.json.tmp"},
			FatalHint: "set CURSOR_API_KEY (an API key from the Cursor dashboard) in the job's environment",
			QuotaHint: "check the plan and usage of the Cursor account of CURSOR_API_KEY",
			FatalHints: map[string]string{
				"workspace trust required": "keep cursor_trust on (the default) so that peal passes --trust for the repository",
			},
		},
		Events:  streamJSON, // the Cursor CLI's stream-json follows Claude Code's shape
		Session: cursorSession,
		Auth: Auth{
			Env:       []string{"CURSOR_API_KEY"},
			Status:    []string{"status"},
			LoggedIn:  saysLoggedIn,
			BeforeRun: true,
			LoginHint: "in CI set CURSOR_API_KEY to an API key from the Cursor dashboard (a browser login cannot happen there); on a workstation, `agent login` also works",
		},
		Confine: Confinement{
			Folders: []string{"${CURSOR_CONFIG_DIR:-~/.cursor}", "${XDG_CONFIG_HOME:-~/.config}/cursor"},
			// Its install folder, which it cannot update confined.
			Reads: []string{"~/.local/share/cursor-agent"},
			Credentials: []string{"${CURSOR_CONFIG_DIR:-~/.cursor}/cli-config.json", "${XDG_CONFIG_HOME:-~/.config}/cursor/cli-config.json",
				"${XDG_CONFIG_HOME:-~/.config}/cursor/auth.json"},
			Hosts: []string{"*.cursor.sh", "*.cursorapi.com"},
			Env:   []string{"CURSOR_API_KEY", "CURSOR_AUTH_TOKEN", "CURSOR_CONFIG_DIR", "XDG_CONFIG_HOME", "NO_OPEN_BROWSER"},
			Keys: Keys{Vars: []string{"CURSOR_API_KEY", "CURSOR_AUTH_TOKEN"}, Logins: []Login{
				{Name: "`CURSOR_API_KEY`, `CURSOR_AUTH_TOKEN`", How: "in the call's environment: the Cursor CLI takes no other base URL for its API (none documented), so peal cannot stand in front of it"},
				{Name: "`agent login` (`~/.cursor/cli-config.json`)", How: "kept in its folder, which its calls read"},
			}},
			Notes: "not measured (no Cursor CLI on the test machine): taken from its documentation (its configuration, authentication " +
				"and network pages) and its users' reports. It keeps its configuration and, in recent versions, its login in " +
				"~/.cursor/cli-config.json (older ones: ~/.config/cursor/auth.json), in $XDG_CONFIG_HOME/cursor when that is set. Its " +
				"install folder (~/.local/share/cursor-agent) stays read-only: it cannot update itself in a confined call",
		},
		LaunchGap:   time.Second,
		VersionArgs: []string{"--version"},
		Notes: "--trust trusts the repository as a workspace, nothing more; --force lets the agent run commands " +
			"(tests, builds) without approval unless they are explicitly denied",
		Doc: Doc{
			Measured:      "not measured (no CLI on the test machine)",
			NoCredentials: "waits on a browser login: the prompt ends the call → fatal; peal checks first (below)",
			Unreachable:   "`ECONNREFUSED` and the like → network",
			InvalidKey:    "`Invalid Cursor API key…` (exit 0) → fatal",
			RateLimit:     "`You've hit your usage limit` (exit 0) → rate limit",
			Unauthorized:  "not measured", Forbidden: "not measured", ModelNotFound: "not measured",
			Outage:         "not measured here; `ECONNREFUSED` and the like are network failures",
			OutageBound:    "the stall watch, or the CLI; then `network_give_up_sec`",
			OutageAttempts: "2–3", OutageExit: "within 110 s plus one attempt",
			OutOfQuota: "not measured", OverContext: "not measured", OwnRetries: "not measured",
			RetryTime: "`You've hit your usage limit. Try again in 2 minutes…`", CapExit: "not measured",
		},
	})
}

// cursorArgs: plan and normalize calls in plan mode with text output;
// triage, execute and address with the sandbox setting (Peal's argv).
func cursorArgs(c Call) []string {
	format := "text"
	if c.Structured {
		format = "stream-json"
	}
	var args []string
	if c.Phase == phase.Plan || c.Phase == phase.Normalize {
		args = []string{"--print", "--plan", "--workspace", c.Repo, "--output-format", format}
	} else {
		args = []string{"--print", "--workspace", c.Repo, "--sandbox", c.Options.Sandbox}
		if c.Structured {
			args = append(args, "--output-format", format)
		}
	}
	if c.Options.Trust {
		args = append(args, "--trust")
	}
	if c.Options.Force && ModeOf(c.Phase) == Write {
		args = append(args, "--force")
	}
	return args
}

// cursorSession follows the Cursor CLI's documentation; it was not measured
// (no CLI on the test machine). The CLI chooses the chat's id, its
// stream-json names it (session_id of system/init), and --resume <id>
// continues it. Its words for a chat it cannot resume are not known: a
// resumed call that fails before its events name the session is taken as
// one.
var cursorSession = &Session{
	Resume: func(id string) []string { return []string{"--resume", id} },
	// A chat id as the CLI reports them (a UUID, by third-party accounts of
	// its stream-json); never a number (--resume=-1 is the latest chat) nor
	// an empty value. An id of another form is not continued.
	ID: uuidPattern,
	Doc: SessionDoc{
		Learnt:  "`session_id` of `system/init` (from its documentation)",
		Lost:    "not measured (its documentation says only that a failure exits non-zero with the error on stderr): a resumed call that fails before its events name the session counts as one",
		Hazards: "`--continue` (`--resume=-1`) and `agent resume` take the latest chat, `agent ls` is a picker (from its documentation)",
	},
}
