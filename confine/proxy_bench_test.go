package confine

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
)

// readFirstByte sends a GET on c and reads the first byte of the answer.
func readFirstByte(b *testing.B, c net.Conn, br *bufio.Reader, host string) {
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
	if _, err := br.ReadByte(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkFirstByte is the time from dialing to the first byte of an
// answer, on a new connection each time: straight to the server, through a
// CONNECT tunnel of the proxy (what HTTPS clients do), and as a plain HTTP
// request in absolute form. The proxy's cost is the difference.
func BenchmarkFirstByte(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	_, ep, _ := openProxy(b, host)
	proxy := strings.TrimPrefix(ep.URL(), "http://")
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			c, err := net.Dial("tcp", host)
			if err != nil {
				b.Fatal(err)
			}
			readFirstByte(b, c, bufio.NewReader(c), host)
			c.Close()
		}
	})
	b.Run("connect", func(b *testing.B) {
		for b.Loop() {
			c, err := net.Dial("tcp", proxy)
			if err != nil {
				b.Fatal(err)
			}
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", host, host)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
			if err != nil || resp.StatusCode != 200 {
				b.Fatal(err, resp)
			}
			readFirstByte(b, c, br, host)
			c.Close()
		}
	})
	b.Run("absolute", func(b *testing.B) {
		for b.Loop() {
			c, err := net.Dial("tcp", proxy)
			if err != nil {
				b.Fatal(err)
			}
			fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host, host)
			if _, err := bufio.NewReader(c).ReadByte(); err != nil {
				b.Fatal(err)
			}
			c.Close()
		}
	})
}

// BenchmarkStream100MB sends 100 MB from a server to a client, straight
// and through a tunnel; B/op and heap-MB say what the transfer held in
// memory (the whole process: client, proxy and server).
func BenchmarkStream100MB(b *testing.B) {
	const size = 100 << 20
	src := streamServer(b, size)
	_, ep, _ := openProxy(b, src)
	buf := make([]byte, 256<<10)
	for _, via := range []string{"direct", "tunnel"} {
		b.Run(via, func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			var peak uint64
			for b.Loop() {
				var r io.Reader
				if via == "direct" {
					c, err := net.Dial("tcp", src)
					if err != nil {
						b.Fatal(err)
					}
					defer c.Close()
					r = c
				} else {
					c, br, resp := dialConnect(b, ep, src, "")
					if resp.StatusCode != 200 {
						b.Fatal(resp.Status)
					}
					defer c.Close()
					r = br
				}
				n, err := io.CopyBuffer(io.Discard, r, buf)
				if err != nil || n != size {
					b.Fatal(n, err)
				}
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
			}
			b.ReportMetric(float64(peak)/(1<<20), "heap-MB")
		})
	}
}
