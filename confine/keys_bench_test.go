package confine

import (
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
)

// BenchmarkKeyEndpointFirstByte is the time from sending a model request
// to the first byte of its streamed answer: straight to the API (a local
// one, as a test's mock is), and through a call's model endpoint, which
// checks the placeholder, adds the key, forwards and meters the stream,
// sent to it straight or through the call's proxy (as Claude Code and Codex
// send it).
// "new" opens a connection for each request, as a CLI's first request
// does; "kept" reuses one, as its later requests do. The endpoint's cost
// is the difference (docs/benchmarks.md).
func BenchmarkKeyEndpointFirstByte(b *testing.B) {
	up := newUpstream(b, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"usage\":{\"in\":3}}\n\n")
		w.(http.Flusher).Flush()
		io.WriteString(w, "data: {\"usage\":{\"out\":9}}\n\n")
	})
	p, _, _ := openProxy(b)
	e, _ := openKeys(b, p, "c1", testAPI(b, "test", up, "", ""))
	ph := placeholderOf(b, e, "KEY_VAR")
	// A call's own doors, as Prepare opens them: its requests to the
	// endpoint sent through its proxy, in absolute form (Claude Code's,
	// Codex's).
	call := &Call{Mode: Auto, Proxy: p, Keys: &KeyHold{APIs: []HeldAPI{testAPI(b, "test", up, "", "")}, Count: &KeyCount{}}, Support: &Support{Why: "a benchmark"}}
	l, err := call.Prepare(exec.Command("/bin/true"), "c2", "")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	var own *KeyEndpoint
	for _, d := range l.doors {
		if k, ok := d.(*KeyEndpoint); ok {
			own = k
		}
	}
	proxyURL, _ := url.Parse(l.Endpoint().URL())
	first := func(b *testing.B, client *http.Client, url, key string) {
		req, _ := http.NewRequest("POST", url, strings.NewReader(`{"model":"m","stream":true}`))
		req.Header.Set("X-Api-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := resp.Body.Read(make([]byte, 1)); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		b.StartTimer()
	}
	for _, way := range []struct {
		name, url, key string
		proxy          *url.URL
	}{
		{"direct", up.URL + "/v1/messages", realKey, nil},
		{"endpoint", e.Bases()["test"] + "/v1/messages", ph, nil},
		{"proxy-endpoint", own.URL() + "/v1/messages", own.byVar["KEY_VAR"], proxyURL},
	} {
		for _, conn := range []string{"new", "kept"} {
			b.Run(way.name+"/"+conn, func(b *testing.B) {
				tr := &http.Transport{DisableKeepAlives: conn == "new"}
				if way.proxy != nil {
					tr.Proxy = http.ProxyURL(way.proxy)
				}
				defer tr.CloseIdleConnections()
				client := &http.Client{Transport: tr}
				first(b, client, way.url, way.key) // the endpoint's own connection to the API is made
				for b.Loop() {
					first(b, client, way.url, way.key)
				}
			})
		}
	}
}
