// Package mockllm serves stand-ins for the model APIs that coding-agent CLIs
// talk to, on 127.0.0.1, so that a real CLI can be driven through a scripted
// conversation without network access or credentials.
//
// One Server answers four wire protocols at once, told apart by the request
// path:
//
//   - Anthropic Messages (POST /v1/messages), streamed as server-sent events;
//     used by Claude Code through ANTHROPIC_BASE_URL.
//   - OpenAI Responses (POST /v1/responses), streamed; used by Codex.
//   - OpenAI Chat Completions (POST /v1/chat/completions), streamed; used by
//     opencode through an OpenAI-compatible provider.
//   - Gemini generateContent and streamGenerateContent
//     (POST /v1beta/models/MODEL:ACTION); used by the Gemini CLI through
//     GOOGLE_GEMINI_BASE_URL.
//
// What the model says is decided by a Script: each request is matched by the
// text of its user messages, and the reply is chosen by how many tool results
// the conversation already holds, so the server keeps no conversation state
// and side requests (titles, summaries) cannot shift a script out of step.
//
// A reply may instead be a failure: an HTTP status with the protocol's usual
// error body, a dropped connection, or a Refusal (an account out of credit,
// a prompt over the context window, a per-minute quota) worded as each API
// words it.
package mockllm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Protocol names the wire protocol a request arrived on.
type Protocol string

// The protocols the server speaks.
const (
	Anthropic Protocol = "anthropic"
	Responses Protocol = "openai-responses"
	Chat      Protocol = "openai-chat"
	Gemini    Protocol = "gemini"
)

// Reply is what the mock model answers to one request: a failure, or text
// followed by at most one tool call.
type Reply struct {
	// Text is the assistant's text. When a tool call follows, it is sent
	// first, in the same turn.
	Text string
	// Tool, when set, is a tool call the model makes after Text.
	Tool *ToolCall
	// Fail, when set, answers with an HTTP error or a broken connection
	// instead of a model turn.
	Fail *Failure
}

// ToolCall asks the CLI to run one of its own tools. Which tool, and with
// which arguments, depends on what the request offers: Input builds the call
// from the names of the tools the CLI sent. A nil result means no offered tool
// fits; the model then answers with text only.
type ToolCall struct {
	Input func(tools []Tool) *Call
}

// Tool is a tool a request offers the model. Freeform marks a tool whose
// input is plain text (the Responses API's custom tools).
type Tool struct {
	Name     string
	Freeform bool
}

// Call is a concrete tool call: a tool name and its arguments. Custom is set
// for a free-form tool (the Responses API's custom tools, such as Codex's
// apply_patch), whose input is plain text instead of a JSON object.
type Call struct {
	Name   string
	Args   map[string]any
	Custom string
}

// Failure describes an error answer.
type Failure struct {
	// Status is the HTTP status (401, 429, 503, 529...).
	Status int
	// RetryAfter, when not empty, is sent as the Retry-After header (and the
	// protocol's own reset headers where it has them).
	RetryAfter string
	// Message replaces the protocol's usual error message for Status.
	Message string
	// Close drops the connection without any answer.
	Close bool
	// CloseMidStream starts a normal streamed answer and drops the
	// connection after its first event.
	CloseMidStream bool
	// Refusal, when set, answers as the protocol's API words that refusal
	// (see Refusal); Status and Message, when set, override its own.
	Refusal Refusal
	// Tokens and Limit are the prompt size and context window an
	// OverContext refusal reports (0: the defaults).
	Tokens, Limit int
	// Headers are added to the answer.
	Headers map[string]string
}

// Rule answers the requests whose user text contains Contains (every
// request, when empty). Replies[k] answers a request whose conversation
// already holds k tool results; past the end, the last reply is used.
type Rule struct {
	Contains string
	// Protocol, when set, limits the rule to requests on that protocol:
	// two CLIs on one server (a primary and a fallback of another kind)
	// can be answered apart.
	Protocol Protocol
	Replies  []Reply
}

// Script decides every answer of a Server.
type Script struct {
	// First answers the first len(First) requests in order, whatever they
	// say; use it for failures that last a few requests (a 429, then
	// success).
	First []Reply
	// Rules are tried in order; the first that matches answers.
	Rules []Rule
	// Default answers a request no rule matches. Its zero value is the
	// text "OK".
	Default Reply
	// Answer, when set, answers a request before the rules do, from the
	// whole request (its body holds the conversation it carries); false
	// leaves it to the rules. It is called from the server's handlers,
	// one request at a time per connection.
	Answer func(req Request) (Reply, bool)
	// Repo and Workdir move the paths of tool calls to the folder the CLI
	// works in, which a real model learns from the prompt: a path under
	// Repo, in a call's arguments or its free-form input, is rewritten to
	// the same path under Workdir(body), when that names a folder ("":
	// left as it is). A script is written against the repository; the CLI
	// may work in a worktree of it.
	Repo    string
	Workdir func(body []byte) string
	// BodyTokens counts a request's input tokens from the size of its body
	// (four bytes a token), the whole conversation it carries, rather than
	// from its user text.
	BodyTokens bool
}

// Request is the server's record of one request.
type Request struct {
	// Time is when the request arrived.
	Time     time.Time
	Protocol Protocol
	Method   string
	Path     string
	// Key is the credential the request carried (x-api-key, a bearer
	// token, x-goog-api-key or the key query parameter).
	Key string
	// Via is the request's Via header: peal's model endpoint names itself
	// there.
	Via    string
	Model  string
	Stream bool
	// UserText is the text of every user message, joined by newlines.
	UserText string
	// ToolResults counts the tool results in the conversation.
	ToolResults int
	// LastToolResult is the text of the last tool result, which tells
	// whether the CLI ran the tool or refused it.
	LastToolResult string
	// Tools are the tools the request offers.
	Tools []Tool
	// Status is the HTTP status answered (0 for a dropped connection).
	Status int
	// Reply is what was answered, after tool selection: Call is the tool
	// call made, if any.
	Text string
	Call *Call
	// Body is the raw request body.
	Body []byte

	// jsonAnswer, when set, is the answer to a request for structured
	// output, given instead of the script's text (not instead of its
	// failures).
	jsonAnswer string
}

// Server is a running mock model API. Close it when done.
type Server struct {
	// URL is the server's root, http://127.0.0.1:PORT, without a path.
	URL    string
	srv    *httptest.Server
	script Script

	mu   sync.Mutex
	reqs []Request
	seen int
	logw io.Writer
	key  string
	// viaPeal: the key counts only in a request peal's endpoint forwarded.
	viaPeal bool
}

// Option configures a Server.
type Option func(*Server)

// WithLog writes one line per request to w: protocol, path, model, tool
// results, and the answer. Useful when a CLI misbehaves against the mock.
func WithLog(w io.Writer) Option { return func(s *Server) { s.logw = w } }

// WithKey makes the server check credentials: a request that does not carry
// key is answered as the real API answers a missing or wrong key: 401, or
// for the Gemini protocol 400 with GoogleBadKey. Such requests do not use up
// the script's First replies.
func WithKey(key string) Option { return func(s *Server) { s.key = key } }

// ThroughPeal makes the key of WithKey count only in a request that peal's
// model endpoint forwarded (its Via header names peal): the CLI under test
// holds a placeholder, never the key, so the key can only have come from
// peal. A request without it is answered as one with a wrong key.
func ThroughPeal() Option { return func(s *Server) { s.viaPeal = true } }

// placeholderPrefix opens the placeholder keys peal gives its calls
// (confine.IsPlaceholder): the mock refuses them, as the real API would,
// and says so.
const placeholderPrefix = "peal-placeholder-"

// New starts a server on 127.0.0.1 that answers with script.
func New(script Script, opts ...Option) *Server {
	s := &Server{script: script}
	for _, o := range opts {
		o(s)
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the server and drops open connections.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Requests returns a copy of the record of every model request so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Unknown is the Protocol recorded for a request to a path the server does
// not speak; it is answered 404.
const Unknown Protocol = "unknown"

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	var p protocolImpl
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages"):
		p = anthropicImpl{}
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/responses"):
		p = responsesImpl{}
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions"):
		p = chatImpl{}
	case r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/models/") &&
		(strings.HasSuffix(r.URL.Path, ":generateContent") || strings.HasSuffix(r.URL.Path, ":streamGenerateContent")):
		p = geminiImpl{}
	case r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/models/") && strings.HasSuffix(r.URL.Path, ":countTokens"):
		s.record(Request{Time: arrived, Protocol: Gemini, Method: r.Method, Path: r.URL.Path, Key: geminiKey(r), Status: http.StatusOK})
		writeJSON(w, http.StatusOK, map[string]any{"totalTokens": len(body) / 4})
		return
	case r.Method == http.MethodHead && r.URL.Path == "/":
		// Claude Code checks that the API answers before its first request.
		w.WriteHeader(http.StatusOK)
		return
	default:
		s.record(Request{Time: arrived, Protocol: Unknown, Method: r.Method, Path: r.URL.Path, Status: http.StatusNotFound})
		http.NotFound(w, r)
		return
	}
	req, err := p.parse(r, body)
	req.Time, req.Method, req.Path, req.Body = arrived, r.Method, r.URL.Path, body
	if err != nil {
		req.Status = http.StatusBadRequest
		s.record(req)
		p.writeError(w, &Failure{Status: http.StatusBadRequest, Message: "mockllm: " + err.Error()}, req.Model)
		return
	}
	req.Via = r.Header.Get("Via")
	var reply Reply
	if s.key != "" && (req.Key != s.key || s.viaPeal && !strings.Contains(req.Via, "peal")) {
		reply = Reply{Fail: &Failure{Status: http.StatusUnauthorized}}
		if req.Protocol == Gemini {
			// Google answers a wrong or missing API key with 400
			// INVALID_ARGUMENT, not with 401.
			reply.Fail = &Failure{Status: http.StatusBadRequest, Message: GoogleBadKey}
		}
		if strings.HasPrefix(req.Key, placeholderPrefix) {
			reply.Fail.Message = "mockllm: the placeholder key peal gave a call reached the API"
		}
	} else {
		reply = s.pick(&req)
	}
	if reply.Fail == nil && req.jsonAnswer != "" {
		reply = Reply{Text: req.jsonAnswer}
	}
	switch {
	case reply.Fail != nil && reply.Fail.Close:
		s.record(req)
		dropConnection(w)
		return
	case reply.Fail != nil && !reply.Fail.CloseMidStream:
		req.Status = reply.Fail.statusIn(req.Protocol, req.Model)
		s.record(req)
		p.writeError(w, reply.Fail, req.Model)
		return
	}
	var call *Call
	if reply.Tool != nil && reply.Tool.Input != nil {
		call = reply.Tool.Input(req.Tools)
	}
	if call != nil && s.script.Repo != "" && s.script.Workdir != nil {
		if dir := s.script.Workdir(req.Body); dir != "" {
			call = call.moved(s.script.Repo, dir)
		}
	}
	req.Text, req.Call, req.Status = reply.Text, call, http.StatusOK
	s.record(req)
	t := turn{text: reply.Text, call: call, model: req.Model, usage: usageFor(req, reply.Text, call)}
	if s.script.BodyTokens {
		t.usage.Input = len(req.Body)/4 + 1
	}
	if reply.Fail != nil && reply.Fail.CloseMidStream {
		if !req.Stream {
			// A plain answer breaks off after its first bytes.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "{")
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
			dropConnection(w)
			return
		}
		t.breakAfterFirst = true
	}
	p.writeTurn(w, req.Stream, t)
}

// moved is the call with every path under from moved under to.
func (c *Call) moved(from, to string) *Call {
	move := func(v string) string {
		if v == from || strings.HasPrefix(v, from+"/") {
			return to + strings.TrimPrefix(v, from)
		}
		// A path inside a command or a patch.
		return strings.ReplaceAll(v, from+"/", to+"/")
	}
	out := &Call{Name: c.Name, Custom: move(c.Custom), Args: make(map[string]any, len(c.Args))}
	for k, v := range c.Args {
		switch v := v.(type) {
		case string:
			out.Args[k] = move(v)
		case []string:
			list := make([]string, len(v))
			for i, e := range v {
				list[i] = move(e)
			}
			out.Args[k] = list
		default:
			out.Args[k] = v
		}
	}
	return out
}

// pick chooses the reply for req and counts it.
func (s *Server) pick(req *Request) Reply {
	s.mu.Lock()
	n := s.seen
	s.seen++
	s.mu.Unlock()
	if n < len(s.script.First) {
		return s.script.First[n]
	}
	if s.script.Answer != nil {
		if r, ok := s.script.Answer(*req); ok {
			return r
		}
	}
	for _, rule := range s.script.Rules {
		if rule.Contains != "" && !strings.Contains(req.UserText, rule.Contains) ||
			rule.Protocol != "" && rule.Protocol != req.Protocol {
			continue
		}
		if len(rule.Replies) == 0 {
			break
		}
		k := req.ToolResults
		if k >= len(rule.Replies) {
			k = len(rule.Replies) - 1
		}
		return rule.Replies[k]
	}
	d := s.script.Default
	if d.Text == "" && d.Tool == nil && d.Fail == nil {
		d.Text = "OK"
	}
	return d
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	s.reqs = append(s.reqs, r)
	logw := s.logw
	s.mu.Unlock()
	if logw == nil {
		return
	}
	answer := strconv.Itoa(r.Status)
	if r.Call != nil {
		answer += " call " + r.Call.Name
	}
	last := r.LastToolResult
	if len(last) > 300 {
		last = last[:300] + "..."
	}
	fmt.Fprintf(logw, "mockllm: %s %s %s %s model=%q tools=%d results=%d stream=%v -> %s\n",
		r.Time.Format("15:04:05.000"), r.Protocol, r.Method, r.Path, r.Model, len(r.Tools), r.ToolResults, r.Stream, answer)
	if last != "" {
		fmt.Fprintf(logw, "mockllm:   last tool result: %q\n", last)
	}
}

// turn is one successful model answer, ready to be written in a protocol.
type turn struct {
	text            string
	call            *Call
	model           string
	usage           Usage
	breakAfterFirst bool
}

// Usage is the token count the mock reports for a turn.
type Usage struct {
	Input  int
	Output int
}

// usageFor makes up token counts that depend only on the request and the
// answer, so tests that sum usage get stable figures.
func usageFor(req Request, text string, call *Call) Usage {
	out := len(text)/4 + 1
	if call != nil {
		b, _ := json.Marshal(call.Args)
		out += (len(b)+len(call.Custom))/4 + 1
	}
	return Usage{Input: len(req.UserText)/4 + 1, Output: out}
}

type protocolImpl interface {
	parse(r *http.Request, body []byte) (Request, error)
	// writeError answers f to a request for model.
	writeError(w http.ResponseWriter, f *Failure, model string)
	writeTurn(w http.ResponseWriter, stream bool, t turn)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// As the real APIs write it: "tokens > 200000", not "\u003e".
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// sse writes server-sent events and flushes each one, so the client sees
// the stream as a real API would send it.
type sse struct {
	w     http.ResponseWriter
	count int
	// breakAfterFirst drops the connection once the first event is out.
	breakAfterFirst bool
	broken          bool
}

func newSSE(w http.ResponseWriter, breakAfterFirst bool) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, breakAfterFirst: breakAfterFirst}
}

// event writes one event; name may be empty for data-only streams. data is
// marshalled to JSON unless it is a string.
func (e *sse) event(name string, data any) {
	if e.broken {
		return
	}
	var payload string
	if s, ok := data.(string); ok {
		payload = s
	} else {
		b, _ := json.Marshal(data)
		payload = string(b)
	}
	if name != "" {
		fmt.Fprintf(e.w, "event: %s\n", name)
	}
	fmt.Fprintf(e.w, "data: %s\n\n", payload)
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
	e.count++
	if e.breakAfterFirst {
		e.broken = true
		dropConnection(e.w)
	}
}

// dropConnection closes the client's connection without finishing the
// answer.
func dropConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if buf != nil {
		_ = buf.Flush()
	}
	_ = conn.Close()
}

// retryHeaders sets Retry-After from f, when given, and f's own headers.
func retryHeaders(w http.ResponseWriter, f *Failure) {
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	for k, v := range f.Headers {
		w.Header().Set(k, v)
	}
}

// statusIn is the HTTP status f answers in protocol p.
func (f *Failure) statusIn(p Protocol, model string) int {
	if r, ok := f.refusalIn(p, model); ok {
		return r.status
	}
	return f.Status
}

// turns numbers the model's answers, so that every message and tool call
// has an id of its own, as the real APIs give: a CLI that continues a
// session merges the turns of one id into one.
var turns atomic.Int64

// nextTurn is the number of a new answer, for its ids.
func nextTurn() string { return strconv.FormatInt(turns.Add(1), 10) }

// statusText is the reason phrase of status, or "status N" for a code Go
// does not name (such as 529).
func statusText(status int) string {
	if t := http.StatusText(status); t != "" {
		return t
	}
	return "status " + strconv.Itoa(status)
}
