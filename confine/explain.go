package confine

import (
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strings"
)

// Keys of the settings a denial names.
const (
	KeyWritePaths   = "confine_write_paths"
	KeyReadDeny     = "confine_read_deny"
	KeyReadPaths    = "confine_read_paths"
	KeyNetworkAllow = "confine_network_allow"
)

var (
	// deniedRe finds a denial in a line, in the spellings of the shell,
	// coreutils, git, Node, Python, Go and Rust.
	deniedRe = regexp.MustCompile(`(?i)permission denied|operation not permitted|\beacces\b|\beperm\b`)
	// quotedRe finds quoted operands: 'x', "x", ‘x’, `x'.
	quotedRe = regexp.MustCompile("'([^']+)'|\"([^\"]+)\"|‘([^’]+)’|`([^'`]+)'")
	// bareRe finds a path standing right before ": Permission denied"
	// (Go's "open /x: permission denied", the shell's "sh: /x: Permission
	// denied", sed's "file ./sedX: Permission denied").
	bareRe = regexp.MustCompile(`(?i)(?:^|[\s:])((?:/|\./|\.\./|~/)[^\s:'"]*|[\w.+-]+/[^\s:'"]*)\s*:\s*(?:permission denied|operation not permitted)`)
	// dialRe finds a TCP connection the kernel refused: Go's "dial tcp
	// host:port: connect: permission denied", Node's "connect EACCES
	// host:port", bash's "/dev/tcp/host/port".
	dialRe = regexp.MustCompile(`(?i)dial tcp[46]? (\S+): connect: (?:permission denied|operation not permitted)|connect (?:EACCES|EPERM) (\S+)|/dev/tcp/([^/\s:]+)/(\d+)`)
	// unixRe finds a connection to a UNIX socket by path that peal
	// refused: Go's "dial unix /x: connect: permission denied", Node's
	// "connect EACCES /x", Python's "[Errno 13] Permission denied" after
	// a connect naming it is left to the path rules.
	unixRe = regexp.MustCompile(`(?i)dial unix (/\S+): connect: (?:permission denied|operation not permitted)|connect (?:EACCES|EPERM) (/\S+)`)
	// datagramRe finds a UDP (or raw) socket the filter refused: Go's
	// "dial udp host:port: socket: permission denied".
	datagramRe = regexp.MustCompile(`(?i)dial (udp|ip)[46]?(?::\S+)? (\S+): socket: (?:permission denied|operation not permitted)`)
)

// writeRe finds a denial of a write in the spellings of the shell and
// coreutils ("cannot create", "cannot touch"), git and the languages'
// calls that name what they did (mkdir, rename, unlink).
var writeRe = regexp.MustCompile(`(?i)cannot (?:create|touch|make|remove|move|copy|write|lock)|unable to (?:create|write)|couldn't open temporary|\b(?:mkdir|rmdir|rename|unlink|symlink|utime|chmod|copyfile|write|writing)\b`)

// Explain finds in the output of a failed call (its lines; dir is the
// folder it ran in) the denial that explains the failure, and says in one
// line what was refused and the setting that would allow it: a path it may
// not write (confine_write_paths), a secret (never readable; the user's own
// are confine_read_deny), a host (confine_network_allow). refused are the
// proxy's refusals of the call. It returns "" when nothing in the output
// points at the confinement: a permission error on a path the call may
// write is the file's own, and a refusal the output does not speak of may
// be a side request's (telemetry, an update check), which the caller
// weighs (LastRefusal).
//
// What the output speaks of wins: a refusal by the proxy whose host the
// output names (or by the model endpoint whose path it names) first, then the last denial in the output (the one closest
// to the failure).
func Explain(p *Access, dir string, lines []string, refused []Refusal) string {
	for i := len(refused) - 1; i >= 0; i-- {
		host, _, err := net.SplitHostPort(refused[i].Host)
		if err != nil {
			host = refused[i].Host
		}
		if _, p, ok := strings.Cut(refused[i].Request, " "); ok {
			// A request the model endpoint refused: the output names its
			// path (the endpoint's host is every request's).
			host = p
		}
		for _, l := range lines {
			if host != "" && strings.Contains(l, host) {
				return refused[i].Line()
			}
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if s := explainLine(p, dir, lines[i]); s != "" {
			return s
		}
	}
	return ""
}

// LastRefusal is the line of the proxy's last refusal of a call, "" when it
// refused nothing: the likeliest cause of a failure whose output names no
// cause at all ("fetch failed").
func LastRefusal(refused []Refusal) string {
	if len(refused) == 0 {
		return ""
	}
	return refused[len(refused)-1].Line()
}

func explainLine(p *Access, dir, line string) string {
	if !deniedRe.MatchString(line) {
		return ""
	}
	if m := unixRe.FindStringSubmatch(line); m != nil {
		path := m[1] + m[2]
		return fmt.Sprintf("the call was refused a connection to the UNIX socket %s: a confined call connects only to the sockets it made; %s = [%q] would allow it", path, KeyUnixSockets, path)
	}
	if m := datagramRe.FindStringSubmatch(line); m != nil {
		return fmt.Sprintf(directRefused+"%s (%s): confined calls have no UDP or raw sockets; a host name goes to peal's proxy (HTTPS_PROXY), which looks it up", m[2], strings.ToUpper(m[1]))
	}
	if m := dialRe.FindStringSubmatch(line); m != nil {
		addr := m[1] + m[2]
		if m[3] != "" {
			addr = net.JoinHostPort(m[3], m[4])
		}
		if p.TCP != nil {
			return fmt.Sprintf(directRefused+"%s: confined calls connect only through peal's proxy (HTTPS_PROXY); %s names the hosts it may reach", addr, KeyNetworkAllow)
		}
	}
	write := writeRe.MatchString(line)
	for _, c := range candidates(line) {
		if s := explainPath(p, dir, c, write); s != "" {
			return s
		}
	}
	return ""
}

// candidates are the paths a denial line names: quoted ones first, the
// last first (the one written to: "cannot move 'a' to 'b'", "cannot copy
// 'a' to 'b'", "rename 'a' -> 'b'"), then a bare one before the error.
func candidates(line string) []string {
	var out []string
	quoted := quotedRe.FindAllStringSubmatch(line, -1)
	for i := len(quoted) - 1; i >= 0; i-- {
		for _, g := range quoted[i][1:] {
			if g != "" && looksLikePath(g) {
				out = append(out, g)
			}
		}
	}
	for _, m := range bareRe.FindAllStringSubmatch(line, -1) {
		out = append(out, m[1])
	}
	return out
}

func looksLikePath(s string) bool {
	return strings.ContainsRune(s, '/') || strings.HasPrefix(s, ".") || !strings.ContainsAny(s, " \t")
}

// explainPath says why path was refused, or "" when the access allows
// writing it (the denial is not the confinement's). write: the line says
// the call was writing; else a path of a hidden folder that no grant opens
// is taken for a read.
func explainPath(p *Access, dir, path string, write bool) string {
	if strings.HasPrefix(path, "/dev/tcp/") || strings.HasPrefix(path, "/dev/udp/") {
		return ""
	}
	if !filepath.IsAbs(path) {
		if strings.HasPrefix(path, "~/") || dir == "" {
			return ""
		}
		path = filepath.Join(dir, path)
	}
	path = filepath.Clean(path)
	if d, ok := holder(p.Deny, path); ok {
		return fmt.Sprintf("the call was refused %s: it is a secret (%s, %s), which a confined call never reads", path, d.Path, d.Key)
	}
	// The deepest grant or protection that holds the path decides.
	w, writable := holder(p.Write, path)
	if h, ok := holder(p.Hide, path); ok && !write {
		r, readable := holder(p.Read, path)
		if !(writable && within(w.Path, h.Path)) && !(readable && within(r.Path, h.Path)) {
			return fmt.Sprintf("the call was refused reading %s: it lies in %s (%s), which a confined call reads only where allowed; %s = [%q] would allow it",
				path, h.Path, h.Key, KeyReadPaths, path)
		}
	}
	if pr, ok := holder(p.Protect, path); ok && (!writable || len(pr.Path) >= len(w.Path)) {
		return fmt.Sprintf("the call was refused writing %s: %s (%s) is never written by a confined call", path, pr.Path, pr.Key)
	}
	if writable {
		// Directly in a folder that holds a protected or denied path,
		// nothing can be created or removed: the folder was narrowed.
		parent := filepath.Dir(path)
		for _, list := range [][]Path{p.Protect, p.Deny} {
			for _, x := range list {
				x := filepath.Clean(x.Path)
				if beneath(x, parent) && within(parent, filepath.Clean(w.Path)) {
					return fmt.Sprintf("the call was refused creating or removing %s: %s holds %s, which a confined call never writes, so entries directly in %s cannot be created, removed or renamed (its subfolders can)", path, parent, x, parent)
				}
			}
		}
		return ""
	}
	return fmt.Sprintf("the call was refused writing %s: it is outside what the call may write; %s = [%q] would allow it", path, KeyWritePaths, filepath.Dir(path))
}

// holder is the deepest path of list that is path or holds it.
func holder(list []Path, path string) (Path, bool) {
	var best Path
	found := false
	for _, e := range list {
		c := filepath.Clean(e.Path)
		if within(path, c) && (!found || len(c) > len(best.Path)) {
			best, found = Path{Path: c, Key: e.Key}, true
		}
	}
	return best, found
}
