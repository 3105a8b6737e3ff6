package confine

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkKeyEndpointFirstByte is the time from sending a model request
// to the first byte of its streamed answer: straight to the API (a local
// one, as a test's mock is), and through a call's model endpoint, which
// checks the placeholder, adds the key, forwards and meters the stream.
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
	for _, way := range []struct{ name, url, key string }{
		{"direct", up.URL + "/v1/messages", realKey},
		{"endpoint", e.Bases()["test"] + "/v1/messages", ph},
	} {
		for _, conn := range []string{"new", "kept"} {
			b.Run(way.name+"/"+conn, func(b *testing.B) {
				tr := &http.Transport{DisableKeepAlives: conn == "new"}
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
