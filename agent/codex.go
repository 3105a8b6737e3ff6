package agent

import (
	"encoding/json"

	"peal/phase"
)

// Codex (binary `codex`): `codex exec` with the prompt on stdin ("-"), the
// repository as its folder, a read-only sandbox for read-only calls and no
// sandbox nor approvals for writing calls. It never gives up on an outage by
// itself: the network stall watch ends such attempts.
func init() {
	register(&Kind{
		Name:          "codex",
		DefaultCmd:    "codex",
		Args:          codexArgs,
		PromptOnStdin: true,
		Failures: Failures{
			Fatal: []string{
				"401 unauthorized", "incorrect api key", "invalid x-api-key", "unexpected argument", "unrecognized subcommand",
				"not logged in", "403 forbidden",
			},
			RateLimit: []string{"usage limit", "429 too many requests", "last status: 429"},
			// Not "Reconnecting... n/5": codex says so while it waits out a
			// 429's Retry-After too.
			Network:   []string{"os error 111", "error sending request"},
			ExitCodes: map[int]phase.Class{2: phase.Fatal}, // clap's usage errors
			Hint:      "set OPENAI_API_KEY (or CODEX_API_KEY), or run `codex login` once",
		},
		Events: codexEvents,
		Auth: Auth{
			Env:       []string{"OPENAI_API_KEY", "CODEX_API_KEY"},
			Status:    []string{"login", "status"},
			LoggedIn:  saysLoggedIn,
			BeforeRun: true, // without credentials it retries forever
			Hint:      "set OPENAI_API_KEY (or CODEX_API_KEY) in the job's environment, or run `codex login` on the machine",
		},
		VersionArgs: []string{"--version"},
		Notes:       "writing calls pass --dangerously-bypass-approvals-and-sandbox: commands run unsandboxed and unapproved",
	})
}

func codexArgs(c Call) []string {
	args := []string{"exec", "-C", c.Repo, "--skip-git-repo-check"}
	if c.Structured {
		args = append(args, "--json")
	}
	if ModeOf(c.Phase) == Write {
		args = append(args, "--dangerously-bypass-approvals-and-sandbox")
	} else {
		args = append(args, "-s", "read-only")
	}
	return append(finish(args, "-m", c), "-")
}

// codexEvents reads `codex exec --json`: agent messages as completed items,
// turn.completed (the end of the answer, with token usage), turn.failed and
// error events.
func codexEvents(line []byte) (Event, bool) {
	var e struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		Item    struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"item"`
		Usage struct {
			Input  int64 `json:"input_tokens"`
			Output int64 `json:"output_tokens"`
		} `json:"usage"`
		Error any `json:"error"`
	}
	if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Type == "" {
		return Event{}, false
	}
	switch {
	case e.Type == "item.completed" && e.Item.Type == "agent_message":
		return Event{Text: e.Item.Text}, true
	case e.Type == "turn.completed":
		return Event{Final: true, Usage: Usage{InputTokens: e.Usage.Input, OutputTokens: e.Usage.Output}}, true
	case e.Type == "turn.failed":
		return Event{Final: true, Error: nonEmpty(errorText(e.Error), "the turn failed")}, true
	case e.Type == "error":
		return Event{Error: nonEmpty(e.Message, errorText(e.Error))}, true
	}
	return Event{}, true // other events (thread.started, turn.started, ...) tell nothing
}

func nonEmpty(s, fallback string) string {
	if s != "" {
		return s
	}
	return fallback
}
