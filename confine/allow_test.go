package confine

import "testing"

func TestAllow(t *testing.T) {
	a, err := ParseAllow(KeyNetworkAllow, "api.anthropic.com", "proxy.golang.org:443", "*.googleapis.com", "127.0.0.1:8080", "[::1]:9000", "Example.COM.")
	if err != nil {
		t.Fatal(err)
	}
	for hostport, want := range map[string]bool{
		"api.anthropic.com:443":         true,
		"API.Anthropic.com.:80":         true, // any port of a bare host; case and final dot do not count
		"evil.anthropic.com:443":        false,
		"proxy.golang.org:443":          true,
		"proxy.golang.org:80":           false,
		"storage.googleapis.com:443":    true,
		"googleapis.com:443":            false, // *.domain is beneath it only
		"evilgoogleapis.com:443":        false,
		"127.0.0.1:8080":                true,
		"127.0.0.1:8081":                false,
		"localhost:8080":                false, // names and addresses are matched as written
		"[::1]:9000":                    true,
		"example.com:443":               true,
		"api.anthropic.com":             false, // no port: not a host:port
		"api.anthropic.com.evil.io:443": false,
	} {
		if got := a.Permits(hostport); got != want {
			t.Errorf("Permits(%q) = %v", hostport, got)
		}
	}
	for _, bad := range []string{"", "http://x", "host:0", "host:70000", "host:x", "*", "*.", "a.*.com", "user@host", "host/path"} {
		if _, err := ParseAllow(KeyNetworkAllow, bad); err == nil {
			t.Errorf("ParseAllow(%q) took it", bad)
		}
	}
	_, err = ParseAllow(KeyNetworkAllow, "host:0")
	if err == nil || err.Error() != `confine: confine_network_allow: "host:0": port "0" is not a port` {
		t.Errorf("error = %v", err)
	}
	b, err := a.With("base URL", "mock:1")
	if err != nil || !b.Permits("mock:1") || a.Permits("mock:1") || b.Len() != a.Len()+1 {
		t.Errorf("With: %v", err)
	}
}
