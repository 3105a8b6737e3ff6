package mockllm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A client's view of one model turn.
type answer struct {
	status int
	header http.Header
	text   string
	call   *Call
	usage  Usage
	raw    []byte
}

// proto describes how a test client talks one protocol: where it posts, how
// it builds a request, and how it reads the answer.
type proto struct {
	name    Protocol
	path    func(stream bool) string
	header  func(key string) http.Header
	request func(prompt string, tools []string, results int, stream bool) any
	decode  func(t *testing.T, stream bool, body []byte) answer
}

var protos = []proto{
	{
		name:   Anthropic,
		path:   func(bool) string { return "/v1/messages" },
		header: func(key string) http.Header { return http.Header{"X-Api-Key": {key}} },
		request: func(prompt string, tools []string, results int, stream bool) any {
			msgs := []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": prompt}}}}
			for i := 0; i < results; i++ {
				msgs = append(msgs,
					map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "t", "name": "x", "input": map[string]any{}}}},
					map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "t", "content": "done"}}})
			}
			var ts []any
			for _, n := range tools {
				ts = append(ts, map[string]any{"name": n, "input_schema": map[string]any{"type": "object"}})
			}
			return map[string]any{"model": "claude-test", "stream": stream, "max_tokens": 100, "messages": msgs, "tools": ts}
		},
		decode: func(t *testing.T, stream bool, body []byte) answer {
			var a answer
			if !stream {
				var m struct {
					Content []struct {
						Type  string         `json:"type"`
						Text  string         `json:"text"`
						Name  string         `json:"name"`
						Input map[string]any `json:"input"`
					} `json:"content"`
					Usage struct {
						In  int `json:"input_tokens"`
						Out int `json:"output_tokens"`
					} `json:"usage"`
				}
				mustJSON(t, body, &m)
				for _, c := range m.Content {
					if c.Type == "text" {
						a.text += c.Text
					} else {
						a.call = &Call{Name: c.Name, Args: c.Input}
					}
				}
				a.usage = Usage{m.Usage.In, m.Usage.Out}
				return a
			}
			var partial string
			for _, ev := range sseData(t, body) {
				var e struct {
					Type         string `json:"type"`
					ContentBlock struct {
						Type string `json:"type"`
						Name string `json:"name"`
					} `json:"content_block"`
					Delta struct {
						Type        string `json:"type"`
						Text        string `json:"text"`
						PartialJSON string `json:"partial_json"`
					} `json:"delta"`
					Message struct {
						Usage struct {
							In int `json:"input_tokens"`
						} `json:"usage"`
					} `json:"message"`
					Usage struct {
						Out int `json:"output_tokens"`
					} `json:"usage"`
				}
				mustJSON(t, ev, &e)
				switch e.Type {
				case "message_start":
					a.usage.Input = e.Message.Usage.In
				case "content_block_start":
					if e.ContentBlock.Type == "tool_use" {
						a.call = &Call{Name: e.ContentBlock.Name}
					}
				case "content_block_delta":
					a.text += e.Delta.Text
					partial += e.Delta.PartialJSON
				case "message_delta":
					a.usage.Output = e.Usage.Out
				}
			}
			if a.call != nil {
				mustJSON(t, []byte(partial), &a.call.Args)
			}
			return a
		},
	},
	{
		name:   Responses,
		path:   func(bool) string { return "/v1/responses" },
		header: func(key string) http.Header { return http.Header{"Authorization": {"Bearer " + key}} },
		request: func(prompt string, tools []string, results int, stream bool) any {
			input := []any{
				map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": "be brief"}}},
				map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": prompt}}},
			}
			for i := 0; i < results; i++ {
				input = append(input,
					map[string]any{"type": "function_call", "call_id": "c", "name": "x", "arguments": "{}"},
					map[string]any{"type": "function_call_output", "call_id": "c", "output": "done"})
			}
			var ts []any
			for _, n := range tools {
				typ := "function"
				if n == "apply_patch" {
					typ = "custom"
				}
				ts = append(ts, map[string]any{"type": typ, "name": n})
			}
			// Recent Codex versions send some tools as an input item,
			// grouped in namespaces.
			input = append([]any{map[string]any{"type": "additional_tools", "role": "developer",
				"tools": []any{map[string]any{"type": "namespace", "name": "functions", "tools": ts}}}}, input...)
			return map[string]any{"model": "gpt-test", "stream": stream, "input": input,
				"tools": []any{map[string]any{"type": "web_search"}}}
		},
		decode: func(t *testing.T, stream bool, body []byte) answer {
			var a answer
			var resp map[string]any
			if !stream {
				mustJSON(t, body, &resp)
			} else {
				for _, ev := range sseData(t, body) {
					var e map[string]any
					mustJSON(t, ev, &e)
					if e["type"] == "response.completed" {
						resp, _ = e["response"].(map[string]any)
					}
				}
			}
			if resp == nil {
				t.Fatalf("no completed response in %s", body)
			}
			b, _ := json.Marshal(resp)
			var r struct {
				Output []struct {
					Type    string `json:"type"`
					Name    string `json:"name"`
					Args    string `json:"arguments"`
					Input   string `json:"input"`
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"output"`
				Usage struct {
					In  int `json:"input_tokens"`
					Out int `json:"output_tokens"`
				} `json:"usage"`
			}
			mustJSON(t, b, &r)
			for _, o := range r.Output {
				switch o.Type {
				case "message":
					for _, c := range o.Content {
						a.text += c.Text
					}
				case "function_call":
					a.call = &Call{Name: o.Name}
					mustJSON(t, []byte(o.Args), &a.call.Args)
				case "custom_tool_call":
					a.call = &Call{Name: o.Name, Custom: o.Input}
				}
			}
			a.usage = Usage{r.Usage.In, r.Usage.Out}
			return a
		},
	},
	{
		name:   Chat,
		path:   func(bool) string { return "/v1/chat/completions" },
		header: func(key string) http.Header { return http.Header{"Authorization": {"Bearer " + key}} },
		request: func(prompt string, tools []string, results int, stream bool) any {
			msgs := []any{map[string]any{"role": "system", "content": "be brief"}, map[string]any{"role": "user", "content": prompt}}
			for i := 0; i < results; i++ {
				msgs = append(msgs,
					map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": "c", "type": "function", "function": map[string]any{"name": "x", "arguments": "{}"}}}},
					map[string]any{"role": "tool", "tool_call_id": "c", "content": "done"})
			}
			var ts []any
			for _, n := range tools {
				ts = append(ts, map[string]any{"type": "function", "function": map[string]any{"name": n}})
			}
			return map[string]any{"model": "chat-test", "stream": stream, "messages": msgs, "tools": ts}
		},
		decode: func(t *testing.T, stream bool, body []byte) answer {
			var a answer
			type toolCall struct {
				Function struct {
					Name string `json:"name"`
					Args string `json:"arguments"`
				} `json:"function"`
			}
			type usage struct {
				In  int `json:"prompt_tokens"`
				Out int `json:"completion_tokens"`
			}
			take := func(text string, calls []toolCall, u *usage) {
				a.text += text
				for _, c := range calls {
					a.call = &Call{Name: c.Function.Name}
					mustJSON(t, []byte(c.Function.Args), &a.call.Args)
				}
				if u != nil {
					a.usage = Usage{u.In, u.Out}
				}
			}
			if !stream {
				var r struct {
					Choices []struct {
						Message struct {
							Content   string     `json:"content"`
							ToolCalls []toolCall `json:"tool_calls"`
						} `json:"message"`
					} `json:"choices"`
					Usage *usage `json:"usage"`
				}
				mustJSON(t, body, &r)
				take(r.Choices[0].Message.Content, r.Choices[0].Message.ToolCalls, r.Usage)
				return a
			}
			data := sseData(t, body)
			if len(data) == 0 || string(data[len(data)-1]) != "[DONE]" {
				t.Fatalf("chat stream does not end with [DONE]: %s", body)
			}
			for _, ev := range data[:len(data)-1] {
				var c struct {
					Choices []struct {
						Delta struct {
							Content   string     `json:"content"`
							ToolCalls []toolCall `json:"tool_calls"`
						} `json:"delta"`
					} `json:"choices"`
					Usage *usage `json:"usage"`
				}
				mustJSON(t, ev, &c)
				take(c.Choices[0].Delta.Content, c.Choices[0].Delta.ToolCalls, c.Usage)
			}
			return a
		},
	},
	{
		name: Gemini,
		path: func(stream bool) string {
			if stream {
				return "/v1beta/models/gemini-test:streamGenerateContent?alt=sse"
			}
			return "/v1beta/models/gemini-test:generateContent"
		},
		header: func(key string) http.Header { return http.Header{"X-Goog-Api-Key": {key}} },
		request: func(prompt string, tools []string, results int, _ bool) any {
			contents := []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": prompt}}}}
			for i := 0; i < results; i++ {
				contents = append(contents,
					map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"name": "x", "args": map[string]any{}}}}},
					map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{"name": "x", "response": map[string]any{"output": "done"}}}}})
			}
			var decls []any
			for _, n := range tools {
				decls = append(decls, map[string]any{"name": n})
			}
			return map[string]any{"contents": contents, "tools": []any{map[string]any{"functionDeclarations": decls}}}
		},
		decode: func(t *testing.T, stream bool, body []byte) answer {
			var a answer
			chunks := [][]byte{body}
			if stream {
				chunks = sseData(t, body)
			}
			for _, ch := range chunks {
				var r struct {
					Candidates []struct {
						Content struct {
							Parts []struct {
								Text         *string `json:"text"`
								FunctionCall *struct {
									Name string         `json:"name"`
									Args map[string]any `json:"args"`
								} `json:"functionCall"`
							} `json:"parts"`
						} `json:"content"`
					} `json:"candidates"`
					Usage struct {
						In  int `json:"promptTokenCount"`
						Out int `json:"candidatesTokenCount"`
					} `json:"usageMetadata"`
				}
				mustJSON(t, ch, &r)
				for _, p := range r.Candidates[0].Content.Parts {
					if p.Text != nil {
						a.text += *p.Text
					}
					if p.FunctionCall != nil {
						a.call = &Call{Name: p.FunctionCall.Name, Args: p.FunctionCall.Args}
					}
				}
				a.usage = Usage{r.Usage.In, r.Usage.Out}
			}
			return a
		},
	},
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
}

// sseData returns the data of every event of a server-sent event stream.
func sseData(t *testing.T, body []byte) [][]byte {
	t.Helper()
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, []byte(d))
		}
	}
	return out
}

// send posts one request the way a client of p would and decodes a
// successful answer; err is the transport error, if any.
func send(t *testing.T, s *Server, p proto, key, prompt string, tools []string, results int, stream bool) (answer, error) {
	t.Helper()
	body, _ := json.Marshal(p.request(prompt, tools, results, stream))
	req, err := http.NewRequest(http.MethodPost, s.URL+p.path(stream), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = p.header(key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, raw: raw}
	if err != nil {
		return a, err
	}
	if resp.StatusCode == http.StatusOK {
		d := p.decode(t, stream, raw)
		d.status, d.header, d.raw = a.status, a.header, raw
		return d, nil
	}
	return a, nil
}

// taskScript is the script of a plan call and an execute call that writes
// /repo/out.txt.
func taskScript() Script {
	return PlanExecute("---TASK---", "PLAN: write out.txt", "---PLAN---", "/repo/out.txt", "hi\n", "DONE")
}

// toolsOf are the tools each protocol's CLI offers for writing a file, and
// the call the mock must make with them.
var toolsOf = map[Protocol]struct {
	tools []string
	want  Call
}{
	Anthropic: {[]string{"Read", "Write", "Bash"}, Call{Name: "Write", Args: map[string]any{"file_path": "/repo/out.txt", "content": "hi\n"}}},
	Responses: {[]string{"exec_command", "apply_patch"}, Call{Name: "apply_patch", Custom: "*** Begin Patch\n*** Add File: /repo/out.txt\n+hi\n*** End Patch\n"}},
	Chat:      {[]string{"bash", "write", "edit"}, Call{Name: "write", Args: map[string]any{"filePath": "/repo/out.txt", "content": "hi\n"}}},
	Gemini:    {[]string{"read_file", "write_file", "run_shell_command"}, Call{Name: "write_file", Args: map[string]any{"file_path": "/repo/out.txt", "content": "hi\n"}}},
}

func TestConversation(t *testing.T) {
	t.Parallel()
	for _, p := range protos {
		for _, stream := range []bool{true, false} {
			name := string(p.name) + map[bool]string{true: "/stream", false: "/plain"}[stream]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				s := New(taskScript())
				defer s.Close()
				tools := toolsOf[p.name]

				plan, err := send(t, s, p, "k1", "Plan it.\n---TASK---\nwrite a file\n---TASK---", tools.tools, 0, stream)
				if err != nil || plan.status != http.StatusOK {
					t.Fatalf("plan: status %d, %v: %s", plan.status, err, plan.raw)
				}
				if plan.text != "PLAN: write out.txt" || plan.call != nil {
					t.Errorf("plan answer = %q, call %+v; want the plan text only", plan.text, plan.call)
				}
				if plan.usage.Input <= 0 || plan.usage.Output <= 0 {
					t.Errorf("plan usage = %+v, want positive token counts", plan.usage)
				}

				exec, err := send(t, s, p, "k1", "Do it.\n---PLAN---\nPLAN\n---PLAN---", tools.tools, 0, stream)
				if err != nil || exec.status != http.StatusOK {
					t.Fatalf("execute: status %d, %v: %s", exec.status, err, exec.raw)
				}
				if exec.text != "Writing the file." {
					t.Errorf("execute text = %q", exec.text)
				}
				if exec.call == nil || !reflect.DeepEqual(*exec.call, tools.want) {
					t.Errorf("execute call = %+v, want %+v", exec.call, tools.want)
				}

				done, err := send(t, s, p, "k1", "Do it.\n---PLAN---\nPLAN\n---PLAN---", tools.tools, 1, stream)
				if err != nil || done.status != http.StatusOK {
					t.Fatalf("after the tool: status %d, %v", done.status, err)
				}
				if done.text != "DONE" || done.call != nil {
					t.Errorf("after the tool: %q, call %+v; want DONE only", done.text, done.call)
				}

				// A side request (a title, say) offers no tools: the execute
				// rule answers with its text and no call.
				side, err := send(t, s, p, "k1", "Title for: ---PLAN--- PLAN", nil, 0, stream)
				if err != nil || side.call != nil || side.text != "Writing the file." {
					t.Errorf("side request: %q, call %+v, %v", side.text, side.call, err)
				}
				other, err := send(t, s, p, "k1", "hello", tools.tools, 0, stream)
				if err != nil || other.text != "OK" {
					t.Errorf("unmatched request: %q, %v; want the default OK", other.text, err)
				}

				reqs := s.Requests()
				if len(reqs) != 5 {
					t.Fatalf("recorded %d requests, want 5", len(reqs))
				}
				r := reqs[2]
				if r.Protocol != p.name || r.Key != "k1" || r.Stream != stream || r.ToolResults != 1 ||
					r.LastToolResult == "" || r.Status != http.StatusOK || !strings.Contains(r.UserText, "---PLAN---") {
					t.Errorf("record = %+v", r)
				}
				var names []string
				for _, tl := range r.Tools {
					names = append(names, tl.Name)
				}
				if !reflect.DeepEqual(names, tools.tools) {
					t.Errorf("recorded tools %v, want %v", names, tools.tools)
				}
				if reqs[1].Call == nil || reqs[1].Call.Name != tools.want.Name || reqs[3].Call != nil {
					t.Errorf("recorded calls: %+v, %+v", reqs[1].Call, reqs[3].Call)
				}
			})
		}
	}
}

func TestFailures(t *testing.T) {
	t.Parallel()
	// The error body each protocol's clients parse, and where its message
	// sits.
	message := map[Protocol]func(t *testing.T, body []byte) (kind, msg string){
		Anthropic: func(t *testing.T, b []byte) (string, string) {
			var e struct {
				Type  string `json:"type"`
				Error struct{ Type, Message string }
			}
			mustJSON(t, b, &e)
			if e.Type != "error" {
				t.Errorf("type = %q, want error", e.Type)
			}
			return e.Error.Type, e.Error.Message
		},
		Responses: openAIMessage,
		Chat:      openAIMessage,
		Gemini: func(t *testing.T, b []byte) (string, string) {
			var e struct {
				Error struct {
					Code    int
					Message string
					Status  string
				}
			}
			mustJSON(t, b, &e)
			return e.Error.Status, e.Error.Message
		},
	}
	wantKind := map[Protocol]map[int]string{
		Anthropic: {401: "authentication_error", 404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error", 503: "api_error"},
		Responses: {401: "invalid_request_error/invalid_api_key", 404: "invalid_request_error/model_not_found", 429: "requests/rate_limit_exceeded", 529: "server_error", 503: "server_error"},
		Chat:      {401: "invalid_request_error/invalid_api_key", 404: "invalid_request_error/model_not_found", 429: "requests/rate_limit_exceeded", 529: "server_error", 503: "server_error"},
		Gemini:    {401: "UNAUTHENTICATED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 529: "UNAVAILABLE", 503: "UNAVAILABLE"},
	}
	for _, p := range protos {
		for _, f := range []Failure{{Status: 401}, {Status: 404, Message: "model: mock-missing-model was not found"}, {Status: 429}, {Status: 429, RetryAfter: "7"}, {Status: 529}, {Status: 503, Message: "try later"}} {
			t.Run(string(p.name)+"/"+strings.TrimSpace(statusText(f.Status)+" "+f.RetryAfter), func(t *testing.T) {
				t.Parallel()
				s := New(Always(f))
				defer s.Close()
				a, err := send(t, s, p, "k", "hi", nil, 0, true)
				if err != nil {
					t.Fatal(err)
				}
				if a.status != f.Status {
					t.Fatalf("status = %d, want %d", a.status, f.Status)
				}
				if got := a.header.Get("Retry-After"); got != f.RetryAfter {
					t.Errorf("Retry-After = %q, want %q", got, f.RetryAfter)
				}
				kind, msg := message[p.name](t, a.raw)
				if kind != wantKind[p.name][f.Status] {
					t.Errorf("error kind = %q, want %q", kind, wantKind[p.name][f.Status])
				}
				if msg == "" || (f.Message != "" && msg != f.Message) {
					t.Errorf("message = %q (set: %q)", msg, f.Message)
				}
				if rs := s.Requests(); len(rs) != 1 || rs[0].Status != f.Status {
					t.Errorf("records = %+v", rs)
				}
			})
		}
		t.Run(string(p.name)+"/close", func(t *testing.T) {
			t.Parallel()
			s := New(Always(Failure{Close: true}))
			defer s.Close()
			if _, err := send(t, s, p, "k", "hi", nil, 0, true); err == nil {
				t.Fatal("a dropped connection gave no error")
			}
			if rs := s.Requests(); len(rs) != 1 || rs[0].Status != 0 {
				t.Errorf("records = %+v", rs)
			}
		})
		for _, stream := range []bool{true, false} {
			t.Run(string(p.name)+"/close mid-stream/"+map[bool]string{true: "stream", false: "plain"}[stream], func(t *testing.T) {
				t.Parallel()
				s := New(Script{Default: Reply{Text: "never complete", Fail: &Failure{CloseMidStream: true}}})
				defer s.Close()
				a, err := send(t, s, p, "k", "hi", nil, 0, stream)
				if err == nil {
					t.Fatalf("a broken answer read whole: %q", a.raw)
				}
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Errorf("read error = %v, want an unexpected EOF", err)
				}
				if a.status != http.StatusOK || len(a.raw) == 0 {
					t.Errorf("status %d, %d bytes before the break; want 200 and a started answer", a.status, len(a.raw))
				}
				if bytes.Contains(a.raw, []byte("never complete")) {
					t.Errorf("the break came after the text: %q", a.raw)
				}
			})
		}
	}
}

// openAIMessage is the type of an OpenAI error, and its code after a slash
// when it has one.
func openAIMessage(t *testing.T, b []byte) (string, string) {
	var e struct {
		Error struct {
			Message string
			Type    string
			Code    *string
		}
	}
	mustJSON(t, b, &e)
	if e.Error.Code != nil {
		return e.Error.Type + "/" + *e.Error.Code, e.Error.Message
	}
	return e.Error.Type, e.Error.Message
}

func TestFirstThenScript(t *testing.T) {
	t.Parallel()
	s := New(Script{
		First: []Reply{{Fail: &Failure{Status: 429, RetryAfter: "1"}}, {Fail: &Failure{Status: 529}}},
		Rules: []Rule{{Replies: []Reply{{Text: "fine"}}}},
	})
	defer s.Close()
	p := protos[0]
	var got []int
	for i := 0; i < 4; i++ {
		a, err := send(t, s, p, "k", "hi", nil, 0, true)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, a.status)
		if a.status == http.StatusOK && a.text != "fine" {
			t.Errorf("answer %d = %q", i, a.text)
		}
	}
	if want := []int{429, 529, 200, 200}; !reflect.DeepEqual(got, want) {
		t.Errorf("statuses = %v, want %v", got, want)
	}
}

// A rule limited to a protocol answers only the requests on it; the others
// go on to the next rule.
func TestRuleOfAProtocol(t *testing.T) {
	t.Parallel()
	s := New(Script{Rules: []Rule{
		{Contains: "hi", Protocol: Anthropic, Replies: []Reply{{Fail: &Failure{Status: 400, Message: "not this one"}}}},
		{Contains: "hi", Replies: []Reply{{Text: "fine"}}},
	}})
	defer s.Close()
	for _, p := range protos {
		a, err := send(t, s, p, "k", "hi", nil, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		want := http.StatusOK
		if p.name == Anthropic {
			want = http.StatusBadRequest
		}
		if a.status != want || (want == http.StatusOK && a.text != "fine") {
			t.Errorf("%s: status %d, %q; want %d", p.name, a.status, a.text, want)
		}
	}
}

func TestWithKey(t *testing.T) {
	t.Parallel()
	s := New(Script{First: []Reply{{Text: "first"}}}, WithKey("sk-right"))
	defer s.Close()
	for _, p := range protos {
		want := http.StatusUnauthorized
		if p.name == Gemini {
			want = http.StatusBadRequest // as Google answers
		}
		a, err := send(t, s, p, "", "hi", nil, 0, false)
		if err != nil || a.status != want {
			t.Errorf("%s without a key: status %d, %v; want %d", p.name, a.status, err, want)
		}
		a, err = send(t, s, p, "sk-wrong", "hi", nil, 0, false)
		if err != nil || a.status != want {
			t.Errorf("%s with a wrong key: status %d, %v; want %d", p.name, a.status, err, want)
		}
	}
	// Rejected requests left the script's first reply for the right key.
	a, err := send(t, s, protos[2], "sk-right", "hi", nil, 0, false)
	if err != nil || a.status != http.StatusOK || a.text != "first" {
		t.Errorf("right key: status %d, %q, %v", a.status, a.text, err)
	}
}

func TestWriteFileToolChoice(t *testing.T) {
	t.Parallel()
	tool := func(names ...string) []Tool {
		var ts []Tool
		for _, n := range names {
			ts = append(ts, Tool{Name: n, Freeform: n == "apply_patch*"})
		}
		return ts
	}
	script := "printf '%s' 'it'\\''s' > '/r/a b.txt'"
	cases := []struct {
		name  string
		tools []Tool
		want  *Call
	}{
		{"claude", tool("Bash", "Write"), &Call{Name: "Write", Args: map[string]any{"file_path": "/r/a b.txt", "content": "it's"}}},
		{"gemini", tool("run_shell_command", "write_file"), &Call{Name: "write_file", Args: map[string]any{"file_path": "/r/a b.txt", "content": "it's"}}},
		{"opencode", tool("bash", "write"), &Call{Name: "write", Args: map[string]any{"filePath": "/r/a b.txt", "content": "it's"}}},
		{"codex freeform patch", []Tool{{Name: "exec_command"}, {Name: "apply_patch", Freeform: true}}, &Call{Name: "apply_patch", Custom: "*** Begin Patch\n*** Add File: /r/a b.txt\n+it's\n*** End Patch\n"}},
		{"codex function patch", tool("apply_patch"), &Call{Name: "apply_patch", Args: map[string]any{"input": "*** Begin Patch\n*** Add File: /r/a b.txt\n+it's\n*** End Patch\n"}}},
		{"codex shell", tool("shell"), &Call{Name: "shell", Args: map[string]any{"command": []string{"bash", "-lc", script}, "workdir": "/r"}}},
		{"codex exec_command", tool("write_stdin", "exec_command"), &Call{Name: "exec_command", Args: map[string]any{"cmd": script, "workdir": "/r"}}},
		{"shell only", tool("run_shell_command"), &Call{Name: "run_shell_command", Args: map[string]any{"command": script, "description": "Write a b.txt"}}},
		{"no tool", tool("read_file", "glob"), nil},
		{"no tools at all", nil, nil},
	}
	for _, c := range cases {
		got := WriteFile("/r/a b.txt", "it's").Input(c.tools)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: call = %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestRunShellToolChoice(t *testing.T) {
	t.Parallel()
	cases := []struct {
		tools []Tool
		want  *Call
	}{
		{[]Tool{{Name: "Write"}, {Name: "Bash"}}, &Call{Name: "Bash", Args: map[string]any{"command": "go test ./...", "description": "Run a command"}}},
		{[]Tool{{Name: "exec_command"}}, &Call{Name: "exec_command", Args: map[string]any{"cmd": "go test ./...", "workdir": "/r"}}},
		{[]Tool{{Name: "shell"}}, &Call{Name: "shell", Args: map[string]any{"command": []string{"bash", "-lc", "go test ./..."}, "workdir": "/r"}}},
		{[]Tool{{Name: "write_file"}, {Name: "run_shell_command"}}, &Call{Name: "run_shell_command", Args: map[string]any{"command": "go test ./...", "description": "Run a command"}}},
		{[]Tool{{Name: "write"}, {Name: "bash"}}, &Call{Name: "bash", Args: map[string]any{"command": "go test ./...", "description": "Run a command"}}},
		{[]Tool{{Name: "write_file"}}, nil},
	}
	for _, c := range cases {
		if got := RunShell("go test ./...", "/r").Input(c.tools); !reflect.DeepEqual(got, c.want) {
			t.Errorf("tools %v: call = %+v, want %+v", c.tools, got, c.want)
		}
	}
}

func TestAddFilePatch(t *testing.T) {
	t.Parallel()
	got := AddFilePatch("x/y.go", "package y\n\nfunc F() {}\n")
	want := "*** Begin Patch\n*** Add File: x/y.go\n+package y\n+\n+func F() {}\n*** End Patch\n"
	if got != want {
		t.Errorf("patch =\n%s\nwant\n%s", got, want)
	}
}

func TestGeminiStructuredAnswer(t *testing.T) {
	t.Parallel()
	s := New(Script{Default: Reply{Text: "not json"}})
	defer s.Close()
	schema := map[string]any{"type": "OBJECT", "properties": map[string]any{
		"reasoning":    map[string]any{"type": "STRING"},
		"score":        map[string]any{"type": "INTEGER"},
		"next_speaker": map[string]any{"type": "STRING", "enum": []any{"user", "model"}},
		"flags":        map[string]any{"type": "ARRAY"},
		"inner":        map[string]any{"type": "OBJECT", "properties": map[string]any{"ok": map[string]any{"type": "BOOLEAN"}}},
	}}
	body, _ := json.Marshal(map[string]any{
		"contents":         []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "classify"}}}},
		"generationConfig": map[string]any{"responseMimeType": "application/json", "responseJsonSchema": schema},
	})
	resp, err := http.Post(s.URL+"/v1beta/models/flash:generateContent", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	a := protos[3].decode(t, false, raw)
	var got map[string]any
	mustJSON(t, []byte(a.text), &got)
	want := map[string]any{"reasoning": "mock", "score": 1.0, "next_speaker": "user", "flags": []any{}, "inner": map[string]any{"ok": false}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("structured answer = %v, want %v", got, want)
	}
}

func TestSidePaths(t *testing.T) {
	t.Parallel()
	s := New(Script{})
	defer s.Close()
	resp, err := http.Head(s.URL + "/")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("HEAD /: %v, %v", resp, err)
	}
	resp, err = http.Post(s.URL+"/v1beta/models/g:countTokens", "application/json", strings.NewReader(`{"contents":[]}`))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("countTokens: %v, %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Get(s.URL + "/v1/responses")
	if err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /v1/responses (a websocket attempt): %v, %v; want 404", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Post(s.URL+"/v1/messages", "application/json", strings.NewReader("{broken"))
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("broken body: %v, %v; want 400", resp, err)
	}
	resp.Body.Close()
	var got []string
	var last time.Time
	for _, r := range s.Requests() {
		got = append(got, string(r.Protocol)+" "+r.Path+" "+statusText(r.Status))
		if r.Time.Before(last) || r.Time.IsZero() {
			t.Errorf("request times out of order: %v after %v", r.Time, last)
		}
		last = r.Time
	}
	want := []string{"gemini /v1beta/models/g:countTokens OK", "unknown /v1/responses Not Found", "anthropic /v1/messages Bad Request"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("records = %q, want %q", got, want)
	}
}

func TestReadFileToolChoice(t *testing.T) {
	t.Parallel()
	cases := []struct {
		tools []Tool
		want  *Call
	}{
		{[]Tool{{Name: "Bash"}, {Name: "Read"}}, &Call{Name: "Read", Args: map[string]any{"file_path": "/r/a b.txt"}}},
		{[]Tool{{Name: "run_shell_command"}, {Name: "read_file"}}, &Call{Name: "read_file", Args: map[string]any{"file_path": "/r/a b.txt"}}},
		{[]Tool{{Name: "bash"}, {Name: "read"}}, &Call{Name: "read", Args: map[string]any{"filePath": "/r/a b.txt"}}},
		{[]Tool{{Name: "exec_command"}, {Name: "apply_patch", Freeform: true}}, &Call{Name: "exec_command", Args: map[string]any{"cmd": "cat '/r/a b.txt'", "workdir": "/r"}}},
		{[]Tool{{Name: "write_file"}}, nil},
	}
	for _, c := range cases {
		if got := ReadFile("/r/a b.txt").Input(c.tools); !reflect.DeepEqual(got, c.want) {
			t.Errorf("tools %v: call = %+v, want %+v", c.tools, got, c.want)
		}
	}
}

// TestAnswerFromTheConversation: a script's Answer sees the whole request
// and answers before the rules (or leaves it to them), and BodyTokens
// counts its input from the body's size.
func TestAnswerFromTheConversation(t *testing.T) {
	t.Parallel()
	for _, p := range protos {
		s := New(Script{BodyTokens: true, Rules: []Rule{{Replies: []Reply{{Text: "rule"}}}},
			Answer: func(req Request) (Reply, bool) {
				if strings.Contains(string(req.Body), "SEEN-BEFORE") {
					return Reply{Text: "remembered"}, true
				}
				return Reply{}, false
			}})
		a, err := send(t, s, p, "k", "hello", nil, 0, false)
		if err != nil || a.text != "rule" {
			t.Errorf("%s: %q %v, want the rule's answer", p.name, a.text, err)
		}
		a, err = send(t, s, p, "k", "hello SEEN-BEFORE", nil, 0, false)
		if err != nil || a.text != "remembered" {
			t.Errorf("%s: %q %v, want the answer from the conversation", p.name, a.text, err)
		}
		if reqs := s.Requests(); a.usage.Input != len(reqs[1].Body)/4+1 {
			t.Errorf("%s: input tokens %d for a body of %d bytes", p.name, a.usage.Input, len(reqs[1].Body))
		}
		s.Close()
	}
}

// TestIDsOfEachTurn: every answer's message and tool call have ids of
// their own, as the real APIs give: a CLI that continues a session merges
// the turns of one id.
func TestIDsOfEachTurn(t *testing.T) {
	t.Parallel()
	s := New(Script{Default: Reply{Text: "x", Tool: WriteFile("/r/a", "b")}})
	defer s.Close()
	for _, p := range protos {
		seen := map[string]bool{}
		for range 2 {
			a, err := send(t, s, p, "k", "hi", toolsOf[p.name].tools, 0, false)
			if err != nil {
				t.Fatal(err)
			}
			ids := regexp.MustCompile(`"(?:id|call_id|responseId)":"([^"]+)"`).FindAllStringSubmatch(string(a.raw), -1)
			for _, m := range ids {
				if p.name != Gemini && seen[m[1]] {
					t.Errorf("%s: the id %q of an earlier answer again", p.name, m[1])
				}
				seen[m[1]] = true
			}
		}
		if p.name != Gemini && len(seen) < 4 {
			t.Errorf("%s: ids %v, want a message's and a call's per answer", p.name, seen)
		}
	}
}

// TestWorkdir: a tool call's paths under the script's Repo move to the
// folder the request says the CLI works in, on every protocol; a request
// that names none keeps them.
func TestWorkdir(t *testing.T) {
	t.Parallel()
	find := regexp.MustCompile(`/wt/[a-z]+`)
	for _, p := range protos {
		s := New(Script{Repo: "/repo", Workdir: func(body []byte) string { return string(find.Find(body)) },
			Rules: []Rule{{Replies: []Reply{{Tool: WriteFile("/repo/out.txt", "hi\n")}}}}})
		tools := toolsOf[p.name].tools
		if _, err := send(t, s, p, "k", "You work in /wt/home. Write out.txt", tools, 0, false); err != nil {
			t.Fatal(err)
		}
		if _, err := send(t, s, p, "k", "Write out.txt", tools, 0, false); err != nil {
			t.Fatal(err)
		}
		// What the server answered, as it recorded it.
		reqs := s.Requests()
		orig := toolsOf[p.name].want
		if got, want := reqs[0].Call, orig.moved("/repo", "/wt/home"); !reflect.DeepEqual(got, want) || !strings.Contains(got.Custom+fmt.Sprint(got.Args), "/wt/home/out.txt") {
			t.Errorf("%s: call %+v, want %+v", p.name, got, want)
		}
		if got := reqs[1].Call; !reflect.DeepEqual(got, &orig) {
			t.Errorf("%s: without a folder: %+v", p.name, got)
		}
		s.Close()
	}
	c := (&Call{Name: "shell", Args: map[string]any{"command": []string{"bash", "-lc", "cat /repo/a /repository/b"}, "workdir": "/repo", "n": 1}}).moved("/repo", "/w")
	if want := (&Call{Name: "shell", Args: map[string]any{"command": []string{"bash", "-lc", "cat /w/a /repository/b"}, "workdir": "/w", "n": 1}}); !reflect.DeepEqual(c, want) {
		t.Errorf("moved = %+v", c)
	}
}
