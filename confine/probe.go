package confine

import (
	"fmt"
	"strings"
	"sync"
)

// Support is what this machine enforces on a confined call. Every part
// is found by trying it (Probe): the Landlock ABI, the seccomp features a
// supervisor of connections needs, and the namespaces the launcher can
// make (as root, or in a user namespace where unprivileged ones are
// allowed).
type Support struct {
	ABI   int  // the Landlock ABI version; 0 when there is none
	Files bool // file-system rules: Landlock ABI 1 (Linux 5.13)
	TCP   bool // TCP connect and bind rules: Landlock ABI 4 (Linux 6.7)
	// Why is why Landlock enforces nothing, when ABI is 0.
	Why string
	// CapsKept names the capabilities a confined call should lose and
	// keeps (root without CAP_SETPCAP); empty when it keeps none.
	CapsKept string

	// Seccomp: every call runs under the seccomp filter that refuses UDP,
	// raw and packet sockets (and io_uring, and the 32-bit ABI's sockets).
	Seccomp bool
	// Supervise: every connect() of a call is handed to peal, which
	// connects the call's socket itself where the access allows: TCP to
	// the allowed loopback addresses and ports, UNIX sockets in what the
	// call may write or in confine_unix_sockets.
	Supervise bool
	// SeccompWhy is why Seccomp or Supervise is missing.
	SeccompWhy string

	// PIDNamespace: each call's launcher is the init of a PID namespace
	// of its own, whose end ends every process the call started; without
	// it, the launcher and peal hold the call's processes as subreapers.
	PIDNamespace bool
	// NetNamespace: each call has a network namespace of its own whose
	// only interface is loopback, where the launcher listens for peal on
	// the call's proxy port (and the loopback ports it may reach). Probe
	// leaves it off: a network namespace costs about a millisecond a call
	// (its making and its end, in the kernel; docs/benchmarks.md), and the
	// supervisor of connections keeps a call to its proxy without one. A
	// caller that wants it where it is allowed turns it on (Call.Support).
	NetNamespace bool
	// NetNamespaceAllowed: the system allows a call a network namespace.
	NetNamespaceAllowed bool
	// UserNamespace: the namespaces are made in a user namespace of the
	// call's own (peal is not root).
	UserNamespace bool
	// NamespaceWhy is why a PID namespace (or a network namespace) is not
	// allowed.
	NamespaceWhy string
}

// WithNetNamespace is s with each call in a network namespace of its own,
// where the system allows it.
func (s Support) WithNetNamespace() Support {
	s.NetNamespace = s.NetNamespaceAllowed
	return s
}

// Minimum Landlock ABI versions of each part of an access.
const (
	filesABI = 1
	referABI = 2 // renames and links between folders
	tcpABI   = 4
	// unixABI is the first ABI that checks a connection to a UNIX socket
	// by its path (the Docker socket, an SSH agent's): before it, and
	// without the supervisor of connections, a confined call connects to
	// any socket its user may.
	unixABI = 9
)

// String is the one line that says what is enforced and what is not.
func (s Support) String() string { return strings.Join(s.Parts(), "; ") }

// Parts say what is enforced and what is not, a thing each.
func (s Support) Parts() []string {
	var parts []string
	switch {
	case s.TCP:
		parts = append(parts, fmt.Sprintf("files and TCP enforced by Landlock ABI %d", s.ABI))
	case s.Files:
		parts = append(parts, fmt.Sprintf("files enforced by Landlock ABI %d; TCP ports not enforced (it needs Landlock ABI 4, Linux 6.7)", s.ABI))
	default:
		parts = append(parts, "files not enforced: "+s.Why)
	}
	if s.launches() {
		parts = append(parts, s.namespaces())
		parts = append(parts, s.sockets())
		parts = append(parts, "no terminal")
	} else {
		parts = append(parts, "calls get the allowed environment and peal's proxy only")
	}
	if s.CapsKept != "" {
		parts = append(parts, "calls keep root's "+s.CapsKept+" (peal lacks CAP_SETPCAP to drop them)")
	}
	if why := s.directPath(); why != "" {
		parts = append(parts, "a call that ignores the proxy variables "+why)
	}
	return parts
}

// namespaces says what holds a call's processes and network.
func (s Support) namespaces() string {
	var ns []string
	if s.UserNamespace && (s.PIDNamespace || s.NetNamespace) {
		ns = append(ns, "user")
	}
	if s.PIDNamespace {
		ns = append(ns, "PID")
	}
	if s.NetNamespace {
		ns = append(ns, "network")
	}
	var parts []string
	switch len(ns) {
	case 0:
	case 1:
		parts = append(parts, "each call in a "+ns[0]+" namespace of its own")
	default:
		parts = append(parts, "each call in "+joinAnd(ns)+" namespaces of its own")
	}
	if s.NetNamespace {
		parts[0] += " (loopback only, peal's proxy inside)"
	}
	if !s.PIDNamespace {
		parts = append(parts, "a call's processes held by its launcher and peal as subreapers")
	}
	out := strings.Join(parts, "; ")
	if !s.PIDNamespace && s.NamespaceWhy != "" {
		what := "PID namespace"
		if !s.NetNamespaceAllowed {
			what = "namespaces"
		}
		out += " (no " + what + ": " + s.NamespaceWhy + ")"
	}
	return out
}

// sockets says what the seccomp filter and the supervisor enforce.
func (s Support) sockets() string {
	paths := ""
	if s.ABI < unixABI {
		paths = "; UNIX sockets by path not confined"
	}
	switch {
	case s.Supervise:
		return "seccomp: no UDP, raw or packet sockets, every connect decided by peal (TCP to the allowed loopback ports, UNIX sockets in the call's tree or confine_unix_sockets)"
	case s.Seccomp:
		return "seccomp: no UDP, raw or packet sockets; connections not decided by peal (" + s.SeccompWhy + ")" + paths
	default:
		return "UDP and raw sockets not confined (" + s.SeccompWhy + ")" + paths
	}
}

// directPath says how a call reaches hosts around the proxy, "" when it
// cannot: a network namespace or the supervisor keeps it to the proxy.
func (s Support) directPath() string {
	if s.NetNamespace || s.Supervise {
		return ""
	}
	if s.TCP {
		return "connects directly to any host on the ports its access opens"
	}
	return "connects directly to any host"
}

// Lacks says what keeps confine = on from holding on this machine ("this
// machine cannot …"), "" when nothing does: files that cannot be
// confined, or a direct way to any host around the proxy.
func (s Support) Lacks() string {
	if !s.Files {
		return "cannot confine files: " + s.Why
	}
	if s.directPath() != "" {
		why := s.SeccompWhy
		if s.NamespaceWhy != "" {
			why += "; no network namespace: " + s.NamespaceWhy
		}
		return "cannot keep calls from connecting around peal's proxy: " + why
	}
	return ""
}

// launches tells whether a confined call is started through the launcher:
// when anything of it is enforced.
func (s Support) launches() bool {
	return s.Files || s.Seccomp || s.PIDNamespace || s.NetNamespace
}

func joinAnd(list []string) string {
	if len(list) <= 1 {
		return strings.Join(list, "")
	}
	return strings.Join(list[:len(list)-1], ", ") + " and " + list[len(list)-1]
}

func supportOf(abi int, why string) Support {
	return Support{ABI: abi, Files: abi >= filesABI, TCP: abi >= tcpABI, Why: why}
}

var probed = sync.OnceValue(probe)

// Probe tells what this machine enforces. It asks the kernel once per
// process (and starts the launcher once, to try the namespaces).
func Probe() Support { return probed() }
