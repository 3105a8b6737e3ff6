package agent

import (
	"encoding/json"
	"time"
)

// The Cursor CLI (binary `agent`). Its argv is Peal's, plus --trust on every
// call and --force on writing calls (each can be turned off); it takes the
// prompt only as its last argument.
func init() {
	register(&Kind{
		Name:       "cursor",
		DefaultCmd: "agent",
		Args:       cursorArgs,
		Failures: Failures{
			Fatal: []string{"invalid cursor api key", "invalid api key", "authentication failed", "authentication required", "not logged in"},
			Blocking: []string{
				"workspace trust required", "waiting for browser", "opening browser", "log in to cursor", "sign in to cursor",
				"press any key to sign in", "press enter to log in",
			},
			RateLimit: []string{"you've hit your usage limit", "hit your usage limit"},
			// Parallel processes race on the CLI's configuration file.
			Transient: []string{"cli-config.json.tmp"},
			Hint:      "set CURSOR_API_KEY (an API key from the Cursor dashboard) in the job's environment",
			Hints: map[string]string{
				"workspace trust required": "keep cursor_trust on (the default) so that peal passes --trust for the repository",
			},
		},
		Events: claudeEvents, // the Cursor CLI's stream-json follows Claude Code's shape
		Auth: Auth{
			Env:       []string{"CURSOR_API_KEY"},
			Status:    []string{"status"},
			LoggedIn:  saysLoggedIn,
			BeforeRun: true,
			Hint:      "in CI set CURSOR_API_KEY to an API key from the Cursor dashboard (a browser login cannot happen there); on a workstation, `agent login` also works",
		},
		LaunchGap:   time.Second,
		VersionArgs: []string{"--version"},
		Notes:       "--trust trusts the repository as a workspace; --force lets the agent run commands without approval",
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
	if c.Phase == "plan" || c.Phase == "normalize" {
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
	return finish(args, "--model", c)
}

// claudeEvents reads Claude Code's stream-json (also the Cursor CLI's):
// assistant messages, and a final {"type":"result"} with the answer,
// is_error, usage and total_cost_usd.
func claudeEvents(line []byte) (Event, bool) {
	var e struct {
		Type    string  `json:"type"`
		Subtype string  `json:"subtype"`
		IsError bool    `json:"is_error"`
		Result  string  `json:"result"`
		Cost    float64 `json:"total_cost_usd"`
		Usage   struct {
			Input       int64 `json:"input_tokens"`
			CacheCreate int64 `json:"cache_creation_input_tokens"`
			CacheRead   int64 `json:"cache_read_input_tokens"`
			Output      int64 `json:"output_tokens"`
		} `json:"usage"`
		Message struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"message"`
		Error any `json:"error"`
	}
	if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Type == "" {
		return Event{}, false
	}
	switch e.Type {
	case "result":
		ev := Event{Final: true, Text: e.Result, Usage: Usage{
			InputTokens:  e.Usage.Input + e.Usage.CacheCreate + e.Usage.CacheRead,
			OutputTokens: e.Usage.Output, CostUSD: e.Cost}}
		if e.IsError || (e.Subtype != "" && e.Subtype != "success") {
			ev.Error = e.Result
			if ev.Error == "" {
				ev.Error = "the result event reports " + e.Subtype
			}
		}
		return ev, true
	case "assistant":
		text := ""
		for _, c := range e.Message.Content {
			if c.Type == "text" {
				text += c.Text
			}
		}
		return Event{Text: text}, true
	case "error":
		return Event{Error: errorText(e.Error)}, true
	}
	return Event{}, true
}

// errorText is the message of an error field that may be a string or an
// object with a message.
func errorText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		for _, k := range []string{"message", "data"} {
			if s := errorText(x[k]); s != "" {
				return s
			}
		}
		if s, ok := x["name"].(string); ok {
			return s
		}
	}
	if v == nil {
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}
