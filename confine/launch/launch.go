// Package launch is the launcher of a confined call: peal's own binary,
// started by the kernel in the call's place with Env set, which sets up
// the call's namespaces, applies its rules to one thread, starts the
// call's program from that thread, and stays as its supervisor: the init
// of the call's PID namespace (or, without one, the subreaper of the
// call's processes), so that nothing the program starts outlives the
// call. It talks to peal over a socket (the control socket): the Landlock
// ruleset peal sends it, what failed, the file descriptors peal needs (the seccomp listener, the sockets
// of the call's network namespace), and the program's exit.
//
// The launcher runs from this package's initialiser, before the rest of
// peal initialises. The Go runtime initialises a package as soon as its
// imports are, in the order of their paths, so this package imports
// nothing but runtime, syscall and unsafe (os, strings or golang.org/x/sys
// would make it wait for most of the standard library: about 2 ms of every
// confined call). Its constants are the kernel's, checked against
// golang.org/x/sys/unix by its tests. peal's side (the rules, what is
// enforced, the supervisor of connections) is package confine.
package launch

import "errors"

// Env names the variable that makes peal's binary the launcher. It is set
// in the launcher's environment only and taken out before the program
// runs.
const Env = "PEAL_CONFINED_LAUNCH"

// Flags of a launch: what the launcher sets up.
const (
	// Init: the launcher is the init of a new PID namespace (and of a
	// mount namespace whose /proc is that namespace's).
	Init = 1 << iota
	// Subreaper: without a PID namespace, the launcher adopts the orphans
	// of the call's processes.
	Subreaper
	// Network: the launcher is in a new network namespace: it brings the
	// loopback interface up, listens on 127.0.0.1 at each of Ports, and
	// opens a sock_diag socket there, with which peal tells the call's
	// own UNIX sockets.
	Network
	// Landlock: apply the Landlock ruleset peal sends (MsgRuleset)
	// before the program starts.
	Landlock
	// Seccomp: install the seccomp filter of the call.
	Seccomp
	// Supervise: the filter hands every connect() to peal, which decides
	// and connects itself (the listener goes to peal).
	Supervise
	// Probe: set up the namespaces, report and exit, starting nothing.
	Probe
	// IPC: the launcher is in a new IPC namespace (System V IPC and POSIX
	// message queues of the call's own), which the filter then allows.
	IPC
	// UTS: the launcher is in a new UTS namespace (a host name of the
	// call's own).
	UTS
	// JoinNetwork (with Network): the launcher is not started in a new
	// network namespace but joins, on its main thread, the one peal made
	// ahead for the call (its loopback up), open at the file after the
	// control socket: making a network namespace costs the call's start
	// about a millisecond, which peal spends while the previous call runs.
	// (Joining takes CAP_SYS_ADMIN in the namespace's user namespace:
	// root's, the machine's.)
	JoinNetwork
)

// Config is what peal tells the launcher, through Env.
type Config struct {
	Control int // the launcher's end of the control socket
	Flags   uint32
	// Extra is how many of the caller's own files follow standard
	// error (fd 3 and up): the program gets them; the launcher's own
	// come after them.
	Extra   int
	Ports   []uint16
	Program string // the program's full path (last: it may hold anything)
}

// Encode is the value of Env that carries c.
func (c Config) Encode() string {
	b := itoa(nil, int64(c.Control))
	b = append(b, ',')
	b = itoa(b, int64(c.Flags))
	b = append(b, ',')
	b = itoa(b, int64(c.Extra))
	b = append(b, ',')
	for i, p := range c.Ports {
		if i > 0 {
			b = append(b, ':')
		}
		b = itoa(b, int64(p))
	}
	b = append(b, ',')
	return string(append(b, c.Program...))
}

var errMalformed = errors.New("malformed")

// Parse reads a value of Env.
func Parse(v string) (Config, error) {
	var f [5]string
	for i := range 4 {
		j := index(v, ',')
		if j < 0 {
			return Config{}, errMalformed
		}
		f[i], v = v[:j], v[j+1:]
	}
	f[4] = v
	var n [3]int64
	for i := range n {
		var ok bool
		if n[i], ok = atoi(f[i]); !ok {
			return Config{}, errMalformed
		}
	}
	c := Config{Control: int(n[0]), Extra: int(n[2]), Program: f[4]}
	if n[1] < 0 || n[1] > 1<<32-1 {
		return Config{}, errMalformed
	}
	c.Flags = uint32(n[1])
	for ports := f[3]; ports != ""; {
		s := ports
		if j := index(ports, ':'); j >= 0 {
			s, ports = ports[:j], ports[j+1:]
		} else {
			ports = ""
		}
		p, ok := atoi(s)
		if !ok || p < 1 || p > 65535 {
			return Config{}, errMalformed
		}
		c.Ports = append(c.Ports, uint16(p))
	}
	if c.Control < 0 || c.Extra < 0 || c.Program == "" && c.Flags&Probe == 0 {
		return Config{}, errMalformed
	}
	return c, nil
}

// The messages of the control socket, one per packet: the first byte says
// which, the rest is its text.
const (
	// MsgRuleset, peal's one message to the launcher (with Landlock): the
	// call's Landlock ruleset, the packet's one file descriptor; the text
	// is landlock_restrict_self's flags. peal builds it while the launcher
	// starts, and the launcher applies it before the program starts; it
	// starts nothing without it.
	MsgRuleset = 'R'

	// MsgStarted: the program runs. The packet carries, in this order,
	// the seccomp listener (with Supervise), and, with Network, the
	// namespace's sock_diag socket and one listener per port.
	MsgStarted = 'S'
	// MsgFailed: the launcher could not set up or start the program,
	// which never ran; the text says why. The launcher then exits.
	MsgFailed = 'F'
	// MsgExited: the program has exited; the text is its wait status.
	MsgExited = 'X'
)

// Exit codes of a launcher that did not run the program.
const (
	ExitSetup    = 126 // it could not set up the call
	ExitNotFound = 127 // it could not start the program
)

// itoa appends the decimal form of n to b.
func itoa(b []byte, n int64) []byte {
	if n < 0 {
		b = append(b, '-')
		n = -n
	}
	var d [20]byte
	i := len(d)
	for {
		i--
		d[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return append(b, d[i:]...)
}

// atoi reads a decimal integer (a leading minus allowed).
func atoi(s string) (int64, bool) {
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	if s == "" || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int64(s[i]-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

func index(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}
