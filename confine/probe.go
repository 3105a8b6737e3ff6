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
	// CapsKept says that a confined call keeps root's capabilities (root
	// without CAP_SETPCAP cannot empty the bounding set); empty when the
	// call holds none.
	CapsKept string

	// Seccomp: every call runs under the seccomp filter, an allow list of
	// system calls (package launch).
	Seccomp bool
	// Supervise: every connect() of a call is handed to peal, which
	// connects the call's socket itself where the access allows: TCP to
	// the allowed loopback addresses and ports, UNIX sockets the call made
	// or that confine_unix_sockets names; so is every listen() of a call
	// without a network namespace.
	Supervise bool
	// SeccompWhy is why Seccomp or Supervise is missing.
	SeccompWhy string

	// PIDNamespace: each call's launcher is the init of a PID namespace of
	// its own (with a mount namespace, for its /proc), whose end ends every
	// process the call started; without it, the launcher and peal hold the
	// call's processes as subreapers. IPCNamespace and UTSNamespace: the
	// call has System V IPC, POSIX message queues and a host name of its
	// own. The three are made together.
	PIDNamespace, IPCNamespace, UTSNamespace bool
	// NetNamespace: each call has a network namespace of its own whose
	// only interface is loopback, where the launcher listens for peal on
	// the call's proxy port (and the loopback ports it may reach). Probe
	// turns it on where the system allows it (NetNamespaceAllowed);
	// NetNamespaceOff says the configuration turned it off
	// (confine_network_namespace = false, WithoutNetNamespace).
	NetNamespace, NetNamespaceAllowed, NetNamespaceOff bool
	// UserNamespace: the namespaces are made in a user namespace of the
	// call's own (peal is not root).
	UserNamespace bool
	// NamespaceWhy is why the namespaces (or the network namespace) are
	// not allowed.
	NamespaceWhy string
}

// WithoutNetNamespace is s with no network namespace for the calls, as
// confine_network_namespace = false asks: weaker (the calls share the
// machine's loopback), which the line says.
func (s Support) WithoutNetNamespace() Support {
	s.NetNamespace, s.NetNamespaceOff = false, true
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
		parts = append(parts, s.syscalls()...)
		if s.CapsKept != "" {
			parts = append(parts, "calls keep "+s.CapsKept)
		} else {
			parts = append(parts, "no capabilities")
		}
		parts = append(parts, "no terminal")
	} else {
		parts = append(parts, "calls get the allowed environment and peal's proxy only")
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
		ns = append(ns, "PID", "mount")
	}
	if s.IPCNamespace {
		ns = append(ns, "IPC")
	}
	if s.UTSNamespace {
		ns = append(ns, "UTS")
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
		why := "no PID, mount, IPC or UTS namespace"
		if !s.NetNamespace && !s.NetNamespaceOff {
			why = "no namespaces"
		}
		if s.NamespaceWhy != "" {
			why += ": " + s.NamespaceWhy
		}
		parts = append(parts, "a call's processes held by its launcher and peal as subreapers, System V IPC refused ("+why+")")
	}
	switch {
	case s.NetNamespaceOff:
		parts = append(parts, "no network namespace (confine_network_namespace = false): weaker, a call shares this machine's network, kept to its proxy by seccomp and peal")
	case !s.NetNamespace && s.PIDNamespace:
		why := "no network namespace"
		if s.NamespaceWhy != "" {
			why += ": " + s.NamespaceWhy
		}
		parts = append(parts, why)
	}
	return strings.Join(parts, "; ")
}

// syscalls says what the seccomp filter and the supervisor enforce, in
// parts short enough for a line of their own.
func (s Support) syscalls() []string {
	paths := "UNIX sockets by path not confined"
	filter := []string{"seccomp allow list: no UDP, raw, packet or datagram UNIX sockets, no netlink but NETLINK_ROUTE",
		"no ptrace, bpf, keyrings, mounts or namespaces of its own"}
	switch {
	case s.Supervise:
		return append(filter, "every connect decided by peal: TCP to the allowed loopback ports",
			"UNIX sockets only those the call made and confine_unix_sockets")
	case s.Seccomp:
		filter = append(filter, "connections not decided by peal ("+s.SeccompWhy+")")
	default:
		filter = []string{"system calls not filtered (" + s.SeccompWhy + ")"}
	}
	if s.ABI < unixABI {
		filter = append(filter, paths)
	}
	return filter
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
// confined, a namespace the system refuses (a network namespace only where
// the configuration asks for one), a system-call filter it lacks, a
// direct way to any host around the proxy, root's capabilities kept.
func (s Support) Lacks() string {
	if !s.Files {
		return "cannot confine files: " + s.Why // on refuses: the rest would follow
	}
	var lacks []string
	if !s.PIDNamespace || !s.IPCNamespace || !s.UTSNamespace {
		lacks = append(lacks, "cannot give calls PID, mount, IPC and UTS namespaces of their own: "+s.namespaceWhy())
	}
	if !s.NetNamespace && !s.NetNamespaceOff {
		lacks = append(lacks, "cannot give calls a network namespace of their own: "+s.namespaceWhy()+" (confine_network_namespace = false runs without, weaker)")
	}
	if !s.Seccomp {
		lacks = append(lacks, "cannot filter the calls' system calls: "+s.SeccompWhy)
	}
	if s.directPath() != "" {
		why := s.SeccompWhy
		if s.NamespaceWhy != "" {
			why += "; no network namespace: " + s.NamespaceWhy
		}
		lacks = append(lacks, "cannot keep calls from connecting around peal's proxy: "+why)
	}
	if s.CapsKept != "" {
		lacks = append(lacks, "cannot take root's capabilities from calls: they keep "+s.CapsKept)
	}
	if len(lacks) == 0 {
		return ""
	}
	return strings.Join(lacks, "; it ")
}

func (s Support) namespaceWhy() string {
	if s.NamespaceWhy != "" {
		return s.NamespaceWhy
	}
	return "not tried"
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
