package agent

import (
	"encoding/json"

	"peal/phase"
)

// Gemini CLI (binary `gemini`): non-interactive with the prompt on stdin,
// --skip-trust for a repository it has not seen, plan approval mode for
// read-only calls and yolo for writing calls. Its exit codes name its fatal
// errors.
func init() {
	register(&Kind{
		Name:          "gemini",
		DefaultCmd:    "gemini",
		Args:          geminiArgs,
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
			RateLimit: []string{"resource has been exhausted"},
			ExitCodes: map[int]phase.Class{
				41: phase.Fatal, // authentication
				42: phase.Fatal, // bad input
				44: phase.Fatal, // sandbox
				52: phase.Fatal, // configuration
				55: phase.Fatal, // untrusted workspace
			},
			Hint: "set GEMINI_API_KEY (or GOOGLE_API_KEY, or Vertex AI's variables) in the job's environment",
		},
		Events: geminiEvents,
		Auth: Auth{
			Env:  []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA"},
			Hint: "set GEMINI_API_KEY in the job's environment",
		},
		VersionArgs: []string{"--version"},
		Notes:       "writing calls pass --approval-mode yolo: every tool call is approved",
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
	return finish(args, "-m", c)
}

// geminiEvents reads `--output-format stream-json`: assistant message
// deltas, error events, and the final result with status and token stats.
func geminiEvents(line []byte) (Event, bool) {
	var e struct {
		Type     string `json:"type"`
		Role     string `json:"role"`
		Content  string `json:"content"`
		Delta    bool   `json:"delta"`
		Status   string `json:"status"`
		Severity string `json:"severity"`
		Message  string `json:"message"`
		Error    any    `json:"error"`
		Stats    struct {
			Input  int64 `json:"input_tokens"`
			Output int64 `json:"output_tokens"`
		} `json:"stats"`
	}
	if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Type == "" {
		return Event{}, false
	}
	switch e.Type {
	case "message":
		if e.Role != "assistant" {
			return Event{}, true
		}
		return Event{Text: e.Content, Delta: e.Delta}, true
	case "result":
		ev := Event{Final: true, Usage: Usage{InputTokens: e.Stats.Input, OutputTokens: e.Stats.Output}}
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
