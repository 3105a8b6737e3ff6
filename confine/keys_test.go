package confine

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The real keys of the tests' APIs.
const (
	realKey   = "sk-real-key-of-the-test"
	realToken = "real-bearer-token-of-the-test"
)

// upstream is a stand-in model API: it records what reached it and
// answers as answer says.
type upstream struct {
	*httptest.Server
	mu   sync.Mutex
	seen []*http.Request
	body [][]byte
}

func newUpstream(t testing.TB, answer http.HandlerFunc) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, r)
		u.body = append(u.body, b)
		u.mu.Unlock()
		answer(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) requests() []*http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.seen)
}

// testUsage reads {"usage":{"in":N,"out":N,"cached":N}}, any field of it.
func testUsage(doc []byte, t *Tokens) {
	var d struct {
		Usage *struct {
			In, Out, Cached *int64
		} `json:"usage"`
	}
	if json.Unmarshal(doc, &d) != nil || d.Usage == nil {
		return
	}
	if d.Usage.In != nil {
		t.Input = *d.Usage.In
	}
	if d.Usage.Out != nil {
		t.Output = *d.Usage.Out
	}
	if d.Usage.Cached != nil {
		t.Cached = *d.Usage.Cached
	}
}

// testAPI is an API at upstream u (its base URL's path upPath, which
// carries basePath of the API's own paths) whose key goes in X-Api-Key or
// as a bearer token (realToken, from TOKEN_VAR), or in the "key"
// parameter.
func testAPI(t testing.TB, name string, u *upstream, upPath, basePath string) HeldAPI {
	t.Helper()
	routes, err := ParseRoutes("POST /v1/messages", "GET /v1/models", "POST /v1/models/*:generate")
	if err != nil {
		t.Fatal(err)
	}
	routes = append(routes, Route{Method: "HEAD", Path: "/", Open: true})
	up, _ := url.Parse(u.URL + upPath)
	return HeldAPI{Name: name, Upstream: up, BasePath: basePath, Keys: map[string]string{"KEY_VAR": realKey, "TOKEN_VAR": realToken},
		Places: []KeyPlace{{Header: "X-Api-Key"}, {Header: "Authorization", Prefix: "Bearer "}, {Query: "key"}},
		Routes: routes, Usage: testUsage}
}

// openKeys opens call's model endpoint holding apis, pointed at by
// BASE_URL.
func openKeys(t testing.TB, p *Proxy, call string, apis ...HeldAPI) (*KeyEndpoint, *KeyHold) {
	t.Helper()
	hold := &KeyHold{APIs: apis, Count: &KeyCount{}, Point: func(base, placeholder map[string]string) ([]string, []string) {
		var env []string
		for name, b := range base {
			env = append(env, "BASE_URL_"+name+"="+b)
		}
		return env, []string{"--key-of", placeholder["KEY_VAR"]}
	}}
	e, err := p.OpenKeys(call, hold)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, hold
}

// placeholderOf is the placeholder the endpoint gives name.
func placeholderOf(t testing.TB, e *KeyEndpoint, name string) string {
	t.Helper()
	env, _ := e.Point()
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	t.Fatalf("no %s in %q", name, env)
	return ""
}

// send makes one request to the endpoint; header values are set as given.
func send(t testing.TB, method, target string, header map[string]string, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestKeyEndpointForwards: a request that carries the call's placeholder
// reaches the API with the real key instead, at the upstream's path, and
// its answer (a stream) comes back whole; the endpoint counts the request,
// the bytes each way and the tokens the answer's events say, the last of
// each field winning within the answer.
func TestKeyEndpointForwards(t *testing.T) {
	t.Parallel()
	events := "event: start\ndata: {\"usage\":{\"in\":120,\"cached\":20,\"out\":1}}\n\n" +
		"data: {\"delta\":\"hi\"}\n\n" +
		"event: delta\r\ndata: {\"usage\":{\"out\":30}}\r\n\r\n"
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, events)
	})
	p, _, log := openProxy(t)
	e, hold := openKeys(t, p, "c1", testAPI(t, "test", up, "/base", ""))
	ph := placeholderOf(t, e, "KEY_VAR")
	resp, body := send(t, "POST", e.Bases()["test"]+"/v1/messages?beta=true", map[string]string{"X-Api-Key": ph}, `{"prompt":"x"}`)
	if resp.StatusCode != 200 || body != events {
		t.Fatalf("answered %s: %q", resp.Status, body)
	}
	seen := up.requests()
	if len(seen) != 1 {
		t.Fatalf("%d requests reached the API", len(seen))
	}
	r := seen[0]
	if r.URL.Path != "/base/v1/messages" || r.URL.RawQuery != "beta=true" || r.Header.Get("X-Api-Key") != realKey || r.Header.Get("Via") != "1.1 peal" {
		t.Errorf("the API got %s %s?%s key %q via %q", r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("X-Api-Key"), r.Header.Get("Via"))
	}
	if !strings.HasPrefix(ph, "peal-placeholder-") || len(ph) != len("peal-placeholder-")+32 || !IsPlaceholder(ph) {
		t.Errorf("placeholder %q", ph)
	}
	want := KeyUsage{Requests: 1, Sent: int64(len(`{"prompt":"x"}`)), Received: int64(len(events)), Tokens: Tokens{Input: 120, Cached: 20, Output: 30}}
	if got := hold.Count.Usage(); got != want {
		t.Errorf("count %+v, want %+v", got, want)
	}
	if _, n := p.Refusals("c1"); n != 0 || log.Len() != 0 {
		t.Errorf("refusals %d, log %q", n, log)
	}
}

// TestKeyEndpointKeyPlaces: each place a key can go gets the real key of
// the placeholder it carries; a JSON answer's usage (an object, or an
// array of them) is read whole; an open route goes without any key.
func TestKeyEndpointKeyPlaces(t *testing.T) {
	t.Parallel()
	answer := map[string]string{
		"/v1/messages":          `{"usage":{"in":7,"out":3}}`,
		"/v1/models/m:generate": `[{"usage":{"in":5,"out":1}},{"usage":{"in":5,"out":4}}]`,
	}
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer[r.URL.Path])
	})
	p, _, _ := openProxy(t)
	e, hold := openKeys(t, p, "c1", testAPI(t, "test", up, "", ""))
	key, token := placeholderOf(t, e, "KEY_VAR"), placeholderOf(t, e, "TOKEN_VAR")
	base := e.Bases()["test"]
	send(t, "POST", base+"/v1/messages", map[string]string{"Authorization": "Bearer " + token}, "{}")
	send(t, "POST", base+"/v1/models/m:generate?alt=json&key="+key, nil, "{}")
	send(t, "HEAD", base+"/", map[string]string{"X-Api-Key": "whatever"}, "")
	seen := up.requests()
	if len(seen) != 3 {
		t.Fatalf("%d requests reached the API", len(seen))
	}
	if got := seen[0].Header.Get("Authorization"); got != "Bearer "+realToken {
		t.Errorf("bearer: %q", got)
	}
	if q := seen[1].URL.Query(); q.Get("key") != realKey || q.Get("alt") != "json" {
		t.Errorf("query: %q", seen[1].URL.RawQuery)
	}
	if h := seen[2].Header; h.Get("X-Api-Key") != "" || h.Get("Authorization") != "" || seen[2].Method != "HEAD" {
		t.Errorf("open route: %s with %v", seen[2].Method, h)
	}
	if got := hold.Count.Usage(); got.Requests != 3 || got.Tokens != (Tokens{Input: 12, Output: 7}) {
		t.Errorf("count %+v", got)
	}
}

// TestKeyEndpointRefuses: what the endpoint does not forward, and why:
// paths and methods no route names, a request without the call's
// placeholder (none, a real-looking key, another call's placeholder),
// paths that could smuggle another (.., an encoded slash); each is a 403
// that the run record notes, and nothing reaches the API. A WebSocket
// upgrade is answered 426, the word for plain HTTP; the endpoint is no
// proxy.
func TestKeyEndpointRefuses(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") })
	p, _, log := openProxy(t)
	e, _ := openKeys(t, p, "c1", testAPI(t, "test", up, "", ""))
	other, _ := openKeys(t, p, "c2", testAPI(t, "test", up, "", ""))
	base := e.Bases()["test"]
	ph := placeholderOf(t, e, "KEY_VAR")
	key := map[string]string{"X-Api-Key": ph}
	cases := []struct {
		name, method, target string
		header               map[string]string
		status               int
		why                  string // what the refusal line says; "" for none
	}{
		{"path no route names", "GET", base + "/v1/files", key, 403, "GET /v1/files to 127.0.0.1:"},
		{"method no route names", "DELETE", base + "/v1/messages", key, 403, "DELETE /v1/messages"},
		{"no key", "POST", base + "/v1/messages", nil, 403, "did not carry the call's placeholder key"},
		{"a real-looking key", "POST", base + "/v1/messages", map[string]string{"X-Api-Key": "sk-ant-stolen"}, 403, "carried a key that is not the call's placeholder"},
		{"another call's placeholder", "POST", base + "/v1/messages", map[string]string{"X-Api-Key": placeholderOf(t, other, "KEY_VAR")}, 403, "carried a key that is not the call's placeholder"},
		{"the placeholder with a wrong key beside it", "POST", base + "/v1/messages", map[string]string{"X-Api-Key": ph, "Authorization": "Bearer sk-other"}, 403, "carried a key that is not the call's placeholder"},
		{"dot-dot", "POST", base + "/v1/x/../messages", key, 403, "is not a path of the call's model APIs"},
		{"encoded slash", "POST", base + "/v1%2Fmessages", key, 403, "is not a path of the call's model APIs"},
		{"upgrade", "GET", base + "/v1/messages", map[string]string{"X-Api-Key": ph, "Upgrade": "websocket", "Connection": "Upgrade"}, 426, ""},
	}
	refusals := 0
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, c.target, nil)
		if c.name == "dot-dot" || c.name == "encoded slash" {
			// Go's client would clean the path: send it as written.
			u := strings.TrimPrefix(c.target, e.URL())
			req.URL.Opaque = u
		}
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s: answered %s: %s", c.name, resp.Status, b)
			continue
		}
		if c.why == "" {
			continue
		}
		refusals++
		if !strings.HasPrefix(string(b), "peal's model endpoint refused the request ") || !strings.Contains(string(b), c.why) {
			t.Errorf("%s: answered %q", c.name, b)
		}
		refused, n := p.Refusals("c1")
		if n != refusals || refused[n-1].Line()+"\n" != string(b) || !RefusedConnection(refused[n-1].Line()) {
			t.Errorf("%s: refusals %d %+v", c.name, n, refused)
		}
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("%d refused requests reached the API", n)
	}
	if !strings.Contains(log.String(), `msg="model endpoint refused a request" call=c1`) {
		t.Errorf("log %q", log)
	}
	// Not a proxy: a CONNECT, a request in absolute form.
	for _, line := range []string{"CONNECT " + up.Listener.Addr().String(), "GET " + up.URL + "/v1/models"} {
		c, err := net.Dial("tcp", strings.TrimPrefix(e.URL(), "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "%s HTTP/1.1\r\nHost: %s\r\nX-Api-Key: %s\r\n\r\n", line, up.Listener.Addr(), ph)
		r, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: strings.Fields(line)[0]})
		if err != nil || r.StatusCode != 400 {
			t.Errorf("%s: %v %v", line, r, err)
		}
		c.Close()
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("%d requests reached the API through the endpoint as a proxy", n)
	}
}

// TestKeyEndpointStreams: the answer passes on as it comes, an event at
// a time: the API sends its second event only once the client has read
// the first through the endpoint.
func TestKeyEndpointStreams(t *testing.T) {
	t.Parallel()
	read := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"usage\":{\"in\":3}}\n\n")
		w.(http.Flusher).Flush()
		<-read
		io.WriteString(w, "data: {\"usage\":{\"out\":9}}\n\n")
	})
	p, _, _ := openProxy(t)
	e, hold := openKeys(t, p, "c1", testAPI(t, "test", up, "", ""))
	req, _ := http.NewRequest("POST", e.Bases()["test"]+"/v1/messages", strings.NewReader("{}"))
	req.Header.Set("X-Api-Key", placeholderOf(t, e, "KEY_VAR"))
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "data: {\"usage\":{\"in\":3}}\n" {
		t.Fatalf("first event %q %v", line, err)
	}
	close(read)
	rest, _ := io.ReadAll(br)
	if string(rest) != "\ndata: {\"usage\":{\"out\":9}}\n\n" {
		t.Errorf("rest %q", rest)
	}
	resp.Body.Close()
	if got := hold.Count.Usage().Tokens; got != (Tokens{Input: 3, Output: 9}) {
		t.Errorf("tokens %+v", got)
	}
}

// TestKeyEndpointMasksEchoedKey: an API's error that quotes the key it
// got reaches the call with the key masked.
func TestKeyEndpointMasksEchoedKey(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(401)
		fmt.Fprintf(w, `{"error":"invalid key %s"}`, r.Header.Get("X-Api-Key"))
	})
	p, _, _ := openProxy(t)
	e, _ := openKeys(t, p, "c1", testAPI(t, "test", up, "", ""))
	resp, body := send(t, "POST", e.Bases()["test"]+"/v1/messages", map[string]string{"X-Api-Key": placeholderOf(t, e, "KEY_VAR")}, "{}")
	if resp.StatusCode != 401 || strings.Contains(body, realKey) || !strings.Contains(body, "invalid key [the key peal holds]") {
		t.Errorf("answered %s %q", resp.Status, body)
	}
}

// TestKeyEndpointSeveralAPIs: with several APIs, each has a path of its
// own at the endpoint, after which its upstream's path follows.
func TestKeyEndpointSeveralAPIs(t *testing.T) {
	t.Parallel()
	a := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "a") })
	b := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "b") })
	p, _, _ := openProxy(t)
	e, _ := openKeys(t, p, "c1", testAPI(t, "one", a, "/v1", "/v1"), testAPI(t, "two", b, "", ""))
	bases := e.Bases()
	if bases["one"] != e.URL()+"/one/v1" || bases["two"] != e.URL()+"/two" {
		t.Fatalf("bases %v", bases)
	}
	key := map[string]string{"X-Api-Key": placeholderOf(t, e, "KEY_VAR")}
	_, got1 := send(t, "POST", bases["one"]+"/messages", key, "")
	_, got2 := send(t, "POST", bases["two"]+"/v1/messages", key, "")
	if got1 != "a" || got2 != "b" || a.requests()[0].URL.Path != "/v1/messages" || b.requests()[0].URL.Path != "/v1/messages" {
		t.Errorf("%q %q", got1, got2)
	}
	if resp, _ := send(t, "POST", e.URL()+"/three/v1/messages", key, ""); resp.StatusCode != 403 {
		t.Errorf("an API the call has not: %s", resp.Status)
	}
}

// TestKeyEndpointClosed: once its call ends, the endpoint is gone.
func TestKeyEndpointClosed(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
	p, _, _ := openProxy(t)
	e, _ := openKeys(t, p, "c1", testAPI(t, "test", up, "", ""))
	addr := strings.TrimPrefix(e.URL(), "http://")
	e.Close()
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("the endpoint still accepts connections after Close")
	}
}

// TestKeyHoldCheck: peal sends a key over TLS, or in plain HTTP to a
// loopback address only.
func TestKeyHoldCheck(t *testing.T) {
	t.Parallel()
	for raw, ok := range map[string]bool{
		"https://api.anthropic.com": true, "http://127.0.0.1:8080/v1": true, "http://localhost:1": true, "http://[::1]:9/x": true,
		"http://api.anthropic.com": false, "ftp://x": false, "https://user:pw@x": false, "https://x/?key=1": false, "/v1": false,
	} {
		u, _ := url.Parse(raw)
		if err := CheckUpstream(u); (err == nil) != ok {
			t.Errorf("CheckUpstream(%s) = %v", raw, err)
		}
	}
	up, _ := url.Parse("https://api.example.com")
	api := HeldAPI{Name: "a", Upstream: up, Keys: map[string]string{"K": "v"}, Places: []KeyPlace{{Header: "X"}}}
	for name, hold := range map[string]KeyHold{
		"no name":   {APIs: []HeldAPI{func() HeldAPI { a := api; a.Name = ""; return a }()}},
		"same name": {APIs: []HeldAPI{api, api}},
		"no key":    {APIs: []HeldAPI{func() HeldAPI { a := api; a.Keys = nil; return a }()}},
	} {
		if err := hold.Check(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestPrepareHoldsKeys: a call whose keys peal holds gets a placeholder in
// each key variable (what it inherited there dropped), the endpoint's base
// URLs, and the hold's arguments right after the program; the endpoint's
// port is one it may connect to, and Close ends it.
func TestPrepareHoldsKeys(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
	p, _, _ := openProxy(t)
	hold := &KeyHold{APIs: []HeldAPI{testAPI(t, "test", up, "", "")}, Count: &KeyCount{},
		Point: func(base, placeholder map[string]string) ([]string, []string) {
			return []string{"BASE_URL=" + base["test"]}, []string{"-c", "key=" + placeholder["TOKEN_VAR"]}
		}}
	c := &Call{Mode: Auto, Proxy: p, Keys: hold, Access: Access{TCP: &TCP{}}, Support: &Support{Why: "a test"}}
	cmd := exec.Command("/bin/true", "exec", "-")
	cmd.Env = []string{"PATH=/bin", "KEY_VAR=" + realKey, "TOKEN_VAR=" + realToken, "OTHER=1"}
	l, err := c.Prepare(cmd, "c1", "")
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Join(cmd.Env, "\n")
	if strings.Contains(env, realKey) || strings.Contains(env, realToken) || strings.Contains(strings.Join(cmd.Args, " "), realKey) {
		t.Fatalf("a real key reached the call: %q %q", cmd.Env, cmd.Args)
	}
	var kp *KeyEndpoint
	for _, d := range l.doors {
		if k, ok := d.(*KeyEndpoint); ok {
			kp = k
		}
	}
	if kp == nil {
		t.Fatal("no model endpoint among the call's doors")
	}
	for _, want := range []string{"KEY_VAR=" + kp.byVar["KEY_VAR"], "TOKEN_VAR=" + kp.byVar["TOKEN_VAR"], "BASE_URL=" + kp.URL(), "OTHER=1", "HTTPS_PROXY="} {
		if !strings.Contains(env, want) {
			t.Errorf("no %q in %q", want, cmd.Env)
		}
	}
	if want := []string{"/bin/true", "-c", "key=" + kp.byVar["TOKEN_VAR"], "exec", "-"}; !slices.Equal(cmd.Args, want) {
		t.Errorf("args %q, want %q", cmd.Args, want)
	}
	l.Close()
	if c, err := net.Dial("tcp", strings.TrimPrefix(kp.URL(), "http://")); err == nil {
		c.Close()
		t.Errorf("the endpoint outlived its call")
	}
}

// TestKeyEndpointUnreachable: an API that cannot be reached is, to the
// call, a connection broken off without an answer (as a tunnel to it would
// have been), and the endpoint counts it, with why.
func TestKeyEndpointUnreachable(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
	api := testAPI(t, "test", up, "", "")
	up.Close() // nothing listens there any more
	p, _, _ := openProxy(t)
	e, hold := openKeys(t, p, "c1", api)
	req, _ := http.NewRequest("POST", e.Bases()["test"]+"/v1/messages", strings.NewReader("{}"))
	req.Header.Set("X-Api-Key", placeholderOf(t, e, "KEY_VAR"))
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("answered %s, want a broken connection", resp.Status)
	}
	if got := hold.Count.Usage(); got.Unreachable != 1 || got.Requests != 1 {
		t.Errorf("count %+v", got)
	}
	want := "peal's model endpoint could not reach " + api.Upstream.Host + ": dial tcp " + api.Upstream.Host + ": connect: connection refused"
	if got := hold.Count.Unreachable(); got != want {
		t.Errorf("why %q, want %q", got, want)
	}
}

// TestProxyReachesOwnModelEndpoint: a client that sends its requests
// through the call's proxy (the proxy variables name it for loopback too)
// reaches the call's own model endpoint, in absolute form or through a
// tunnel, though no allow list names it; another call's proxy does not.
func TestProxyReachesOwnModelEndpoint(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	p, _, _ := openProxy(t)
	c := &Call{Mode: Auto, Proxy: p, Keys: &KeyHold{APIs: []HeldAPI{testAPI(t, "test", up, "", "")}, Count: &KeyCount{}},
		Support: &Support{Why: "a test"}}
	cmd := exec.Command("/bin/true")
	cmd.Env = []string{}
	l, err := c.Prepare(cmd, "c1", "")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var kp *KeyEndpoint
	for _, d := range l.doors {
		if k, ok := d.(*KeyEndpoint); ok {
			kp = k
		}
	}
	proxyURL, _ := url.Parse(l.Endpoint().URL())
	ph := kp.byVar["KEY_VAR"]
	// Absolute form, as an HTTP client sends a plain request to a proxy.
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	req, _ := http.NewRequest("POST", kp.URL()+"/v1/messages", strings.NewReader("{}"))
	req.Header.Set("X-Api-Key", ph)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok" {
		t.Errorf("absolute form: %s %q", resp.Status, b)
	}
	// A tunnel, as undici's proxy agent opens one even for http://.
	conn, br, cresp := dialConnect(t, l.Endpoint(), kp.hostport(), "")
	if cresp.StatusCode != 200 {
		t.Fatalf("CONNECT: %s", cresp.Status)
	}
	fmt.Fprintf(conn, "POST /v1/messages HTTP/1.1\r\nHost: %s\r\nX-Api-Key: %s\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}", kp.hostport(), ph)
	r, err := http.ReadResponse(br, nil)
	if err != nil || r.StatusCode != 200 {
		t.Fatalf("through the tunnel: %v %v", r, err)
	}
	if seen := up.requests(); len(seen) != 2 || seen[0].Header.Get("X-Api-Key") != realKey || seen[1].Header.Get("X-Api-Key") != realKey {
		t.Errorf("the API saw %d requests", len(seen))
	}
	// Another call's proxy endpoint knows nothing of it.
	other, err := p.Open("c2", Allow{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, _, oresp := dialConnect(t, other, kp.hostport(), "")
	if oresp.StatusCode != 403 {
		t.Errorf("another call's proxy: CONNECT %s", oresp.Status)
	}
}

// TestPrepareWithholds: the variables a call's policy withholds reach it
// neither through the filter (EnvPass names them) nor from what peal adds,
// held or not; the others pass.
func TestPrepareWithholds(t *testing.T) {
	t.Parallel()
	p, _, _ := openProxy(t)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
	for _, keys := range []*KeyHold{nil, {APIs: []HeldAPI{testAPI(t, "test", up, "", "")}, Count: &KeyCount{}}} {
		c := &Call{Mode: Auto, Proxy: p, Keys: keys, Access: Access{TCP: &TCP{}}, Support: &Support{Why: "a test"},
			EnvPass: []string{"OPENAI_*", "CODEX_API_KEY"}, Withhold: []string{"OPENAI_API_KEY", "CODEX_API_KEY"}}
		inherited := c.Environ([]string{"PATH=/bin", "OPENAI_API_KEY=sk-o", "OPENAI_ORGANIZATION=org", "CODEX_API_KEY=sk-c"})
		if want := []string{"PATH=/bin", "OPENAI_ORGANIZATION=org"}; !slices.Equal(inherited, want) {
			t.Errorf("held %v: inherited %q, want %q", keys != nil, inherited, want)
		}
		cmd := exec.Command("/bin/true")
		cmd.Env = append(inherited, "CODEX_API_KEY=sk-added")
		l, err := c.Prepare(cmd, "c1", "")
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
		if env := strings.Join(cmd.Env, "\n"); strings.Contains(env, "sk-") || !strings.Contains(env, "OPENAI_ORGANIZATION=org") {
			t.Errorf("held %v: the call's environment %q", keys != nil, cmd.Env)
		}
	}
}

// TestHeldCallReached: where peal holds a call's key, what the call's
// watch hears of is its model endpoint's way to the API (a forward
// answered, a forward that found nothing listening), not the proxy's
// tunnels to its other hosts, whose failure says nothing of the API; where
// the call holds its key, it hears of the tunnels.
func TestHeldCallReached(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	gone := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
	gone.Close() // nothing listens there any more
	closed := strings.TrimPrefix(gone.URL, "http://")
	allow, _ := ParseAllow(KeyNetworkAllow, closed)
	p, _, _ := openProxy(t)
	for _, held := range []bool{true, false} {
		var mu sync.Mutex
		var heard []string
		c := &Call{Mode: Auto, Proxy: p, Allow: allow, Support: &Support{Why: "a test"},
			Reached: func(hostport string, err error) {
				mu.Lock()
				defer mu.Unlock()
				heard = append(heard, fmt.Sprintf("%s %v", hostport, err != nil))
			}}
		if held {
			c.Keys = &KeyHold{APIs: []HeldAPI{testAPI(t, "api", up, "", ""), testAPI(t, "down", gone, "", "")}, Count: &KeyCount{}}
		}
		cmd := exec.Command("/bin/true")
		cmd.Env = []string{}
		l, err := c.Prepare(cmd, "c1", "")
		if err != nil {
			t.Fatal(err)
		}
		// A side host of the CLI's, through the proxy: nothing listens.
		if _, _, resp := dialConnect(t, l.Endpoint(), closed, ""); resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("held %v: CONNECT %s: %s", held, closed, resp.Status)
		}
		want := []string{closed + " true"}
		if held {
			var kp *KeyEndpoint
			for _, d := range l.doors {
				if k, ok := d.(*KeyEndpoint); ok {
					kp = k
				}
			}
			for _, name := range []string{"api", "down"} {
				req, _ := http.NewRequest("POST", kp.Bases()[name]+"/v1/messages", strings.NewReader("{}"))
				req.Header.Set("X-Api-Key", placeholderOf(t, kp, "KEY_VAR"))
				if resp, err := http.DefaultTransport.RoundTrip(req); err == nil {
					resp.Body.Close()
				}
			}
			want = []string{strings.TrimPrefix(up.URL, "http://") + " false", closed + " true"}
		}
		l.Close()
		mu.Lock()
		if !slices.Equal(heard, want) {
			t.Errorf("held %v: heard %q, want %q", held, heard, want)
		}
		mu.Unlock()
	}
}
