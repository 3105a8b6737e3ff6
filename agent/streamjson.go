package agent

import (
	"fmt"
	"math"
	"time"

	"peal/phase"
)

// streamJSON is Claude Code's stream-json (`--output-format stream-json`),
// which the Cursor CLI's follows: both kinds read it with this one parser.
var streamJSON = &Events{
	Parse:  parseStreamJSON,
	Answer: "`result` of `{\"type\":\"result\"}`, else the last `assistant` message",
	End:    "the `result` event",
	Error:  "`is_error: true` (its `result` is the message), a subtype other than `success`, `{\"type\":\"error\"}`",
	Usage:  "`usage` of the result (input, cache and output tokens), `total_cost_usd`",
}

// parseStreamJSON reads one line of stream-json: assistant messages (an
// API error Claude Code reports as one is an error), the retries it makes
// by itself (system/api_retry) and the limits it reports
// (rate_limit_event), and a final {"type":"result"} with the answer,
// is_error, usage and total_cost_usd. Every line names its session
// (session_id).
func parseStreamJSON(line []byte) (ev Event, ok bool) {
	var e struct {
		Session string  `json:"session_id"`
		Type    string  `json:"type"`
		Subtype string  `json:"subtype"`
		IsError bool    `json:"is_error"`
		Result  string  `json:"result"`
		Cost    float64 `json:"total_cost_usd"`
		// system/api_retry: the CLI's wait before it retries, and why.
		RetryDelayMS *float64 `json:"retry_delay_ms"`
		ErrorStatus  *int     `json:"error_status"`
		Attempt      int      `json:"attempt"`
		MaxRetries   int      `json:"max_retries"`
		// rate_limit_event.
		RateLimit struct {
			Status   string `json:"status"`
			ResetsAt int64  `json:"resetsAt"`
			Type     string `json:"rateLimitType"`
		} `json:"rate_limit_info"`
		Usage struct {
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
	defer func() { ev.Session = e.Session }()
	switch e.Type {
	case "result":
		ev := Event{Final: true, Text: e.Result, Usage: Usage{
			InputTokens:  e.Usage.Input + e.Usage.CacheCreate + e.Usage.CacheRead,
			OutputTokens: e.Usage.Output, CachedTokens: e.Usage.CacheRead, CostUSD: e.Cost}}
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
		if errorText(e.Error) != "" {
			// An API error Claude Code words as a message of its own
			// ("error":"rate_limit", the text "API Error: …").
			return Event{Error: nonEmpty(text, errorText(e.Error))}, true
		}
		return Event{Text: text}, true
	case "error":
		return Event{Error: errorText(e.Error)}, true
	case "system":
		if e.Subtype == "api_retry" {
			return Event{Retry: apiRetry(e.ErrorStatus, errorText(e.Error), e.RetryDelayMS, e.Attempt, e.MaxRetries)}, true
		}
	case "rate_limit_event":
		if e.RateLimit.Status == "rejected" {
			r := &Retry{Class: phase.RateLimited, Text: "rate_limit_event: rejected"}
			if e.RateLimit.Type != "" {
				r.Text += " (" + e.RateLimit.Type + ")"
			}
			if e.RateLimit.ResetsAt > 0 {
				r.Reset = time.Unix(e.RateLimit.ResetsAt, 0)
				r.Text += ", resets at " + r.Reset.UTC().Format(time.RFC3339)
			}
			return Event{Retry: r}, true
		}
	}
	return Event{}, true
}

// apiRetry is what a system/api_retry event says: Claude Code retries a
// request the API refused (429, 529: a rate limit) or could not answer (no
// status, 5xx: the network) after retry_delay_ms. That delay is the
// server's retry-after when it gave one: a whole number of seconds, where
// the CLI's own backoff is jittered to a fraction of a millisecond.
func apiRetry(status *int, kind string, delayMS *float64, attempt, most int) *Retry {
	r := &Retry{Class: phase.Network}
	code := 0
	if status != nil {
		code = *status
	}
	switch {
	case code == 429 || code == 529 || kind == "rate_limit" || kind == "overloaded":
		r.Class = phase.RateLimited
	case code != 0 && code < 500:
		return nil
	}
	if delayMS != nil && *delayMS > 0 {
		r.Delay = time.Duration(*delayMS * float64(time.Millisecond))
		r.Server = *delayMS >= 1000 && math.Mod(*delayMS, 1000) == 0
	}
	what := "no answer"
	if code != 0 {
		what = fmt.Sprintf("HTTP %d", code)
	}
	if kind != "" {
		what += " (" + kind + ")"
	}
	r.Text = fmt.Sprintf("api_retry: %s, retry %d of %d in %s", what, attempt, most, r.Delay.Round(time.Millisecond))
	return r
}
