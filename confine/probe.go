package confine

import (
	"fmt"
	"sync"
)

// Support is what this machine's kernel enforces.
type Support struct {
	ABI   int  // the Landlock ABI version; 0 when there is none
	Files bool // file-system rules: Landlock ABI 1 (Linux 5.13)
	TCP   bool // TCP connect and bind rules: Landlock ABI 4 (Linux 6.7)
	// Why is why nothing is enforced, when ABI is 0.
	Why string
	// CapsKept names the capabilities a confined call should lose and
	// keeps (root without CAP_SETPCAP); empty when it keeps none.
	CapsKept string
}

// Minimum Landlock ABI versions of each part of a policy.
const (
	filesABI = 1
	referABI = 2 // renames and links between folders
	tcpABI   = 4
	// unixABI is the first ABI that checks a connection to a UNIX socket
	// by its path (the Docker socket, an SSH agent's): before it, a
	// confined call connects to any socket its user may.
	unixABI = 9
)

// String is the one line that says what is enforced and what is not.
func (s Support) String() string {
	also := ""
	if s.ABI < unixABI {
		also = "; UNIX sockets by path not enforced (Landlock ABI 9)"
	}
	if s.CapsKept != "" {
		also += "; calls keep root's " + s.CapsKept + " (peal lacks CAP_SETPCAP to drop them)"
	}
	switch {
	case s.TCP:
		return fmt.Sprintf("files and TCP enforced by Landlock ABI %d%s", s.ABI, also)
	case s.Files:
		return fmt.Sprintf("files enforced by Landlock ABI %d; TCP not enforced (it needs Landlock ABI 4, Linux 6.7): calls reach the network through peal's proxy only when they use it%s", s.ABI, also)
	default:
		return "not enforced: " + s.Why + "; calls get the allowed environment and peal's proxy only"
	}
}

func supportOf(abi int, why string) Support {
	return Support{ABI: abi, Files: abi >= filesABI, TCP: abi >= tcpABI, Why: why}
}

var probed = sync.OnceValue(probe)

// Probe tells what this machine's kernel enforces. It asks the kernel once
// per process.
func Probe() Support { return probed() }
