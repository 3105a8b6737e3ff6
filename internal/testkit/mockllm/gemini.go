package mockllm

import (
	"encoding/json"
	"net/http"
	"strings"
)

// geminiImpl speaks the Gemini API's generateContent and
// streamGenerateContent.
type geminiImpl struct{}

type geminiRequest struct {
	Contents []struct {
		Role  string `json:"role"`
		Parts []struct {
			Text             string          `json:"text"`
			FunctionResponse json.RawMessage `json:"functionResponse"`
		} `json:"parts"`
	} `json:"contents"`
	Tools []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		ResponseMimeType   string         `json:"responseMimeType"`
		ResponseJSONSchema map[string]any `json:"responseJsonSchema"`
		ResponseSchema     map[string]any `json:"responseSchema"`
	} `json:"generationConfig"`
}

// jsonSchema returns the schema of a request that asks for a JSON answer.
func (g *geminiRequest) jsonSchema() map[string]any {
	if g.GenerationConfig.ResponseMimeType != "application/json" {
		return nil
	}
	if g.GenerationConfig.ResponseJSONSchema != nil {
		return g.GenerationConfig.ResponseJSONSchema
	}
	if g.GenerationConfig.ResponseSchema != nil {
		return g.GenerationConfig.ResponseSchema
	}
	return map[string]any{"type": "OBJECT"}
}

// fillSchema makes up a value that satisfies a JSON schema: the first enum
// value, else a placeholder of the schema's type, objects with every
// property filled. The Gemini CLI asks for such answers on the side (model
// routing, whether to go on), and a valid one spares it retries.
func fillSchema(schema map[string]any) any {
	if e, ok := schema["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	t, _ := schema["type"].(string)
	switch strings.ToLower(t) {
	case "string":
		return "mock"
	case "integer", "number":
		return 1
	case "boolean":
		return false
	case "array":
		return []any{}
	}
	out := map[string]any{}
	props, _ := schema["properties"].(map[string]any)
	for name, p := range props {
		if ps, ok := p.(map[string]any); ok {
			out[name] = fillSchema(ps)
		}
	}
	return out
}

func geminiKey(r *http.Request) string {
	if k := r.Header.Get("x-goog-api-key"); k != "" {
		return k
	}
	return r.URL.Query().Get("key")
}

func (geminiImpl) parse(r *http.Request, body []byte) (Request, error) {
	req := Request{Protocol: Gemini, Key: geminiKey(r)}
	path := r.URL.Path
	i := strings.LastIndex(path, "/models/")
	model, action, _ := strings.Cut(path[i+len("/models/"):], ":")
	req.Model = model
	req.Stream = action == "streamGenerateContent"
	var in geminiRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return req, err
	}
	var user []string
	for _, c := range in.Contents {
		for _, p := range c.Parts {
			if len(p.FunctionResponse) > 0 {
				req.ToolResults++
				req.LastToolResult = string(p.FunctionResponse)
			} else if c.Role == "user" && p.Text != "" {
				user = append(user, p.Text)
			}
		}
	}
	req.UserText = strings.Join(user, "\n")
	if schema := in.jsonSchema(); schema != nil {
		b, _ := json.Marshal(fillSchema(schema))
		req.jsonAnswer = string(b)
	}
	for _, t := range in.Tools {
		for _, f := range t.FunctionDeclarations {
			req.Tools = append(req.Tools, Tool{Name: f.Name})
		}
	}
	return req, nil
}

// GoogleBadKey is the message of Google's answer to a wrong API key (HTTP
// 400, status INVALID_ARGUMENT).
const GoogleBadKey = "API key not valid. Please pass a valid API key."

var geminiErrors = map[int][2]string{
	400: {"INVALID_ARGUMENT", "Request contains an invalid argument."},
	401: {"UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential."},
	403: {"PERMISSION_DENIED", "Permission denied on resource."},
	404: {"NOT_FOUND", "The model is not found for API version v1beta, or is not supported for generateContent."},
	429: {"RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."},
	500: {"INTERNAL", "An internal error has occurred."},
	503: {"UNAVAILABLE", "The model is overloaded. Please try again later."},
	529: {"UNAVAILABLE", "The model is overloaded. Please try again later."},
}

func (geminiImpl) writeError(w http.ResponseWriter, f *Failure, model string) {
	code, status, msg := f.Status, "UNKNOWN", statusText(f.Status)
	if e, ok := geminiErrors[f.Status]; ok {
		status, msg = e[0], e[1]
	}
	if f.Message != "" {
		msg = f.Message
	}
	var details []any
	if f.RetryAfter != "" && f.Status == http.StatusTooManyRequests {
		details = []any{map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f.RetryAfter + "s"}}
	}
	if r, ok := f.refusalIn(Gemini, model); ok {
		code, status, msg, details = r.status, r.kind, r.message, r.details
		for k, v := range r.headers {
			w.Header().Set(k, v)
		}
	}
	retryHeaders(w, f)
	errBody := map[string]any{"code": code, "message": msg, "status": status}
	if details != nil {
		errBody["details"] = details
	}
	writeJSON(w, code, map[string]any{"error": errBody})
}

func (geminiImpl) writeTurn(w http.ResponseWriter, stream bool, t turn) {
	var parts []any
	if t.text != "" || t.call == nil {
		parts = append(parts, map[string]any{"text": t.text})
	}
	if t.call != nil {
		parts = append(parts, map[string]any{"functionCall": map[string]any{"name": t.call.Name, "args": t.call.Args}})
	}
	usage := map[string]any{"promptTokenCount": t.usage.Input, "candidatesTokenCount": t.usage.Output,
		"totalTokenCount": t.usage.Input + t.usage.Output}
	resp := map[string]any{
		"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": parts},
			"finishReason": "STOP", "index": 0}},
		"usageMetadata": usage, "modelVersion": t.model, "responseId": "mock",
	}
	if !stream {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	e := newSSE(w, t.breakAfterFirst)
	if t.breakAfterFirst {
		// A first chunk without a finish reason, so the break is mid-answer.
		e.event("", map[string]any{"candidates": []any{map[string]any{"content": map[string]any{"role": "model",
			"parts": []any{map[string]any{"text": ""}}}, "index": 0}}})
	}
	e.event("", resp)
}
