package mockllm

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"peal/agent"
	"peal/confine"
)

// endpointFor opens a model endpoint of peal's for one call, holding key
// for the API that protocol p speaks, in front of s.
func endpointFor(t *testing.T, s *Server, p Protocol, key string) (*confine.KeyEndpoint, *confine.KeyHold, string) {
	t.Helper()
	api := map[Protocol]*agent.API{Anthropic: agent.AnthropicAPI, Responses: agent.OpenAIAPI, Chat: agent.OpenAIAPI, Gemini: agent.GoogleAPI}[p]
	routes, err := confine.ParseRoutes(api.Routes...)
	if err != nil {
		t.Fatal(err)
	}
	up, _ := url.Parse(s.URL)
	hold := &confine.KeyHold{Count: &confine.KeyCount{}, APIs: []confine.HeldAPI{{Name: api.Name, Upstream: up,
		Keys: map[string]string{"THE_KEY": key}, Places: api.Places, Routes: routes, Usage: api.Usage}}}
	e, err := confine.NewProxy(nil).OpenKeys("c1", hold)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	env, _ := e.Point()
	placeholder, _ := strings.CutPrefix(env[0], "THE_KEY=")
	return e, hold, placeholder
}

// sendTo posts p's request for prompt to base with key.
func sendTo(t *testing.T, base string, p proto, key, prompt string, stream bool) answer {
	t.Helper()
	body, _ := json.Marshal(p.request(prompt, nil, 0, stream))
	req, err := http.NewRequest(http.MethodPost, base+p.path(stream), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = p.header(key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, raw: raw}
	if resp.StatusCode == http.StatusOK {
		d := p.decode(t, stream, raw)
		d.status, d.raw = a.status, raw
		return d
	}
	return a
}

// TestThroughPeal: with ThroughPeal, the mock takes the key only from peal's
// model endpoint: the right key sent straight to it is refused, so is the
// placeholder peal gives a call (said as such); the placeholder sent to
// the endpoint reaches it as the key. The endpoint counts the tokens each
// protocol's answer says, streamed or not.
func TestThroughPeal(t *testing.T) {
	t.Parallel()
	for _, p := range protos {
		for _, stream := range []bool{false, true} {
			s := New(Script{Default: Reply{Text: "the answer"}}, WithKey("sk-right"), ThroughPeal())
			defer s.Close()
			e, hold, placeholder := endpointFor(t, s, p.name, "sk-right")
			refused := http.StatusUnauthorized
			if p.name == Gemini {
				refused = http.StatusBadRequest
			}
			if a := sendTo(t, s.URL, p, "sk-right", "hi", stream); a.status != refused {
				t.Errorf("%s: the right key sent straight: %d %s", p.name, a.status, a.raw)
			}
			if a := sendTo(t, s.URL, p, placeholder, "hi", stream); a.status != refused || !strings.Contains(string(a.raw), "placeholder key peal gave a call reached the API") {
				t.Errorf("%s: the placeholder sent straight: %d %s", p.name, a.status, a.raw)
			}
			a := sendTo(t, e.URL(), p, placeholder, "hi there", stream)
			if a.status != http.StatusOK || a.text != "the answer" {
				t.Fatalf("%s (stream %v): through the endpoint: %d %q %s", p.name, stream, a.status, a.text, a.raw)
			}
			reqs := s.Requests()
			last := reqs[len(reqs)-1]
			if last.Key != "sk-right" || !strings.Contains(last.Via, "peal") {
				t.Errorf("%s: the mock got key %q via %q", p.name, last.Key, last.Via)
			}
			got := hold.Count.Usage()
			if got.Requests != 1 || got.Input != int64(a.usage.Input) || got.Output != int64(a.usage.Output) || a.usage.Output == 0 {
				t.Errorf("%s (stream %v): the endpoint counted %+v, the answer says %+v", p.name, stream, got, a.usage)
			}
		}
	}
}
