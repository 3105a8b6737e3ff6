package confine

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Allow is a call's network allow list: the hosts it may reach through the
// proxy. An entry is "host" (any port of it), "host:port", or "*.domain"
// (any host beneath domain, not domain itself; with ":port", that port).
// Hosts are names or IP addresses, matched as written (a name does not
// allow the addresses it resolves to, nor the reverse); IPv6 addresses go
// in brackets when a port follows ("[::1]:8080").
type Allow struct {
	entries []allowEntry
}

type allowEntry struct {
	host     string // lower case, no trailing dot, no brackets; for a wildcard, ".domain"
	port     string // "" for any
	wildcard bool
}

// ParseAllow reads allow-list entries; key names the setting in errors.
func ParseAllow(key string, entries ...string) (Allow, error) {
	var a Allow
	return a, a.add(key, entries)
}

// With is a copy of a with more entries.
func (a Allow) With(key string, entries ...string) (Allow, error) {
	b := Allow{entries: append([]allowEntry(nil), a.entries...)}
	return b, b.add(key, entries)
}

func (a *Allow) add(key string, entries []string) error {
	for _, s := range entries {
		e, err := parseAllowEntry(s)
		if err != nil {
			return fmt.Errorf("confine: %s: %q: %v", key, s, err)
		}
		a.entries = append(a.entries, e)
	}
	return nil
}

func parseAllowEntry(s string) (allowEntry, error) {
	if s == "" || strings.ContainsAny(s, "/ \t@?#") {
		return allowEntry{}, fmt.Errorf("not a host or host:port")
	}
	host, port := s, ""
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return allowEntry{}, fmt.Errorf("port %q is not a port", p)
		}
	}
	e := allowEntry{host: normHost(host), port: port}
	if rest, ok := strings.CutPrefix(e.host, "*."); ok {
		if rest == "" || strings.Contains(rest, "*") {
			return allowEntry{}, fmt.Errorf("a wildcard is *.domain")
		}
		e.host, e.wildcard = "."+rest, true
	} else if e.host == "" || strings.Contains(e.host, "*") {
		return allowEntry{}, fmt.Errorf("a wildcard is *.domain")
	}
	return e, nil
}

func normHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")), ".")
}

// Permits tells whether hostport ("host:port") may be reached.
func (a Allow) Permits(hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	host = normHost(host)
	for _, e := range a.entries {
		if e.port != "" && e.port != port {
			continue
		}
		if e.wildcard && strings.HasSuffix(host, e.host) || !e.wildcard && host == e.host {
			return true
		}
	}
	return false
}

// Names tells whether an entry names hostport's host itself, not through
// a wildcard, with its port or with none: a host the user chose by name.
func (a Allow) Names(hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	host = normHost(host)
	for _, e := range a.entries {
		if !e.wildcard && e.host == host && (e.port == "" || e.port == port) {
			return true
		}
	}
	return false
}

// Len is the number of entries.
func (a Allow) Len() int { return len(a.entries) }

// Entries are the entries of a, as they are written ("host", "host:port",
// "*.domain"), for a description of the list.
func (a Allow) Entries() []string {
	out := make([]string, len(a.entries))
	for i, e := range a.entries {
		h := e.host
		switch {
		case e.wildcard:
			h = "*" + h
		case strings.Contains(h, ":"):
			h = "[" + h + "]"
		}
		if e.port != "" {
			h += ":" + e.port
		}
		out[i] = h
	}
	return out
}
