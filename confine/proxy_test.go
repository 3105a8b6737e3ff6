package confine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// openProxy starts a proxy with one endpoint for call "c1" allowing allow,
// and returns it with the log it writes.
func openProxy(t testing.TB, allow ...string) (*Proxy, *Endpoint, *bytes.Buffer) {
	t.Helper()
	var log bytes.Buffer
	p := NewProxy(slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})))
	a, err := ParseAllow(KeyNetworkAllow, allow...)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := p.Open("c1", a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	return p, ep, &log
}

// echoServer echoes each connection back, upper-cased, until EOF.
func echoServer(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c)
				c.Write(bytes.ToUpper(b))
			}()
		}
	}()
	return l.Addr().String()
}

// dialConnect sends a CONNECT for target (and extra bytes in the same
// write) and returns the connection and the proxy's answer.
func dialConnect(t testing.TB, ep *Endpoint, target, extra string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(ep.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n%s", target, target, extra)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil {
		t.Fatal(err)
	}
	return c, br, resp
}

func TestProxyTunnel(t *testing.T) {
	echo := echoServer(t)
	p, ep, log := openProxy(t, echo)
	c, br, resp := dialConnect(t, ep, echo, "hello ")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT answered %s", resp.Status)
	}
	io.WriteString(c, "world")
	c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(br)
	if err != nil || string(got) != "HELLO WORLD" {
		t.Fatalf("through the tunnel: %q, %v", got, err)
	}
	if p.Refused() != 0 || log.Len() != 0 {
		t.Errorf("refusals: %d, log %q", p.Refused(), log)
	}
}

func TestProxyRefusesTunnel(t *testing.T) {
	echo := echoServer(t)
	p, ep, log := openProxy(t, "api.example.com")
	_, _, resp := dialConnect(t, ep, echo, "")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 403 || string(body) != RefusalLine(echo)+"\n" {
		t.Fatalf("answered %s: %q", resp.Status, body)
	}
	if want := "peal refused the connection to " + echo + `: it is not on this call's network allow list; confine_network_allow = ["` + echo + `"] would allow it`; RefusalLine(echo) != want {
		t.Errorf("RefusalLine = %q", RefusalLine(echo))
	}
	refused, n := p.Refusals("c1")
	if n != 1 || refused[0].Host != echo || refused[0].Method != "CONNECT" || refused[0].Call != "c1" || p.Refused() != 1 {
		t.Errorf("refusals = %+v, %d, total %d", refused, n, p.Refused())
	}
	if want := "level=WARN msg=\"proxy refused a connection\" call=c1 host=" + echo + " method=CONNECT\n"; log.String() != want {
		t.Errorf("log = %q, want %q", log, want)
	}
	if r, n := p.Refusals("other"); r != nil || n != 0 {
		t.Errorf("another call's refusals: %v %d", r, n)
	}
	p.Forget("c1")
	if _, n := p.Refusals("c1"); n != 0 || p.Refused() != 1 {
		t.Errorf("after Forget: %d, total %d", n, p.Refused())
	}
}

func TestProxyPlainHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, r.Header.Get("Proxy-Authorization"))
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	p, ep, _ := openProxy(t, host)
	proxyURL, _ := url.Parse(ep.URL())
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	// Go's client sends a request for an http:// URL in absolute form.
	resp, err := client.Get(srv.URL + "/a/b")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "GET /a/b " {
		t.Errorf("allowed: %s %q", resp.Status, body)
	}
	// Another port of the same host is not allowed.
	other := echoServer(t)
	resp, err = client.Get("http://" + other + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || string(body) != RefusalLine(other)+"\n" {
		t.Errorf("refused: %s %q", resp.Status, body)
	}
	if refused, _ := p.Refusals("c1"); len(refused) != 1 || refused[0].Method != "GET" {
		t.Errorf("refusals = %+v", refused)
	}
	// A request to the proxy itself, and one it cannot forward.
	for target, want := range map[string]int{ep.URL() + "/": 400} {
		resp, err := http.Get(target)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %s", target, resp.Status)
		}
	}
}

func TestProxyUnreachable(t *testing.T) {
	l, _ := net.Listen("tcp4", "127.0.0.1:0")
	closed := l.Addr().String()
	l.Close()
	_, ep, _ := openProxy(t, closed)
	_, _, resp := dialConnect(t, ep, closed, "")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 502 || !strings.HasPrefix(string(body), "peal's proxy could not reach "+closed+": ") {
		t.Errorf("answered %s: %q", resp.Status, body)
	}
}

// TestProxyTellsWhatItReached: the endpoint tells its call of each
// connection to a host of its list, made or not; a name that does not
// resolve is no route at all, a refused connection is not.
func TestProxyTellsWhatItReached(t *testing.T) {
	echo := echoServer(t)
	l, _ := net.Listen("tcp4", "127.0.0.1:0")
	closed := l.Addr().String()
	l.Close()
	p := NewProxy(nil)
	// No DNS here: every name fails to resolve, as on a machine without
	// a network, and nothing leaves the machine.
	p.dialer.Resolver = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no DNS server here")
	}}
	a, err := ParseAllow(KeyNetworkAllow, echo, closed, "api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var told []string
	ep, err := p.OpenReached("c1", a, func(hostport string, err error) {
		mu.Lock()
		defer mu.Unlock()
		how := "reached"
		switch {
		case err != nil && NoRoute(err):
			how = "no route"
		case err != nil:
			how = "failed"
		}
		told = append(told, hostport+" "+how)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	for _, target := range []string{echo, closed, "api.example.com:443"} {
		dialConnect(t, ep, target, "")
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{echo + " reached", closed + " failed", "api.example.com:443 no route"}
	if !slices.Equal(told, want) {
		t.Fatalf("told %q, want %q", told, want)
	}
}

func TestProxyCloseEndsTunnels(t *testing.T) {
	// A server that never answers: the tunnel stays open until Close.
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	_, ep, _ := openProxy(t, l.Addr().String())
	c, br, resp := dialConnect(t, ep, l.Addr().String(), "")
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	up := <-accepted
	defer up.Close()
	ep.Close()
	if n, err := br.ReadByte(); err != io.EOF {
		t.Errorf("the tunnel's client read %v, %v after Close", n, err)
	}
	if _, err := up.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the tunnel's server read %v after Close", err)
	}
	c.Close()
	if _, err := net.Dial("tcp", strings.TrimPrefix(ep.URL(), "http://")); err == nil {
		t.Error("the endpoint still accepts")
	}
}

func TestEndpointEnv(t *testing.T) {
	_, ep, _ := openProxy(t)
	u := ep.URL()
	want := []string{"HTTPS_PROXY=" + u, "https_proxy=" + u, "HTTP_PROXY=" + u, "http_proxy=" + u,
		"ALL_PROXY=" + u, "all_proxy=" + u, "NO_PROXY=", "no_proxy=", "NODE_USE_ENV_PROXY=1"}
	if got := ep.Env(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Env = %q", got)
	}
	if !strings.HasPrefix(u, "http://127.0.0.1:") || ep.Port() == 0 {
		t.Errorf("URL %s, port %d", u, ep.Port())
	}
}

// streamServer sends size bytes on each connection from one buffer.
func streamServer(t testing.TB, size int64) string {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	buf := make([]byte, 256<<10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for left := size; left > 0; {
					n := int64(len(buf))
					if left < n {
						n = left
					}
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
					left -= n
				}
			}()
		}
	}()
	return l.Addr().String()
}

// TestProxyStreams sends 100 MB through a tunnel and checks that the
// process allocated a small fraction of it: the proxy holds none of it.
func TestProxyStreams(t *testing.T) {
	const size = 100 << 20
	src := streamServer(t, size)
	_, ep, _ := openProxy(t, src)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, br, resp := dialConnect(t, ep, src, "")
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	n, err := io.CopyBuffer(io.Discard, br, make([]byte, 256<<10))
	runtime.ReadMemStats(&after)
	if err != nil || n != size {
		t.Fatalf("read %d bytes, %v", n, err)
	}
	t.Logf("100 MB through the tunnel: %d bytes allocated by the whole process", after.TotalAlloc-before.TotalAlloc)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("100 MB through the proxy allocated %d bytes", alloc)
	}
}

// upstreamProxy is a proxy of peal's environment: it tunnels CONNECTs and
// forwards plain requests, and records each request line with its
// Proxy-Authorization; with refuse, it answers 407 instead.
func upstreamProxy(t testing.TB, refuse bool) (*url.URL, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := r.Host
		if r.Method != http.MethodConnect {
			target = r.URL.String()
		}
		mu.Lock()
		seen = append(seen, r.Method+" "+target+" "+r.Header.Get("Proxy-Authorization"))
		mu.Unlock()
		if refuse {
			http.Error(w, "no", http.StatusProxyAuthRequired)
			return
		}
		if r.Method != http.MethodConnect {
			resp, err := http.DefaultTransport.RoundTrip(r)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			w.WriteHeader(resp.StatusCode)
			io.Copy(w, resp.Body)
			return
		}
		dial := r.Host
		if h, port, _ := net.SplitHostPort(r.Host); strings.HasSuffix(h, ".test") {
			dial = net.JoinHostPort("127.0.0.1", port) // a name only this proxy knows
		}
		up, err := net.Dial("tcp", dial)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			up.Close()
			return
		}
		brw.Flush()
		go func() {
			defer conn.Close()
			defer up.Close()
			go func() { io.Copy(up, brw); up.(*net.TCPConn).CloseWrite() }()
			io.Copy(conn, up)
		}()
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword("ci", "s3cret")
	return u, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// Behind a proxy of its own environment, peal's proxy goes through it,
// with the credentials its URL carries, for tunnels and plain requests.
func TestProxyThroughUpstream(t *testing.T) {
	echo := echoServer(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "plain "+r.URL.Path)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	via, seen := upstreamProxy(t, false)
	p, ep, _ := openProxy(t, echo, host)
	p.upstream = func(*http.Request) (*url.URL, error) { return via, nil }

	c, br, resp := dialConnect(t, ep, echo, "hello ")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT answered %s", resp.Status)
	}
	io.WriteString(c, "world")
	c.(*net.TCPConn).CloseWrite()
	if got, err := io.ReadAll(br); err != nil || string(got) != "HELLO WORLD" {
		t.Fatalf("through both proxies: %q, %v", got, err)
	}

	proxyURL, _ := url.Parse(ep.URL())
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	r, err := client.Get(srv.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if string(body) != "plain /x" {
		t.Errorf("plain request through both proxies: %s %q", r.Status, body)
	}
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("ci:s3cret"))
	if got, want := seen(), []string{"CONNECT " + echo + " " + auth, "GET " + srv.URL + "/x " + auth}; !slices.Equal(got, want) {
		t.Errorf("the upstream saw %q, want %q", got, want)
	}

	// A host not on the call's list never reaches the upstream.
	other := echoServer(t)
	if _, _, resp := dialConnect(t, ep, other, ""); resp.StatusCode != 403 || len(seen()) != 2 {
		t.Errorf("refused host: %s, upstream saw %q", resp.Status, seen())
	}
}

// An upstream that refuses the tunnel is named in the call's 502.
func TestProxyUpstreamRefuses(t *testing.T) {
	echo := echoServer(t)
	via, seen := upstreamProxy(t, true)
	p, ep, _ := openProxy(t, echo)
	p.upstream = func(*http.Request) (*url.URL, error) { return via, nil }
	_, _, resp := dialConnect(t, ep, echo, "")
	body, _ := io.ReadAll(resp.Body)
	want := "peal's proxy could not reach " + echo + ": through the proxy " + via.Host + ": it answered 407 Proxy Authentication Required\n"
	if resp.StatusCode != 502 || string(body) != want || len(seen()) != 1 {
		t.Errorf("answered %s: %q, want %q (upstream saw %q)", resp.Status, body, want, seen())
	}
	p.upstream = func(*http.Request) (*url.URL, error) { return &url.URL{Scheme: "socks5", Host: via.Host}, nil }
	_, _, resp = dialConnect(t, ep, echo, "")
	body, _ = io.ReadAll(resp.Body)
	if want := "peal's proxy could not reach " + echo + ": the proxy of peal's environment is socks5://, and peal goes through http:// and https:// proxies only\n"; string(body) != want {
		t.Errorf("socks5 upstream: %q", body)
	}
}

// The upstream is the one peal's environment names.
func TestProxyUpstreamFromEnvironment(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	target := "svc.test:" + port // reachable through the upstream only
	via, seen := upstreamProxy(t, false)
	cmd := exec.Command(os.Args[0], "chain", target)
	cmd.Env = append(os.Environ(), helperEnv+"=1", "HTTPS_PROXY="+via.String(), "NO_PROXY=")
	out, _ := cmd.CombinedOutput()
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("ci:s3cret"))
	if string(out) != "ok\n" || !slices.Equal(seen(), []string{"CONNECT " + target + " " + auth}) {
		t.Errorf("helper said %q; the upstream saw %q", out, seen())
	}
}
