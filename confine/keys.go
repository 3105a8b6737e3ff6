package confine

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The model endpoint of a call: where its CLI takes another base URL for
// its model API, the call is given a base URL on 127.0.0.1 served by peal
// and, in each variable that would carry the API key, a placeholder of its
// own. peal checks the placeholder, forwards the request to the real API
// (over TLS, or plain HTTP to a loopback address), adds the real key in the
// header that API reads, and streams the answer back as it comes. The key
// is in peal's memory only: never in the call's environment, arguments or
// files. The endpoint forwards only the requests the API's declaration
// lists (its messages, responses or generate calls, model listing, token
// counting) and refuses the rest, which the run record notes; it counts
// the requests, the bytes and, from the API's own usage fields, the tokens
// of every answer, streamed ones included.

// KeyHold is what a call's model endpoint holds for it: the APIs it
// forwards to, with their keys, and how the call is pointed at it.
type KeyHold struct {
	APIs []HeldAPI
	// Point is what the call gets besides its placeholders so that its
	// CLI uses the endpoint: variables, and arguments that go right after
	// the program. base is the base URL of each API at the endpoint, by its
	// Name; placeholder the placeholder of each key variable.
	Point func(base, placeholder map[string]string) (env, args []string)
	// Count, when set, hears what the endpoint forwarded.
	Count *KeyCount
}

// HeldAPI is one model API a call reaches through its model endpoint.
type HeldAPI struct {
	// Name names the API among the call's; with several, each has a path
	// of its own at the endpoint (/Name).
	Name string
	// Upstream is where peal sends the requests: the base URL the CLI would
	// use without peal (the user's, or the API's own). https, or http to a
	// loopback address.
	Upstream *url.URL
	// BasePath is the part of the API's own paths that a base URL of the
	// CLI carries ("/v1" for Codex's https://api.openai.com/v1): a request
	// is matched as BasePath followed by what follows Upstream's path.
	BasePath string
	// Keys are the real keys, by the variable the CLI reads each from
	// (which gets a placeholder instead).
	Keys map[string]string
	// Places are where a request carries its key.
	Places []KeyPlace
	// Routes are the requests forwarded.
	Routes []Route
	// Usage reads one JSON document of an answer (its whole body, or one
	// event of a stream) into t: what it holds replaces what the same
	// answer said before. nil: tokens are not counted.
	Usage func(doc []byte, t *Tokens)
}

// KeyPlace is where a request carries its key: a header, the key after
// Prefix ("Bearer "), or a query parameter.
type KeyPlace struct {
	Header string
	Prefix string
	Query  string
}

// Route is a request a model endpoint forwards: its method, and its path
// as the API's own host has it, where * stands for a run of characters
// other than "/" (a model's name: /v1beta/models/*:generateContent). An
// Open route is forwarded without a key (a CLI's check that the API
// answers).
type Route struct {
	Method, Path string
	Open         bool
}

// ParseRoutes reads routes written "METHOD /path".
func ParseRoutes(list ...string) ([]Route, error) {
	out := make([]Route, 0, len(list))
	for _, s := range list {
		m, p, ok := strings.Cut(s, " ")
		if !ok || m == "" || !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("confine: a route is written \"METHOD /path\", not %q", s)
		}
		if _, err := path.Match(p, "/"); err != nil {
			return nil, fmt.Errorf("confine: route %q: %w", s, err)
		}
		out = append(out, Route{Method: m, Path: p})
	}
	return out, nil
}

// Tokens are the tokens of a model's answers, as the API counts them:
// Input counts every token of the prompts, Cached the part of them read
// from the provider's cache.
type Tokens struct {
	Input, Output, Cached int64
}

// KeyUsage is what a call's model endpoint forwarded: the requests, the
// bytes of their bodies each way, and the tokens of their answers;
// Unreachable counts the requests it could not forward because the API
// could not be reached.
type KeyUsage struct {
	Requests       int
	Sent, Received int64
	Tokens
	Unreachable int
}

// KeyCount counts what a model endpoint forwards; safe for concurrent use.
type KeyCount struct {
	mu sync.Mutex
	u  KeyUsage
	// why is the cause of the last request the endpoint could not forward
	// because the API could not be reached.
	why string
}

// Unreachable says why the endpoint last could not reach the API ("" when
// it always could).
func (c *KeyCount) Unreachable() string {
	if c == nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.why
}

func (c *KeyCount) unreachable(why string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.why = why
	c.mu.Unlock()
}

// Usage is what was counted so far.
func (c *KeyCount) Usage() KeyUsage {
	if c == nil {
		return KeyUsage{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.u
}

func (c *KeyCount) add(f func(u *KeyUsage)) {
	if c == nil {
		return
	}
	c.mu.Lock()
	f(&c.u)
	c.mu.Unlock()
}

// Vars are the key variables the hold takes from the call, sorted.
func (h *KeyHold) Vars() []string {
	var out []string
	for _, a := range h.APIs {
		for v := range a.Keys {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Check tells whether every API of the hold can be held: a name each
// (a path segment, unique), an upstream peal may send a key to (https, or
// http to a loopback address), a key and a place for it.
func (h *KeyHold) Check() error {
	seen := map[string]bool{}
	for _, a := range h.APIs {
		if a.Name == "" || strings.ContainsAny(a.Name, "/?#%") || seen[a.Name] {
			return fmt.Errorf("confine: a model API of a call needs a name of its own, not %q", a.Name)
		}
		seen[a.Name] = true
		if err := CheckUpstream(a.Upstream); err != nil {
			return err
		}
		if len(a.Keys) == 0 || len(a.Places) == 0 {
			return fmt.Errorf("confine: the %s API of a call has no key to hold", a.Name)
		}
	}
	return nil
}

// CheckUpstream tells whether peal may send a key to u: over TLS, or in
// plain HTTP to a loopback address (a local model, a test's mock), which
// no other machine sees.
func CheckUpstream(u *url.URL) error {
	if u == nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("confine: %q is no base URL peal can forward to (scheme://host[:port][/path])", redactURL(u))
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopbackHost(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("confine: peal sends a model key over TLS only (or to a loopback address), not to %s", redactURL(u))
	}
	return fmt.Errorf("confine: peal forwards to https:// base URLs, not to %s", redactURL(u))
}

func redactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	c.User, c.RawQuery, c.Fragment = nil, "", ""
	return c.String()
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// placeholderPrefix opens every placeholder key: what a model API that
// sees one got is a key peal gave a call, never a real one.
const placeholderPrefix = "peal-placeholder-"

// IsPlaceholder tells whether key is one of the placeholders peal gives
// calls.
func IsPlaceholder(key string) bool { return strings.HasPrefix(key, placeholderPrefix) }

// KeyEndpoint is one call's model endpoint (a Door).
type KeyEndpoint struct {
	p    *Proxy
	call string
	hold *KeyHold
	ln   net.Listener
	srv  *http.Server
	rp   *httputil.ReverseProxy
	apis []heldDoor
	// real is the real key of each placeholder; byVar the placeholder of
	// each variable.
	real  map[string]string
	byVar map[string]string
	// secrets are the real keys, to mask should an API echo one.
	secrets []string
	// reached hears of each forward to an API: answered (err nil), or not
	// made for want of a connection (Call.Reached); nil: none.
	reached func(hostport string, err error)
}

// heldDoor is one API at the endpoint: the path its requests start with.
type heldDoor struct {
	api  *HeldAPI
	base string // the endpoint's path of the API's base URL
}

// OpenKeys starts call's model endpoint on a free port of 127.0.0.1,
// holding hold's keys; its upstream connections go the way the proxy's do
// (through the proxy of peal's environment where that names one).
func (p *Proxy) OpenKeys(call string, hold *KeyHold) (*KeyEndpoint, error) {
	return p.OpenKeysReached(call, hold, nil)
}

// OpenKeysReached is OpenKeys, with reached told of each forward to an
// API: answered, or not for want of a connection (nil: none). Where peal
// holds the key, the endpoint is the call's way to its API, as a tunnel
// through the proxy is where the call holds it.
func (p *Proxy) OpenKeysReached(call string, hold *KeyHold, reached func(hostport string, err error)) (*KeyEndpoint, error) {
	if err := hold.Check(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("confine: model endpoint: %w", err)
	}
	e := &KeyEndpoint{p: p, call: call, hold: hold, ln: ln, real: map[string]string{}, byVar: map[string]string{}, reached: reached}
	for _, v := range hold.Vars() {
		ph := newPlaceholder()
		e.byVar[v] = ph
	}
	for i := range hold.APIs {
		a := &hold.APIs[i]
		for v, key := range a.Keys {
			e.real[e.byVar[v]] = key
			if !slices.Contains(e.secrets, key) && key != "" {
				e.secrets = append(e.secrets, key)
			}
		}
		base := strings.TrimSuffix(a.Upstream.Path, "/")
		if len(hold.APIs) > 1 {
			base = "/" + a.Name + base
		}
		e.apis = append(e.apis, heldDoor{api: a, base: base})
	}
	e.rp = &httputil.ReverseProxy{
		Rewrite:        e.rewrite,
		Transport:      p.keyTransport,
		FlushInterval:  -1, // every event of a stream goes on as it comes
		ErrorLog:       quiet,
		ModifyResponse: e.meter,
		ErrorHandler:   e.failed,
	}
	e.srv = &http.Server{Handler: e, ReadHeaderTimeout: 30 * time.Second, ErrorLog: quiet}
	go e.srv.Serve(ln)
	return e, nil
}

func newPlaceholder() string {
	b := make([]byte, 16)
	rand.Read(b) // crypto/rand never fails on the systems peal runs on
	return placeholderPrefix + hex.EncodeToString(b)
}

// Port is the endpoint's port on 127.0.0.1.
func (e *KeyEndpoint) Port() uint16 { return uint16(e.ln.Addr().(*net.TCPAddr).Port) }

// Serve starts serving ln (the listener of the call's network namespace)
// as the endpoint; Close stops it.
func (e *KeyEndpoint) Serve(ln net.Listener) { go e.srv.Serve(ln) }

// Close stops the endpoint: a later request, the call's or another's,
// finds nothing there.
func (e *KeyEndpoint) Close() error { return e.srv.Close() }

// URL is the endpoint's root.
func (e *KeyEndpoint) URL() string { return "http://" + e.hostport() }

func (e *KeyEndpoint) hostport() string { return "127.0.0.1:" + strconv.Itoa(int(e.Port())) }

// Bases are the base URL of each API at the endpoint, by name.
func (e *KeyEndpoint) Bases() map[string]string {
	out := map[string]string{}
	for _, d := range e.apis {
		out[d.api.Name] = e.URL() + d.base
	}
	return out
}

// Point is what points the call at the endpoint: in its environment, each
// key variable's placeholder and the variables of the hold's Point; the
// arguments of the hold's Point, which go right after the program.
func (e *KeyEndpoint) Point() (env, args []string) {
	for _, v := range e.hold.Vars() {
		env = append(env, v+"="+e.byVar[v])
	}
	if e.hold.Point != nil {
		more, a := e.hold.Point(e.Bases(), cloneMap(e.byVar))
		env, args = append(env, more...), a
	}
	return env, args
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// forwarded is what ServeHTTP decided of a request, for Rewrite and the
// meter.
type forwarded struct {
	api  *HeldAPI
	rest string // the path after the endpoint's base of the API
}

type targetKey struct{}

func target(ctx context.Context) forwarded {
	t, _ := ctx.Value(targetKey{}).(forwarded)
	return t
}

func (e *KeyEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect || r.URL.IsAbs() {
		http.Error(w, "this is peal's model endpoint, not a proxy: send the API's requests to it", http.StatusBadRequest)
		return
	}
	p := r.URL.Path
	d, rest, ok := e.door(p)
	if r.URL.RawPath != "" || path.Clean(p) != p || !ok {
		e.refuse(w, r, nil, "it is not a path of the call's model APIs at peal's model endpoint")
		return
	}
	if r.Header.Get("Upgrade") != "" {
		// A CLI that tries a WebSocket first (Codex) takes 426 as the
		// word to use plain HTTP, at once; the endpoint forwards requests
		// it can read the usage of.
		w.Header().Set("Connection", "close")
		http.Error(w, "peal's model endpoint forwards plain HTTP requests: no upgrade", http.StatusUpgradeRequired)
		return
	}
	api := d.api
	route, ok := api.route(r.Method, path.Join("/", api.BasePath, rest))
	if !ok {
		e.refuse(w, r, api, "it is not one of the requests peal's model endpoint forwards to the "+api.Name+" API (docs/agents.md lists them)")
		return
	}
	out := r.Clone(context.WithValue(r.Context(), targetKey{}, forwarded{api: api, rest: rest}))
	if why := e.swapKeys(out, api, route.Open); why != "" {
		e.refuse(w, r, api, why)
		return
	}
	if out.Body != nil && out.Body != http.NoBody {
		out.Body = &countingBody{ReadCloser: out.Body, count: e.hold.Count}
	}
	e.hold.Count.add(func(u *KeyUsage) { u.Requests++ })
	e.rp.ServeHTTP(w, out)
}

// door is the API whose base path p lies in, and the rest of p.
func (e *KeyEndpoint) door(p string) (heldDoor, string, bool) {
	for _, d := range e.apis {
		if d.base == "" {
			return d, p, true
		}
		if p == d.base {
			return d, "/", true
		}
		if rest, ok := strings.CutPrefix(p, d.base+"/"); ok {
			return d, "/" + rest, true
		}
	}
	return heldDoor{}, "", false
}

// route is the route of a's that a request of method at p (the API's own
// path) takes.
func (a *HeldAPI) route(method, p string) (Route, bool) {
	for _, r := range a.Routes {
		if r.Method != method {
			continue
		}
		if ok, _ := path.Match(r.Path, p); ok {
			return r, true
		}
	}
	return Route{}, false
}

// swapKeys puts the real key in each place of r that holds one of the
// call's placeholders; "" when done, else why the request is refused: it
// carries no placeholder, or a key that is no placeholder of the call's.
// An open route's request is forwarded with no key at all.
func (e *KeyEndpoint) swapKeys(r *http.Request, api *HeldAPI, open bool) string {
	found := false
	q := r.URL.Query()
	queryChanged := false
	for _, pl := range api.Places {
		if pl.Query != "" {
			if !q.Has(pl.Query) {
				continue
			}
			if open {
				q.Del(pl.Query)
				queryChanged = true
				continue
			}
			real, ok := e.real[q.Get(pl.Query)]
			if !ok || len(q[pl.Query]) != 1 {
				return "it carried a key that is not the call's placeholder"
			}
			q.Set(pl.Query, real)
			queryChanged, found = true, true
			continue
		}
		vals := r.Header.Values(pl.Header)
		if len(vals) == 0 {
			continue
		}
		if open {
			r.Header.Del(pl.Header)
			continue
		}
		v := vals[0]
		if len(vals) != 1 || len(v) < len(pl.Prefix) || !strings.EqualFold(v[:len(pl.Prefix)], pl.Prefix) {
			return "it carried a key that is not the call's placeholder"
		}
		real, ok := e.real[v[len(pl.Prefix):]]
		if !ok {
			return "it carried a key that is not the call's placeholder"
		}
		r.Header.Set(pl.Header, pl.Prefix+real)
		found = true
	}
	if queryChanged {
		r.URL.RawQuery = q.Encode()
	}
	if !found && !open {
		return "it did not carry the call's placeholder key"
	}
	return ""
}

// rewrite makes the upstream request: the API's address and path, its
// host, and nothing of the endpoint's.
func (e *KeyEndpoint) rewrite(pr *httputil.ProxyRequest) {
	t := target(pr.In.Context())
	up := t.api.Upstream
	out := pr.Out
	out.URL.Scheme, out.URL.Host = up.Scheme, up.Host
	out.URL.Path = strings.TrimSuffix(up.Path, "/") + t.rest
	out.URL.RawPath = ""
	out.Host = up.Host
	// The transport asks for a compressed answer itself and hands the
	// meter the plain one.
	out.Header.Del("Accept-Encoding")
	out.Header.Add("Via", "1.1 peal")
}

// meter counts an answer's bytes and, for a successful one, reads its
// usage as it streams by; the body of a failed one is read whole (it is
// short) so that a key an API would echo is masked.
func (e *KeyEndpoint) meter(resp *http.Response) error {
	api := target(resp.Request.Context()).api
	e.tell(api, nil)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		if err != nil {
			return err
		}
		masked := []byte(e.mask(string(body)))
		resp.Body = io.NopCloser(bytes.NewReader(masked))
		resp.ContentLength = int64(len(masked))
		resp.Header.Set("Content-Length", strconv.Itoa(len(masked)))
		e.hold.Count.add(func(u *KeyUsage) { u.Received += int64(len(masked)) })
		return nil
	}
	m := &meteredBody{body: resp.Body, count: e.hold.Count, usage: api.Usage}
	ct := resp.Header.Get("Content-Type")
	switch {
	case api.Usage == nil:
	case strings.HasPrefix(ct, "text/event-stream"):
		m.sse = true
	case strings.Contains(ct, "json"):
		m.whole = true
	}
	resp.Body = m
	return nil
}

// failed answers a request the endpoint could not forward. An API that
// cannot be reached is shown to the call as a connection broken off, as a
// tunnel to it through the call's proxy would have been, so that its CLI
// takes it for the outage it is (a 502 reads as the API's own failure,
// which some CLIs retry for minutes); the endpoint counts it, with its
// cause (KeyUsage.Unreachable, KeyCount.Unreachable). Anything else is a
// 502 that says why. The error names the URL, which may hold the key in
// its query: only its cause is told.
func (e *KeyEndpoint) failed(w http.ResponseWriter, r *http.Request, err error) {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	t := target(r.Context())
	why := "peal's model endpoint could not reach " + t.api.Upstream.Host + ": " + e.mask(err.Error())
	var op *net.OpError
	if errors.As(err, &op) && (op.Op == "dial" || op.Op == "proxyconnect") {
		e.hold.Count.add(func(u *KeyUsage) { u.Unreachable++ })
		e.hold.Count.unreachable(why)
		e.tell(t.api, err)
		if conn, _, herr := http.NewResponseController(w).Hijack(); herr == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				tc.SetLinger(0) // a reset, as a refused connection is
			}
			conn.Close()
			return
		}
	}
	http.Error(w, why, http.StatusBadGateway)
}

// tell tells reached how a forward to api fared.
func (e *KeyEndpoint) tell(api *HeldAPI, err error) {
	if e.reached != nil {
		e.reached(api.hostport(), err)
	}
}

// hostport is the host and port of a's upstream.
func (a *HeldAPI) hostport() string {
	return withPort(a.Upstream.Host, map[string]string{"http": "80", "https": "443"}[a.Upstream.Scheme])
}

// maxErrorBody caps what is read of a failed answer.
const maxErrorBody = 1 << 20

// mask hides the real keys in s.
func (e *KeyEndpoint) mask(s string) string {
	for _, k := range e.secrets {
		s = strings.ReplaceAll(s, k, "[the key peal holds]")
	}
	return s
}

// refuse answers a request the endpoint does not forward, and records it
// as a refusal of the call.
func (e *KeyEndpoint) refuse(w http.ResponseWriter, r *http.Request, api *HeldAPI, why string) {
	host := ""
	if api != nil {
		host = api.hostport()
	}
	ref := Refusal{Call: e.call, Host: host, Method: r.Method, Request: r.Method + " " + cleanText(r.URL.Path, 200), Why: why, Time: time.Now()}
	e.p.record(ref)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintf(w, "%s\n", ref.Line())
}

// cleanText is s cut at n bytes, control characters dropped: a refused
// path is the call's, untrusted.
func cleanText(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// countingBody counts a request body's bytes as they go upstream.
type countingBody struct {
	io.ReadCloser
	count *KeyCount
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.count.add(func(u *KeyUsage) { u.Sent += int64(n) })
	}
	return n, err
}

// meteredBody passes an answer on as it comes, counting its bytes and
// reading its usage: an event at a time for a stream, the whole body
// (up to maxMeteredBody) for a JSON answer.
type meteredBody struct {
	body  io.ReadCloser
	count *KeyCount
	usage func([]byte, *Tokens)
	sse   bool
	whole bool
	buf   []byte // the stream's unfinished line, or the JSON body so far
	over  bool   // a line or body longer than the meter reads
	tok   Tokens
	once  sync.Once
}

// maxMeteredBody caps what the meter keeps of a line of a stream or of a
// JSON answer; the answer itself passes whole.
const maxMeteredBody = 4 << 20

func (m *meteredBody) Read(p []byte) (int, error) {
	n, err := m.body.Read(p)
	if n > 0 {
		m.count.add(func(u *KeyUsage) { u.Received += int64(n) })
		m.feed(p[:n])
	}
	if err != nil {
		m.finish()
	}
	return n, err
}

func (m *meteredBody) Close() error {
	m.finish()
	return m.body.Close()
}

func (m *meteredBody) feed(b []byte) {
	switch {
	case m.sse:
		for len(b) > 0 {
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				m.keep(b)
				return
			}
			m.keep(b[:i])
			if !m.over {
				m.event(m.buf)
			}
			m.buf, m.over = m.buf[:0], false
			b = b[i+1:]
		}
	case m.whole:
		m.keep(b)
	}
}

func (m *meteredBody) keep(b []byte) {
	if m.over || len(m.buf)+len(b) > maxMeteredBody {
		m.over = true
		return
	}
	m.buf = append(m.buf, b...)
}

// event reads one line of a server-sent event stream: its data.
func (m *meteredBody) event(line []byte) {
	data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:"))
	if !ok {
		return
	}
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '{' {
		m.usage(data, &m.tok)
	}
}

// finish reads what is left and adds the answer's tokens to the count,
// once.
func (m *meteredBody) finish() {
	m.once.Do(func() {
		switch {
		case m.sse && len(m.buf) > 0 && !m.over:
			m.event(m.buf)
		case m.whole && !m.over:
			m.document(bytes.TrimSpace(m.buf))
		}
		m.buf = nil
		if m.tok != (Tokens{}) {
			t := m.tok
			m.count.add(func(u *KeyUsage) {
				u.Input += t.Input
				u.Output += t.Output
				u.Cached += t.Cached
			})
		}
	})
}

// document reads a JSON answer: an object, or an array of them (Gemini's
// stream without server-sent events).
func (m *meteredBody) document(b []byte) {
	if len(b) == 0 {
		return
	}
	if b[0] != '[' {
		m.usage(b, &m.tok)
		return
	}
	var list []json.RawMessage
	if json.Unmarshal(b, &list) != nil {
		return
	}
	for _, d := range list {
		m.usage(d, &m.tok)
	}
}
