package mockllm

import (
	"encoding/json"
	"net/http"
	"strings"
)

// openAIErrors are the usual (type, code, message) of OpenAI error answers.
var openAIErrors = map[int][3]string{
	400: {"invalid_request_error", "", "invalid request"},
	401: {"invalid_request_error", "invalid_api_key", "Incorrect API key provided: sk-te**. You can find your API key at https://platform.openai.com/account/api-keys."},
	// A model the API does not know.
	404: {"invalid_request_error", "model_not_found", "The model does not exist or you do not have access to it."},
	429: {"requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again in 1s."},
	500: {"server_error", "", "The server had an error while processing your request."},
	503: {"server_error", "", "The server is overloaded or not ready yet."},
	529: {"server_error", "", "The server is overloaded."},
}

func writeOpenAIError(w http.ResponseWriter, f *Failure, p Protocol, model string) {
	status, kind, code, msg := f.Status, "server_error", "", statusText(f.Status)
	if e, ok := openAIErrors[f.Status]; ok {
		kind, code, msg = e[0], e[1], e[2]
	}
	if f.Message != "" {
		msg = f.Message
	}
	var param any
	if r, ok := f.refusalIn(p, model); ok {
		status, kind, code, msg = r.status, r.kind, r.code, r.message
		if kind == "" {
			e := openAIErrors[http.StatusTooManyRequests]
			kind, code, msg = e[0], e[1], e[2]
		}
		if r.param != "" {
			param = r.param
		}
		for k, v := range r.headers {
			w.Header().Set(k, v)
		}
	}
	retryHeaders(w, f)
	if retry := w.Header().Get("Retry-After"); retry != "" && status == http.StatusTooManyRequests {
		w.Header().Set("x-ratelimit-remaining-requests", "0")
		w.Header().Set("x-ratelimit-reset-requests", retry+"s")
	}
	var c any
	if code != "" {
		c = code
	}
	writeJSON(w, status, map[string]any{
		"error": map[string]any{"message": msg, "type": kind, "param": param, "code": c},
	})
}

// openAIText reads a content field that is either a string or a list of
// parts carrying text.
func openAIText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var out []string
	for _, p := range parts {
		if p.Text != "" {
			out = append(out, p.Text)
		}
	}
	return strings.Join(out, "\n")
}

// responsesImpl speaks the OpenAI Responses API.
type responsesImpl struct{}

type responsesRequest struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	Input  json.RawMessage
	Tools  []responsesTool `json:"tools"`
}

// responsesTool is a tool of a Responses request; a namespace groups
// further tools.
type responsesTool struct {
	Type  string          `json:"type"`
	Name  string          `json:"name"`
	Tools []responsesTool `json:"tools"`
}

// addResponsesTools appends the tools in ts, namespaces flattened.
func addResponsesTools(req *Request, ts []responsesTool) {
	for _, t := range ts {
		if t.Type == "namespace" {
			addResponsesTools(req, t.Tools)
			continue
		}
		if t.Name != "" {
			req.Tools = append(req.Tools, Tool{Name: t.Name, Freeform: t.Type == "custom"})
		}
	}
}

func (responsesImpl) parse(r *http.Request, body []byte) (Request, error) {
	req := Request{Protocol: Responses, Key: bearer(r)}
	var in responsesRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return req, err
	}
	req.Model, req.Stream = in.Model, in.Stream
	var s string
	if json.Unmarshal(in.Input, &s) == nil {
		req.UserText = s
	} else if len(in.Input) > 0 {
		var items []struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
			Output  json.RawMessage `json:"output"`
			Tools   []responsesTool `json:"tools"`
		}
		if err := json.Unmarshal(in.Input, &items); err != nil {
			return req, err
		}
		var user []string
		for _, it := range items {
			switch {
			case it.Type == "additional_tools":
				addResponsesTools(&req, it.Tools)
			case strings.HasSuffix(it.Type, "_call_output"):
				req.ToolResults++
				req.LastToolResult = openAIText(it.Output)
			case it.Role == "user" && (it.Type == "" || it.Type == "message"):
				user = append(user, openAIText(it.Content))
			}
		}
		req.UserText = strings.Join(user, "\n")
	}
	addResponsesTools(&req, in.Tools)
	return req, nil
}

func (responsesImpl) writeError(w http.ResponseWriter, f *Failure, model string) {
	writeOpenAIError(w, f, Responses, model)
}

func (responsesImpl) writeTurn(w http.ResponseWriter, stream bool, t turn) {
	n := nextTurn()
	var output []map[string]any
	if t.text != "" || t.call == nil {
		output = append(output, map[string]any{"type": "message", "id": "msg_mock_" + n, "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": t.text, "annotations": []any{}}}})
	}
	if c := t.call; c != nil {
		if c.Args == nil {
			output = append(output, map[string]any{"type": "custom_tool_call", "id": "ctc_mock_" + n, "call_id": "call_mock_" + n,
				"name": c.Name, "input": c.Custom, "status": "completed"})
		} else {
			args, _ := json.Marshal(c.Args)
			output = append(output, map[string]any{"type": "function_call", "id": "fc_mock_" + n, "call_id": "call_mock_" + n,
				"name": c.Name, "arguments": string(args), "status": "completed"})
		}
	}
	usage := map[string]any{"input_tokens": t.usage.Input, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": t.usage.Output, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": t.usage.Input + t.usage.Output}
	resp := map[string]any{"id": "resp_mock_" + n, "object": "response", "created_at": 0, "status": "completed",
		"model": t.model, "output": output, "usage": usage}
	if !stream {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	e := newSSE(w, t.breakAfterFirst)
	seq := 0
	ev := func(name string, data map[string]any) {
		data["type"] = name
		data["sequence_number"] = seq
		seq++
		e.event(name, data)
	}
	ev("response.created", map[string]any{"response": map[string]any{"id": "resp_mock_" + n, "object": "response",
		"created_at": 0, "status": "in_progress", "model": t.model, "output": []any{}}})
	for i, item := range output {
		if item["type"] == "message" {
			added := map[string]any{"type": "message", "id": "msg_mock_" + n, "status": "in_progress", "role": "assistant", "content": []any{}}
			ev("response.output_item.added", map[string]any{"output_index": i, "item": added})
			ev("response.content_part.added", map[string]any{"item_id": "msg_mock_" + n, "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
			ev("response.output_text.delta", map[string]any{"item_id": "msg_mock_" + n, "output_index": i, "content_index": 0, "delta": t.text})
			ev("response.output_text.done", map[string]any{"item_id": "msg_mock_" + n, "output_index": i, "content_index": 0, "text": t.text})
		} else {
			ev("response.output_item.added", map[string]any{"output_index": i, "item": item})
		}
		ev("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	ev("response.completed", map[string]any{"response": resp})
}

// chatImpl speaks the OpenAI Chat Completions API.
type chatImpl struct{}

type chatRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

func (chatImpl) parse(r *http.Request, body []byte) (Request, error) {
	req := Request{Protocol: Chat, Key: bearer(r)}
	var in chatRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return req, err
	}
	req.Model, req.Stream = in.Model, in.Stream
	var user []string
	for _, m := range in.Messages {
		switch m.Role {
		case "tool":
			req.ToolResults++
			req.LastToolResult = openAIText(m.Content)
		case "user":
			user = append(user, openAIText(m.Content))
		}
	}
	req.UserText = strings.Join(user, "\n")
	for _, t := range in.Tools {
		req.Tools = append(req.Tools, Tool{Name: t.Function.Name})
	}
	return req, nil
}

func (chatImpl) writeError(w http.ResponseWriter, f *Failure, model string) {
	writeOpenAIError(w, f, Chat, model)
}

func (chatImpl) writeTurn(w http.ResponseWriter, stream bool, t turn) {
	n := nextTurn()
	finish := "stop"
	var calls []any
	if c := t.call; c != nil {
		finish = "tool_calls"
		args, _ := json.Marshal(c.Args)
		calls = []any{map[string]any{"index": 0, "id": "call_mock_" + n, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": string(args)}}}
	}
	usage := map[string]any{"prompt_tokens": t.usage.Input, "completion_tokens": t.usage.Output,
		"total_tokens": t.usage.Input + t.usage.Output}
	if !stream {
		msg := map[string]any{"role": "assistant", "content": t.text}
		if calls != nil {
			msg["tool_calls"] = calls
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": "chatcmpl-mock-" + n, "object": "chat.completion", "created": 0,
			"model": t.model, "choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	e := newSSE(w, t.breakAfterFirst)
	chunk := func(delta map[string]any, finish any, usage any) map[string]any {
		return map[string]any{"id": "chatcmpl-mock-" + n, "object": "chat.completion.chunk", "created": 0, "model": t.model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}, "usage": usage}
	}
	e.event("", chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil))
	if t.text != "" {
		e.event("", chunk(map[string]any{"content": t.text}, nil, nil))
	}
	if calls != nil {
		e.event("", chunk(map[string]any{"tool_calls": calls}, nil, nil))
	}
	e.event("", chunk(map[string]any{}, finish, usage))
	e.event("", "[DONE]")
}
