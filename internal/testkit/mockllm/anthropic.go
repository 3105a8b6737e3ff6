package mockllm

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// anthropicImpl speaks the Anthropic Messages API.
type anthropicImpl struct{}

type anthropicRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

type anthropicBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content"`
}

func (anthropicImpl) parse(r *http.Request, body []byte) (Request, error) {
	req := Request{Protocol: Anthropic, Key: r.Header.Get("x-api-key")}
	if req.Key == "" {
		req.Key = bearer(r)
	}
	var in anthropicRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return req, err
	}
	req.Model, req.Stream = in.Model, in.Stream
	var user []string
	for _, m := range in.Messages {
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			if m.Role == "user" {
				user = append(user, s)
			}
			continue
		}
		var blocks []anthropicBlock
		if err := json.Unmarshal(m.Content, &blocks); err != nil {
			return req, err
		}
		for _, b := range blocks {
			switch {
			case b.Type == "tool_result":
				req.ToolResults++
				req.LastToolResult = openAIText(b.Content)
			case b.Type == "text" && m.Role == "user":
				user = append(user, b.Text)
			}
		}
	}
	req.UserText = strings.Join(user, "\n")
	for _, t := range in.Tools {
		req.Tools = append(req.Tools, Tool{Name: t.Name})
	}
	return req, nil
}

var anthropicErrors = map[int][2]string{
	400: {"invalid_request_error", "invalid request"},
	401: {"authentication_error", "invalid x-api-key"},
	403: {"permission_error", "Your API key does not have permission to use the specified resource."},
	404: {"not_found_error", "model: not found"}, // a model the API does not know
	429: {"rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"},
	500: {"api_error", "Internal server error"},
	529: {"overloaded_error", "Overloaded"},
}

func (anthropicImpl) writeError(w http.ResponseWriter, f *Failure, model string) {
	status, kind, msg := f.Status, "api_error", statusText(f.Status)
	if e, ok := anthropicErrors[f.Status]; ok {
		kind, msg = e[0], e[1]
	}
	if f.Message != "" {
		msg = f.Message
	}
	if r, ok := f.refusalIn(Anthropic, model); ok {
		status, kind, msg = r.status, r.kind, r.message
		if kind == "" {
			kind, msg = anthropicErrors[http.StatusTooManyRequests][0], anthropicErrors[http.StatusTooManyRequests][1]
		}
		for k, v := range r.headers {
			w.Header().Set(k, v)
		}
	}
	retryHeaders(w, f)
	if retry := w.Header().Get("Retry-After"); retry != "" && status == http.StatusTooManyRequests {
		// The API says when the limit is replenished, in RFC 3339.
		w.Header().Set("anthropic-ratelimit-requests-remaining", "0")
		if at := resetTime(&Failure{RetryAfter: retry}, time.Now()); at != "" {
			w.Header().Set("anthropic-ratelimit-requests-reset", at)
		}
	}
	w.Header().Set("request-id", "req_mock")
	writeJSON(w, status, map[string]any{
		"type":  "error",
		"error": map[string]any{"type": kind, "message": msg},
	})
}

func (anthropicImpl) writeTurn(w http.ResponseWriter, stream bool, t turn) {
	n := nextTurn()
	var content []map[string]any
	if t.text != "" || t.call == nil {
		content = append(content, map[string]any{"type": "text", "text": t.text})
	}
	stop := "end_turn"
	if t.call != nil {
		content = append(content, map[string]any{"type": "tool_use", "id": "toolu_mock_" + n, "name": t.call.Name, "input": t.call.Args})
		stop = "tool_use"
	}
	usage := map[string]any{"input_tokens": t.usage.Input, "output_tokens": t.usage.Output,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	msg := map[string]any{"id": "msg_mock_" + n, "type": "message", "role": "assistant", "model": t.model,
		"stop_reason": stop, "stop_sequence": nil, "usage": usage}
	if !stream {
		msg["content"] = content
		writeJSON(w, http.StatusOK, msg)
		return
	}
	e := newSSE(w, t.breakAfterFirst)
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"] = []any{}
	start["stop_reason"] = nil
	start["usage"] = map[string]any{"input_tokens": t.usage.Input, "output_tokens": 1,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	e.event("message_start", map[string]any{"type": "message_start", "message": start})
	for i, c := range content {
		switch c["type"] {
		case "text":
			e.event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "text", "text": ""}})
			e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "text_delta", "text": t.text}})
		case "tool_use":
			e.event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": c["id"], "name": c["name"], "input": map[string]any{}}})
			args, _ := json.Marshal(t.call.Args)
			e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(args)}})
		}
		e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	e.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": t.usage.Output}})
	e.event("message_stop", map[string]any{"type": "message_stop"})
}

// bearer returns the token of an "Authorization: Bearer" header.
func bearer(r *http.Request) string {
	a := r.Header.Get("Authorization")
	if len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return a[7:]
	}
	return ""
}
