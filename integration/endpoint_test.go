package integration

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	pealagent "peal/agent"
	"peal/confine"
	"peal/internal/testkit/mockllm"
)

// endpointCase is one API's streamed request, as its CLI sends it.
type endpointCase struct {
	protocol mockllm.Protocol
	api      *pealagent.API
	path     string
	header   string // where the key goes
	prefix   string
	body     string
}

var endpointCases = []endpointCase{
	{mockllm.Anthropic, pealagent.AnthropicAPI, "/v1/messages", "X-Api-Key", "",
		`{"model":"m","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	{mockllm.Responses, pealagent.OpenAIAPI, "/v1/responses", "Authorization", "Bearer ",
		`{"model":"m","stream":true,"input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}]}`},
	{mockllm.Chat, pealagent.OpenAIAPI, "/v1/chat/completions", "Authorization", "Bearer ",
		`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	{mockllm.Gemini, pealagent.GoogleAPI, "/v1beta/models/m:streamGenerateContent?alt=sse", "X-Goog-Api-Key", "",
		`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`},
}

// openEndpoint is a call's model endpoint holding testKey for c's API, in
// front of srv; and the placeholder a call would send.
func openEndpoint(tb testing.TB, srv *mockllm.Server, c endpointCase) (*confine.KeyEndpoint, string) {
	tb.Helper()
	routes, err := confine.ParseRoutes(c.api.Routes...)
	if err != nil {
		tb.Fatal(err)
	}
	up, _ := url.Parse(srv.URL)
	hold := &confine.KeyHold{Count: &confine.KeyCount{}, APIs: []confine.HeldAPI{{Name: c.api.Name, Upstream: up,
		Keys: map[string]string{"KEY": testKey}, Places: c.api.Places, Routes: routes, Usage: c.api.Usage}}}
	e, err := confine.NewProxy(nil).OpenKeys("bench", hold)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close() })
	env, _ := e.Point()
	return e, strings.TrimPrefix(env[0], "KEY=")
}

// firstByte sends c's request to base with key and reads the first byte
// of the answer's body; the rest is read once the clock is stopped.
func firstByte(b *testing.B, client *http.Client, base, key string, c endpointCase) {
	req, _ := http.NewRequest("POST", base+c.path, bytes.NewReader([]byte(c.body)))
	req.Header.Set(c.header, c.prefix+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != 200 {
		body, _ := io.ReadAll(resp.Body)
		b.Fatalf("%s: %s %s", c.protocol, resp.Status, body)
	}
	if _, err := resp.Body.Read(make([]byte, 1)); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	b.StartTimer()
}

// BenchmarkModelEndpointFirstByte is the time to the first byte of a
// streamed answer of each mock model API, straight (as an unconfined call,
// holding the key, sends it) and through a call's model endpoint (as a
// confined call, holding a placeholder, does), on a connection kept from
// one request to the next as the CLIs keep theirs. The endpoint's cost is
// the difference (docs/benchmarks.md). The mock takes the key only from
// peal on the endpoint's side.
func BenchmarkModelEndpointFirstByte(b *testing.B) {
	for _, c := range endpointCases {
		direct := mockllm.New(mockllm.Script{Default: mockllm.Reply{Text: "the answer"}}, mockllm.WithKey(testKey))
		held := pealMock(mockllm.Script{Default: mockllm.Reply{Text: "the answer"}})
		b.Cleanup(direct.Close)
		b.Cleanup(held.Close)
		e, placeholder := openEndpoint(b, held, c)
		for _, way := range []struct{ name, base, key string }{{"direct", direct.URL, testKey}, {"endpoint", e.URL(), placeholder}} {
			b.Run(string(c.protocol)+"/"+way.name, func(b *testing.B) {
				tr := &http.Transport{}
				defer tr.CloseIdleConnections()
				client := &http.Client{Transport: tr}
				firstByte(b, client, way.base, way.key, c)
				for b.Loop() {
					firstByte(b, client, way.base, way.key, c)
				}
			})
		}
	}
}

// TestModelEndpointToTheMocks: each mock API answers a streamed request
// through a call's model endpoint, the key added by peal, and the endpoint
// counts the tokens the stream says (the benchmark's setting, checked).
func TestModelEndpointToTheMocks(t *testing.T) {
	t.Parallel()
	for _, c := range endpointCases {
		srv := pealMock(mockllm.Script{Default: mockllm.Reply{Text: "the answer"}})
		t.Cleanup(srv.Close)
		e, placeholder := openEndpoint(t, srv, c)
		req, _ := http.NewRequest("POST", e.URL()+c.path, strings.NewReader(c.body))
		req.Header.Set(c.header, c.prefix+placeholder)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		reqs := srv.Requests()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "the answer") || len(reqs) != 1 || reqs[0].Key != testKey || !reqs[0].Stream {
			t.Errorf("%s: %s %q; the mock saw %+v", c.protocol, resp.Status, body, reqs)
		}
	}
}
