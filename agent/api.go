package agent

import (
	"encoding/json"

	"peal/confine"
)

// API is a model API the CLIs call, as peal's model endpoint (package
// confine) forwards to it: its own address, where a request carries the
// key, the requests a CLI's call needs, and where an answer says its
// usage. Each is declared once here; the kinds' Keys name them.
type API struct {
	Name string
	// Root is the API's own address, without the path a CLI's base URL
	// adds.
	Root string
	// Places are where a request carries the key.
	Places []confine.KeyPlace
	// Routes are the requests a CLI's calls need, as "METHOD /path" on the
	// API's own host (* stands for a model's name); Open are those a CLI
	// sends without a key.
	Routes, Open []string
	// Usage reads one JSON document of an answer (see confine.HeldAPI).
	Usage func(doc []byte, t *confine.Tokens)
}

// The model APIs.
var (
	// AnthropicAPI is Anthropic's Messages API (Claude Code; opencode's
	// anthropic provider).
	AnthropicAPI = &API{
		Name:   "anthropic",
		Root:   "https://api.anthropic.com",
		Places: []confine.KeyPlace{{Header: "X-Api-Key"}, {Header: "Authorization", Prefix: "Bearer "}},
		Routes: []string{"POST /v1/messages", "POST /v1/messages/count_tokens", "GET /v1/models", "GET /v1/models/*"},
		// Claude Code asks whether the API answers before its first
		// request.
		Open:  []string{"HEAD /"},
		Usage: anthropicUsage,
	}
	// OpenAIAPI is OpenAI's Responses and Chat Completions APIs (Codex;
	// opencode's openai and OpenAI-compatible providers).
	OpenAIAPI = &API{
		Name:   "openai",
		Root:   "https://api.openai.com",
		Places: []confine.KeyPlace{{Header: "Authorization", Prefix: "Bearer "}},
		Routes: []string{"POST /v1/responses", "POST /v1/responses/compact", "POST /v1/responses/input_tokens",
			"POST /v1/chat/completions", "GET /v1/models", "GET /v1/models/*"},
		Usage: openAIUsage,
	}
	// GoogleAPI is Google's Gemini API (the Gemini CLI; opencode's google
	// provider).
	GoogleAPI = &API{
		Name:   "google",
		Root:   "https://generativelanguage.googleapis.com",
		Places: []confine.KeyPlace{{Header: "X-Goog-Api-Key"}, {Header: "Authorization", Prefix: "Bearer "}, {Query: "key"}},
		Routes: []string{
			"POST /v1beta/models/*:generateContent", "POST /v1beta/models/*:streamGenerateContent", "POST /v1beta/models/*:countTokens",
			"GET /v1beta/models", "GET /v1beta/models/*",
			"POST /v1/models/*:generateContent", "POST /v1/models/*:streamGenerateContent", "POST /v1/models/*:countTokens",
			"GET /v1/models", "GET /v1/models/*",
		},
		Usage: googleUsage,
	}
)

// APIs are the model APIs, for the documentation.
var APIs = []*API{AnthropicAPI, OpenAIAPI, GoogleAPI}

// routes are the API's routes, open ones included.
func (a *API) routes() []confine.Route {
	r, err := confine.ParseRoutes(a.Routes...)
	if err != nil {
		panic(err) // the declarations above are checked by a test
	}
	open, err := confine.ParseRoutes(a.Open...)
	if err != nil {
		panic(err)
	}
	for i := range open {
		open[i].Open = true
	}
	return append(r, open...)
}

// anthropicUsage reads the usage of a Messages answer: the whole message,
// or message_start (the prompt's tokens) and message_delta (the answer's,
// counted so far) of a stream. input_tokens leaves out what the cache
// wrote and read.
func anthropicUsage(doc []byte, t *confine.Tokens) {
	type usage struct {
		Input         *int64 `json:"input_tokens"`
		Output        *int64 `json:"output_tokens"`
		CacheCreation int64  `json:"cache_creation_input_tokens"`
		CacheRead     int64  `json:"cache_read_input_tokens"`
	}
	var d struct {
		Usage   *usage `json:"usage"`
		Message struct {
			Usage *usage `json:"usage"`
		} `json:"message"`
	}
	if json.Unmarshal(doc, &d) != nil {
		return
	}
	u := d.Usage
	if u == nil {
		u = d.Message.Usage
	}
	if u == nil {
		return
	}
	if u.Input != nil {
		t.Input, t.Cached = *u.Input+u.CacheCreation+u.CacheRead, u.CacheRead
	}
	if u.Output != nil {
		t.Output = *u.Output
	}
}

// openAIUsage reads the usage of a Responses answer (response.completed of
// a stream, or the whole response) or of a Chat Completions one (its last
// chunk, or the whole answer); the prompt's tokens count the cached ones.
func openAIUsage(doc []byte, t *confine.Tokens) {
	type details struct {
		Cached int64 `json:"cached_tokens"`
	}
	type usage struct {
		Input        *int64  `json:"input_tokens"`
		Output       *int64  `json:"output_tokens"`
		InputDetails details `json:"input_tokens_details"`
		Prompt       *int64  `json:"prompt_tokens"`
		Completion   *int64  `json:"completion_tokens"`
		PromptDetail details `json:"prompt_tokens_details"`
	}
	var d struct {
		Usage    *usage `json:"usage"`
		Response struct {
			Usage *usage `json:"usage"`
		} `json:"response"`
	}
	if json.Unmarshal(doc, &d) != nil {
		return
	}
	u := d.Usage
	if u == nil {
		u = d.Response.Usage
	}
	switch {
	case u == nil:
	case u.Input != nil || u.Output != nil:
		t.Input, t.Cached = deref(u.Input), u.InputDetails.Cached
		t.Output = deref(u.Output)
	case u.Prompt != nil || u.Completion != nil:
		t.Input, t.Cached = deref(u.Prompt), u.PromptDetail.Cached
		t.Output = deref(u.Completion)
	}
}

// googleUsage reads usageMetadata, which every chunk of a stream carries
// as counted so far; thinking tokens are billed as output.
func googleUsage(doc []byte, t *confine.Tokens) {
	var d struct {
		Usage *struct {
			Prompt     int64 `json:"promptTokenCount"`
			ToolPrompt int64 `json:"toolUsePromptTokenCount"`
			Candidates int64 `json:"candidatesTokenCount"`
			Thoughts   int64 `json:"thoughtsTokenCount"`
			Cached     int64 `json:"cachedContentTokenCount"`
		} `json:"usageMetadata"`
	}
	if json.Unmarshal(doc, &d) != nil || d.Usage == nil {
		return
	}
	u := d.Usage
	t.Input, t.Output, t.Cached = u.Prompt+u.ToolPrompt, u.Candidates+u.Thoughts, u.Cached
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
