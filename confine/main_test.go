package confine

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// helperEnv makes the test binary a helper program: each test's confined
// child is this binary, which tries one thing and says how it went.
const helperEnv = "CONFINE_TEST_HELPER"

func TestMain(m *testing.M) {
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
	case "env":
		v, ok := os.LookupEnv(arg)
		if ok {
			fmt.Println("set:", v)
			return 0
		}
		fmt.Println("unset")
		return 0
	case "run":
		var out []byte
		out, err = exec.Command("sh", "-c", arg).CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
		}
	default:
		err = fmt.Errorf("unknown action %q", what)
	}
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("ok")
	return 0
}
