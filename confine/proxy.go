package confine

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is peal's HTTP/CONNECT forward proxy for a run. Each call gets an
// Endpoint: a listener of its own on 127.0.0.1 with its own allow list.
// One listener per call ties every connection to its call without asking
// the client for credentials (which some clients cannot send to a proxy),
// and, where the kernel has TCP rules, lets the call connect to its own
// port only: no call can borrow another's wider allow list.
//
// It serves CONNECT tunnels (HTTPS, and anything else over TCP) and
// absolute-form plain HTTP requests ("GET http://host/…"), and answers
// anything else with an error. It connects through the proxy of peal's own
// environment where that names one for the host (HTTPS_PROXY for a tunnel,
// HTTP_PROXY for a plain request, NO_PROXY honoured, loopback always
// direct), so that calls reach their hosts from a network that has no other
// way out; otherwise directly.
type Proxy struct {
	log     *slog.Logger
	dialer  net.Dialer
	forward *httputil.ReverseProxy
	// keyTransport carries the model endpoints' requests: compressed
	// answers asked for and unpacked, so that their usage can be read.
	keyTransport *http.Transport
	// upstream is the proxy a request goes through (nil URL: none).
	upstream func(*http.Request) (*url.URL, error)

	refusedTotal atomic.Int64
	mu           sync.Mutex
	refused      map[string]*callRefusals // by call
}

var quiet = log.New(io.Discard, "", 0)

// Refusal is one connection the proxy refused, or one request a call's
// model endpoint refused (Request set).
type Refusal struct {
	Call   string // the call's id
	Host   string // host:port as the call asked for it (a model API's host)
	Method string // CONNECT, or the method of a plain HTTP request
	// Request is the method and path of a request the model endpoint
	// refused, and Why why.
	Request, Why string
	Time         time.Time
}

// Line says what was refused and what would allow it.
func (r Refusal) Line() string {
	if r.Request == "" {
		return RefusalLine(r.Host)
	}
	to := ""
	if r.Host != "" {
		to = " to " + r.Host
	}
	return requestRefused + r.Request + to + ": " + r.Why
}

// maxRefusalsKept bounds the refusals kept per call; the count goes on.
const maxRefusalsKept = 64

type callRefusals struct {
	list  []Refusal
	count int
}

// NewProxy makes the run's proxy; log hears of each refusal (nil: nowhere).
func NewProxy(log *slog.Logger) *Proxy {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{log: log, refused: map[string]*callRefusals{}, upstream: http.ProxyFromEnvironment}
	p.dialer.Timeout = 30 * time.Second
	p.dialer.KeepAlive = 30 * time.Second
	transport := &http.Transport{
		Proxy:               func(r *http.Request) (*url.URL, error) { return p.upstream(r) },
		DialContext:         p.dialer.DialContext,
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true, // pass the body as the server sent it
	}
	p.keyTransport = transport.Clone()
	p.keyTransport.DisableCompression = false
	p.keyTransport.ForceAttemptHTTP2 = true // the APIs speak HTTP/2; a custom dialer would turn it off
	p.forward = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			// The request is in absolute form: it names its server.
			r.Out.Host = r.In.Host
		},
		Transport:     transport,
		FlushInterval: -1, // a streamed answer (server-sent events) goes on at once
		ErrorLog:      quiet,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, "peal's proxy could not reach "+r.URL.Host+": "+err.Error(), http.StatusBadGateway)
		},
	}
	return p
}

// Refusals are the connections refused to call (at most the first 64) and
// how many there were.
func (p *Proxy) Refusals(call string) ([]Refusal, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.refused[call]
	if r == nil {
		return nil, 0
	}
	return append([]Refusal(nil), r.list...), r.count
}

// Refused is the number of connections refused so far, all calls together.
func (p *Proxy) Refused() int64 { return p.refusedTotal.Load() }

// Forget drops what the proxy keeps of call's refusals once they have been
// read; the total stays.
func (p *Proxy) Forget(call string) {
	p.mu.Lock()
	delete(p.refused, call)
	p.mu.Unlock()
}

func (p *Proxy) record(r Refusal) {
	p.refusedTotal.Add(1)
	p.mu.Lock()
	c := p.refused[r.Call]
	if c == nil {
		c = &callRefusals{}
		p.refused[r.Call] = c
	}
	c.count++
	if len(c.list) < maxRefusalsKept {
		c.list = append(c.list, r)
	}
	p.mu.Unlock()
	if r.Request != "" {
		p.log.Warn("model endpoint refused a request", "call", r.Call, "host", r.Host, "request", r.Request, "why", r.Why)
		return
	}
	p.log.Warn("proxy refused a connection", "call", r.Call, "host", r.Host, "method", r.Method)
}

// Endpoint is one call's door to the proxy.
type Endpoint struct {
	p     *Proxy
	call  string
	allow Allow
	// reached hears of each tunnel to a host on the allow list: made, or
	// not (Call.Reached).
	reached func(hostport string, err error)
	ln      net.Listener
	srv     *http.Server

	mu      sync.Mutex
	closed  bool
	tunnels map[net.Conn]struct{}
	// own are the call's other doors (its model endpoint), by host:port:
	// a client that sends its requests to them through the proxy (Node's
	// and Codex's do, for loopback too) reaches them whatever the allow
	// list says, a plain request served at once, a tunnel joined to it.
	own map[string]http.Handler
}

// admit makes the proxy pass what the call sends to hostport, one of its
// own doors served by h, to that door.
func (e *Endpoint) admit(hostport string, h http.Handler) {
	e.mu.Lock()
	if e.own == nil {
		e.own = map[string]http.Handler{}
	}
	e.own[hostport] = h
	e.mu.Unlock()
}

// ownDoor is the handler of the call's door at hostport, nil if none.
func (e *Endpoint) ownDoor(hostport string) http.Handler {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.own[hostport]
}

// Open starts call's endpoint on a free port of 127.0.0.1.
func (p *Proxy) Open(call string, allow Allow) (*Endpoint, error) {
	return p.OpenReached(call, allow, nil)
}

// OpenReached is Open, with reached told of each connection to a host of
// allow, made or not (nil: none).
func (p *Proxy) OpenReached(call string, allow Allow, reached func(hostport string, err error)) (*Endpoint, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("confine: proxy: %w", err)
	}
	e := &Endpoint{p: p, call: call, allow: allow, ln: ln, tunnels: map[net.Conn]struct{}{}, reached: reached}
	e.srv = &http.Server{
		Handler:           e,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          quiet, // a client's broken connection is its own business
	}
	go e.srv.Serve(ln)
	return e, nil
}

// Port is the endpoint's port on 127.0.0.1.
func (e *Endpoint) Port() uint16 { return uint16(e.ln.Addr().(*net.TCPAddr).Port) }

// Serve starts serving ln (the listener of the call's network namespace)
// as the endpoint; Close stops it.
func (e *Endpoint) Serve(ln net.Listener) { go e.srv.Serve(ln) }

// URL is the proxy URL a client is given.
func (e *Endpoint) URL() string { return "http://127.0.0.1:" + strconv.Itoa(int(e.Port())) }

// Env is what the call's environment gets so that its clients use the
// endpoint: the proxy variables in both cases, NO_PROXY emptied (nothing
// bypasses it), and Node's switch that makes its built-in clients read
// them (Node 24 and later).
func (e *Endpoint) Env() []string {
	u := e.URL()
	return []string{
		"HTTPS_PROXY=" + u, "https_proxy=" + u, "HTTP_PROXY=" + u, "http_proxy=" + u,
		"ALL_PROXY=" + u, "all_proxy=" + u, "NO_PROXY=", "no_proxy=", "NODE_USE_ENV_PROXY=1",
	}
}

// Close stops the endpoint and every tunnel still open through it.
func (e *Endpoint) Close() error {
	err := e.srv.Close()
	e.mu.Lock()
	e.closed = true
	for c := range e.tunnels {
		c.Close()
	}
	e.tunnels = nil
	e.mu.Unlock()
	return err
}

// track keeps conns to be closed with the endpoint; false when it is
// already closed.
func (e *Endpoint) track(conns ...net.Conn) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	for _, c := range conns {
		e.tunnels[c] = struct{}{}
	}
	return true
}

func (e *Endpoint) untrack(conns ...net.Conn) {
	e.mu.Lock()
	for _, c := range conns {
		delete(e.tunnels, c)
	}
	e.mu.Unlock()
}

func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		e.connect(w, r)
		return
	}
	if !r.URL.IsAbs() || r.URL.Host == "" {
		http.Error(w, "this is peal's proxy: send a CONNECT or a request in absolute form (http://host/path)", http.StatusBadRequest)
		return
	}
	if r.URL.Scheme != "http" {
		http.Error(w, "peal's proxy forwards plain http:// requests; use CONNECT for "+r.URL.Scheme, http.StatusBadRequest)
		return
	}
	hostport := withPort(r.URL.Host, "80")
	if h := e.ownDoor(hostport); h != nil {
		// The call's own door answers the request as it would have
		// directly: in the form it takes, without a hop.
		in := r.Clone(r.Context())
		in.URL = &url.URL{Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
		in.RequestURI, in.Host = in.URL.RequestURI(), hostport
		h.ServeHTTP(w, in)
		return
	}
	if !e.allow.Permits(hostport) {
		e.refuse(w, r.Method, hostport)
		return
	}
	e.p.forward.ServeHTTP(w, r)
}

// connect opens a tunnel to the host:port the request names.
func (e *Endpoint) connect(w http.ResponseWriter, r *http.Request) {
	hostport := r.Host
	if _, _, err := net.SplitHostPort(hostport); err != nil {
		http.Error(w, "CONNECT needs host:port", http.StatusBadRequest)
		return
	}
	own := e.ownDoor(hostport) != nil
	if !own && !e.allow.Permits(hostport) {
		e.refuse(w, r.Method, hostport)
		return
	}
	var up net.Conn
	var err error
	if own {
		up, err = e.p.dialer.DialContext(r.Context(), "tcp", hostport)
	} else {
		up, err = e.p.dial(r.Context(), hostport)
	}
	e.upstream(hostport, err)
	if err != nil {
		http.Error(w, "peal's proxy could not reach "+hostport+": "+err.Error(), http.StatusBadGateway)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		http.Error(w, "peal's proxy cannot tunnel on this connection", http.StatusInternalServerError)
		return
	}
	if !e.track(conn, up) {
		conn.Close()
		up.Close()
		return
	}
	go func() {
		defer e.untrack(conn, up)
		tunnel(conn, brw.Reader, up)
	}()
}

// dial connects to hostport, through the upstream proxy when there is one
// for it.
func (p *Proxy) dial(ctx context.Context, hostport string) (net.Conn, error) {
	via, err := p.upstream(&http.Request{Method: http.MethodConnect, URL: &url.URL{Scheme: "https", Host: hostport}, Host: hostport})
	if err != nil {
		return nil, fmt.Errorf("the proxy of peal's environment: %w", err)
	}
	if via == nil {
		return p.dialer.DialContext(ctx, "tcp", hostport)
	}
	return p.dialVia(ctx, via, hostport)
}

// dialVia opens a tunnel to hostport through the HTTP(S) proxy via, with
// the credentials its URL carries.
func (p *Proxy) dialVia(ctx context.Context, via *url.URL, hostport string) (net.Conn, error) {
	var port string
	switch via.Scheme {
	case "http":
		port = "80"
	case "https":
		port = "443"
	default:
		return nil, fmt.Errorf("the proxy of peal's environment is %s://, and peal goes through http:// and https:// proxies only", via.Scheme)
	}
	addr := withPort(via.Host, port)
	conn, err := p.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("through the proxy %s: %w", addr, err)
	}
	fail := func(err error) (net.Conn, error) {
		conn.Close()
		return nil, fmt.Errorf("through the proxy %s: %w", addr, err)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(p.dialer.Timeout)
	}
	conn.SetDeadline(deadline)
	if via.Scheme == "https" {
		tc := tls.Client(conn, &tls.Config{ServerName: via.Hostname()})
		if err := tc.HandshakeContext(ctx); err != nil {
			return fail(err)
		}
		conn = tc
	}
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: hostport}, Host: hostport, Header: http.Header{}}
	if u := via.User; u != nil {
		pw, _ := u.Password()
		req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pw)))
	}
	if err := req.Write(conn); err != nil {
		return fail(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return fail(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return fail(fmt.Errorf("it answered %s", resp.Status))
	}
	conn.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		return &readAhead{Conn: conn, r: br}, nil
	}
	return conn, nil
}

// readAhead is a connection some of whose first bytes were read already.
type readAhead struct {
	net.Conn
	r *bufio.Reader
}

func (c *readAhead) Read(b []byte) (int, error) { return c.r.Read(b) }
func (c *readAhead) CloseWrite() error {
	closeWrite(c.Conn)
	return nil
}

// tunnel answers the CONNECT, then copies both ways until both sides are
// done. What the client sent after its request is in buffered and goes
// first; the rest goes from socket to socket (spliced by the kernel on
// Linux), so that nothing of a large transfer is held in memory.
func tunnel(client net.Conn, buffered *bufio.Reader, up net.Conn) {
	defer client.Close()
	defer up.Close()
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	if n := buffered.Buffered(); n > 0 {
		b, _ := buffered.Peek(n)
		if _, err := up.Write(b); err != nil {
			return
		}
	}
	done := make(chan struct{})
	go func() {
		io.Copy(client, up)
		closeWrite(client)
		close(done)
	}()
	io.Copy(up, client)
	closeWrite(up)
	<-done
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
	}
}

// refuse answers a connection to a host not on the list, and records it.
func (e *Endpoint) refuse(w http.ResponseWriter, method, hostport string) {
	e.p.record(Refusal{Call: e.call, Host: hostport, Method: method, Time: time.Now()})
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintf(w, "%s\n", RefusalLine(hostport))
}

// RefusalLine says that hostport was refused and which setting allows it.
func RefusalLine(hostport string) string {
	return fmt.Sprintf(proxyRefused+"%s: it is not on this call's network allow list; confine_network_allow = [%q] would allow it", hostport, hostport)
}

// The openings of the lines that put a failure down to a refused
// connection.
const (
	proxyRefused   = "peal refused the connection to "
	directRefused  = "the call was refused a direct connection to "
	requestRefused = "peal's model endpoint refused the request "
)

// RefusedConnection reports whether line, one of Explain's or
// LastRefusal's, puts the failure down to a connection the confinement
// refused (through the proxy or directly) or a request the call's model
// endpoint refused, which every attempt under the same allow list and
// routes meets again.
func RefusedConnection(line string) bool {
	return strings.HasPrefix(line, proxyRefused) || strings.HasPrefix(line, directRefused) || strings.HasPrefix(line, requestRefused)
}

// withPort adds port to hostport when it has none.
func withPort(hostport, port string) string {
	if _, _, err := net.SplitHostPort(hostport); err == nil {
		return hostport
	}
	return net.JoinHostPort(normHost(hostport), port)
}
