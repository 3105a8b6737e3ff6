package confine

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// helperEnv makes the test binary a helper program: each test's confined
// child is this binary, which tries one thing and says how it went.
const helperEnv = "CONFINE_TEST_HELPER"

func TestMain(m *testing.M) {
	if len(os.Args) == 3 && strings.HasPrefix(os.Args[1], "daemon-") {
		// A stage of the daemon a call starts: its environment is gone.
		os.Exit(daemonStage(os.Args[1], os.Args[2]))
	}
	if os.Getenv(helperEnv) == "1" {
		os.Exit(helper(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// helper does what args say and prints "ok" or the error, on one line.
func helper(args []string) int {
	if len(args) != 2 {
		fmt.Println("usage: <action> <operand>")
		return 2
	}
	var err error
	switch what, arg := args[0], args[1]; what {
	case "write":
		err = os.WriteFile(arg, []byte("planted\n"), 0o644)
	case "mkdir":
		err = os.Mkdir(arg, 0o755)
	case "read":
		_, err = os.ReadFile(arg)
	case "list":
		_, err = os.ReadDir(arg)
	case "dial":
		var c net.Conn
		if c, err = net.Dial("tcp", arg); err == nil {
			c.Close()
		}
	case "get":
		// Through the proxy of the environment, for any host: Go's own
		// client would go direct to a loopback address.
		var proxy *url.URL
		if proxy, err = url.Parse(os.Getenv("HTTPS_PROXY")); err == nil {
			client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
			var resp *http.Response
			if resp, err = client.Get(arg); err == nil {
				resp.Body.Close()
				if resp.StatusCode != 200 {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
		}
	case "tunnel":
		// A CONNECT through the proxy by hand, then a plain request in
		// the tunnel: what any HTTPS client does, without TLS.
		err = tunnelGet(os.Getenv("HTTPS_PROXY"), arg)
	case "chain":
		// A tunnel through a proxy of this process's own, which goes
		// through the proxy of its environment.
		p := NewProxy(nil)
		var a Allow
		if a, err = ParseAllow(KeyNetworkAllow, arg); err == nil {
			var ep *Endpoint
			if ep, err = p.Open("c1", a); err == nil {
				err = tunnelGet(ep.URL(), arg)
				ep.Close()
			}
		}
	case "daemon":
		// arg: a file the daemon holds a lock on for as long as it lives.
		err = startDaemon(arg)
	case "tty":
		// arg: the path of the terminal peal runs on.
		return tryTerminal(arg)
	case "peal-tty":
		// As peal on a terminal: one confined call that tries it.
		return confinedOnTerminal(arg)
	case "dialn":
		// arg: host:port,n: n connections one after the other.
		hostport, count, _ := strings.Cut(arg, ",")
		var n int
		fmt.Sscan(count, &n)
		for i := 0; i < n && err == nil; i++ {
			var c net.Conn
			if c, err = net.Dial("tcp", hostport); err == nil {
				c.Close()
			}
		}
	case "dial-proxy-port":
		// arg: a host; the port is the proxy's, written PORT.
		var u *url.URL
		if u, err = url.Parse(os.Getenv("HTTPS_PROXY")); err == nil {
			var c net.Conn
			if c, err = net.Dial("tcp", net.JoinHostPort(arg, u.Port())); err == nil {
				c.Close()
			} else {
				err = fmt.Errorf("%s", strings.ReplaceAll(err.Error(), ":"+u.Port()+":", ":PORT:"))
			}
		}
	case "model":
		// A model request to the call's model endpoint, with its
		// placeholder, as its CLI would send it.
		err = modelRequest(os.Getenv("BASE_URL"), "X-Api-Key", os.Getenv("KEY_VAR"))
	case "findkey":
		// arg: the model key, written backwards (so that the call's
		// arguments do not hold it).
		return findKey(reverse(arg))
	case "udp":
		var c net.Conn
		if c, err = net.Dial("udp", arg); err == nil {
			_, err = c.Write([]byte("stolen"))
			c.Close()
		}
	case "raw":
		err = trySocket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_ICMP)
	case "packet":
		err = trySocket(syscall.AF_PACKET, syscall.SOCK_RAW, 0)
	case "unix":
		var c net.Conn
		if c, err = net.Dial("unix", arg); err == nil {
			c.Close()
		}
	case "unixserve", "abstract":
		// A server of the call's own, and a connection to it.
		if what == "abstract" {
			arg = "@" + arg
		}
		err = serveAndDial("unix", arg)
	case "tcpserve":
		err = serveAndDial("tcp", "127.0.0.1:0")
	case "socketpair":
		typ := syscall.SOCK_STREAM
		if arg == "dgram" {
			typ = syscall.SOCK_DGRAM
		}
		var fds [2]int
		if fds, err = syscall.Socketpair(syscall.AF_UNIX, typ, 0); err == nil {
			syscall.Close(fds[0])
			syscall.Close(fds[1])
		} else {
			err = fmt.Errorf("socketpair: %w", err)
		}
	case "mknod":
		// A character device (the null device's numbers).
		err = mknodChar(arg)
	case "caps":
		// arg: the status file to read (/proc/self/status).
		err = heldCaps(arg)
	case "env":
		v, ok := os.LookupEnv(arg)
		if ok {
			fmt.Println("set:", v)
			return 0
		}
		fmt.Println("unset")
		return 0
	case "show":
		out, _ := exec.Command("sh", "-c", arg).CombinedOutput()
		fmt.Print(string(out))
		return 0
	case "run":
		var out []byte
		out, err = exec.Command("sh", "-c", arg).CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
		}
	default:
		var ok bool
		if ok, err = denyHelper(what, arg); !ok {
			err = fmt.Errorf("unknown action %q", what)
		}
	}
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("ok")
	return 0
}

// tunnelGet asks the proxy at proxyURL for a tunnel to hostport and sends
// a GET through it; the error says what the proxy or the server answered.
func tunnelGet(proxyURL, hostport string) error {
	u, err := url.Parse(proxyURL)
	if err != nil {
		return err
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hostport, hostport)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		body := make([]byte, 512)
		n, _ := resp.Body.Read(body)
		return fmt.Errorf("proxy answered %d: %s", resp.StatusCode, strings.TrimSpace(string(body[:n])))
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", hostport)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("server answered %d", resp.StatusCode)
	}
	return nil
}

func trySocket(domain, typ, proto int) error {
	fd, err := syscall.Socket(domain, typ, proto)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	syscall.Close(fd)
	return nil
}

// serveAndDial listens at addr, connects to it and has one byte go round.
func serveAndDial(network, addr string) error {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			io.Copy(c, c)
			c.Close()
		}
	}()
	c, err := net.Dial(network, ln.Addr().String())
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte{7}); err != nil {
		return err
	}
	b := make([]byte, 1)
	_, err = io.ReadFull(c, b)
	return err
}
