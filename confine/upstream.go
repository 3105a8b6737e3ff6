package confine

import (
	"errors"
	"net"
	"syscall"
)

// NoRoute reports whether err, a failure of peal's proxy to reach a host a
// call may reach, says that this machine reaches nothing there at all: the
// host's name does not resolve (no DNS, no network), or no route leads to
// it. A refused or timed-out connection is not one: the host, or the way
// to it, may be down for a moment.
func NoRoute(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns.IsNotFound || !dns.IsTimeout
	}
	return errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH)
}

// upstream tells the call's watcher how a connection to a host it may
// reach went (err nil: it was made).
func (e *Endpoint) upstream(hostport string, err error) {
	if e.reached != nil {
		e.reached(hostport, err)
	}
}
