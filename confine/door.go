package confine

import "net"

// Door is a listener peal owns for one call, on a port of 127.0.0.1 that
// the call's environment names: the call's proxy endpoint (Endpoint), its
// model endpoint (KeyEndpoint). Where the call has a network namespace of
// its own, the launcher listens on the same port there and peal serves
// that listener too (Serve), so the same address reaches the same door
// from either side; every door of a call is one more such port. Close
// stops both, and whatever the door still serves.
type Door interface {
	// Port is the door's port on 127.0.0.1 (and in the call's namespace).
	Port() uint16
	// Serve starts serving ln, another listener of the call's on the
	// same port, until the door closes.
	Serve(ln net.Listener)
	Close() error
}

// doorPorts are the ports of doors, in their order.
func doorPorts(doors []Door) []uint16 {
	out := make([]uint16, 0, len(doors))
	for _, d := range doors {
		out = append(out, d.Port())
	}
	return out
}
