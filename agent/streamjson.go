package agent

// streamJSON is Claude Code's stream-json (`--output-format stream-json`),
// which the Cursor CLI's follows: both kinds read it with this one parser.
var streamJSON = &Events{
	Parse:  parseStreamJSON,
	Answer: "`result` of `{\"type\":\"result\"}`, else the last `assistant` message",
	End:    "the `result` event",
	Error:  "`is_error: true` (its `result` is the message), a subtype other than `success`, `{\"type\":\"error\"}`",
	Usage:  "`usage` of the result (input, cache and output tokens), `total_cost_usd`",
}

// parseStreamJSON reads one line of stream-json: assistant messages, and a
// final {"type":"result"} with the answer, is_error, usage and
// total_cost_usd.
func parseStreamJSON(line []byte) (Event, bool) {
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
	if !decodeLine(line, &e) || e.Type == "" {
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
