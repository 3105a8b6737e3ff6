package confine

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"peal/confine/launch"
)

// Call is the confinement of one child process, filled by the caller for
// each call and handed to phase (phase.Spec.Confine), which calls Environ
// and Prepare when it starts the child.
type Call struct {
	Mode Mode
	// Access is what the kernel enforces. The call's temporary folder is
	// added by Prepare; with a Proxy and Access.TCP set, so is the
	// endpoint's port.
	Access Access
	// EnvPass are the variables of peal's environment that pass besides
	// BasicEnv: names or PREFIX_* patterns (the kind's own variables,
	// confine_env_pass).
	EnvPass []string
	// Proxy, when set, is the run's proxy: the call gets an endpoint of its
	// own that reaches only Allow, and its environment points at it.
	Proxy *Proxy
	Allow Allow
	// Support, when set, is what the call may use of what this machine
	// enforces, in Probe's place: less than Probe finds (a test of a
	// fallback), never more.
	Support *Support
}

func (c *Call) support() Support {
	if c.Support != nil {
		return *c.Support
	}
	return Probe()
}

// Environ is what the call keeps of the environment it inherits from peal;
// what peal adds on purpose for the call comes after it and is kept.
func (c *Call) Environ(env []string) []string {
	if c.Mode == Off {
		return env
	}
	return FilterEnv(env, c.EnvPass)
}

// Prepare makes cmd, not started yet, start confined: with the proxy's
// variables added to cmd.Env and, where anything is enforced, as the
// launcher (peal's own binary, package launch), which sets up the call's
// namespaces, applies the rules and the seccomp filter to itself, runs
// cmd's program with cmd's arguments and stays its supervisor, in a
// session of its own. id names the call in the proxy's refusals; tempDir
// (when not "") is the call's temporary folder, which it may write. It
// returns nil when there is nothing to do (Off, or cmd could not be
// resolved: its Start then fails as it would have). Under On it fails when
// this machine cannot hold the access (Support.Lacks); under Auto it
// enforces what the machine has.
func (c *Call) Prepare(cmd *exec.Cmd, id, tempDir string) (*Launch, error) {
	if c.Mode == Off || cmd.Err != nil {
		return nil, nil
	}
	if cmd.Env == nil {
		cmd.Env = c.Environ(os.Environ())
	}
	pol := c.Access.Clone()
	if tempDir != "" {
		pol.Write = append(pol.Write, Path{Path: tempDir, Key: KeyTemp})
	}
	l := &Launch{launcherFD: -1}
	if c.Proxy != nil {
		ep, err := c.Proxy.Open(id, c.Allow)
		if err != nil {
			return nil, err
		}
		l.endpoint = ep
		cmd.Env = append(cmd.Env, ep.Env()...)
		l.serve(&pol, ep.Port(), func(ln net.Listener) error { return ep.srv.Serve(ln) })
	}
	if err := pol.Validate(); err != nil {
		l.Close()
		return nil, err
	}
	sup := c.support()
	if lack := sup.Lacks(); c.Mode == On && lack != "" {
		l.Close()
		return nil, fmt.Errorf("confine = on, but this machine %s", lack)
	}
	if !sup.launches() {
		return l, nil
	}
	if err := l.launcher(cmd, c, pol, sup); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// Launch is a confined call under way: its proxy endpoint, and its
// launcher: the control socket, and what peal serves for the call.
type Launch struct {
	endpoint *Endpoint
	// ctl is peal's end of the launcher's control socket; child are the
	// launcher's files (its end), closed once it started.
	ctl   *net.UnixConn
	child []*os.File
	// ruleset is the call's Landlock ruleset, being built until Wait
	// sends it to the launcher (nil without Landlock, or once sent).
	ruleset chan builtRuleset
	cmd     *exec.Cmd
	flags   uint32 // the launcher's (package launch)
	// served are the endpoints peal serves for the call on loopback (its
	// proxy endpoint first), each reached inside the call's network
	// namespace at the same port (see serve).
	served []served
	rules  *netRules
	sup    *supervisor
	// done closes when the program has exited (status, exited) or the
	// launcher has ended.
	done   chan struct{}
	status syscall.WaitStatus
	exited bool

	// netns is the network namespace made ahead that the launcher joined
	// (nil: none), and launcherFD a pidfd of the launcher (-1: none), whose
	// end, its PID namespace's with it, empties the namespace again.
	netns      *os.File
	launcherFD int

	mu        sync.Mutex
	closed    bool
	listeners []net.Listener
	conns     map[net.Conn]struct{}
	once      sync.Once
}

// served is an endpoint peal serves for one call on a port of its loopback.
type served struct {
	port  uint16
	serve func(net.Listener) error
}

// serve makes an endpoint peal serves for this call, on port of 127.0.0.1
// (by serve), reachable by the call as it is by peal: the port is opened
// to the call's TCP rules (directly, without a network namespace), and in
// the call's network namespace the launcher listens at the same port of
// the namespace's 127.0.0.1 and hands the socket over, which serve then
// serves (a socket belongs to the namespace it was made in). The variables
// that name the endpoint are therefore the same inside and out. The call's
// proxy endpoint is one; another endpoint of the call's own is one more
// call of serve, before the launcher starts.
func (l *Launch) serve(pol *Access, port uint16, serve func(net.Listener) error) {
	l.served = append(l.served, served{port: port, serve: serve})
	if pol.TCP != nil {
		pol.TCP.Connect = append(pol.TCP.Connect, port)
	}
}

// LaunchError is the launcher's word that it could not confine the
// program, which therefore never ran.
type LaunchError struct{ Msg string }

func (e *LaunchError) Error() string { return e.Msg }

// Launched reports whether the call runs under the launcher: then its
// program is not cmd's process but the launcher's child, whose exit Done
// and ExitCode tell.
func (l *Launch) Launched() bool { return l != nil && l.ctl != nil }

// Done closes when the program has exited or its launcher has ended
// (nil without a launcher, or before Wait has returned nil).
func (l *Launch) Done() <-chan struct{} { return l.done }

// ExitCode is the program's exit code as exec tells it (-1 when a signal
// ended it), once Done has closed and the launcher has said it; ok is
// false otherwise.
func (l *Launch) ExitCode() (code int, ok bool) {
	if l == nil || l.done == nil {
		return 0, false
	}
	select {
	case <-l.done:
	default:
		return 0, false
	}
	switch {
	case !l.exited:
		return 0, false
	case l.status.Exited():
		return l.status.ExitStatus(), true
	default:
		return -1, true
	}
}

// Subreaper reports whether the call's processes are held by subreapers
// (its launcher, and the process that started it) rather than by a PID
// namespace: that process must then end, when the launcher has ended,
// the orphans it adopted.
func (l *Launch) Subreaper() bool { return l.Launched() && l.flags&launch.Subreaper != 0 }

// Endpoint is the call's proxy endpoint; nil without a proxy.
func (l *Launch) Endpoint() *Endpoint { return l.endpoint }

func (l *Launch) closeChild() {
	for _, f := range l.child {
		f.Close()
	}
	l.child = nil
}

// Close releases what the call held: its endpoint (and tunnels), the
// control socket, what peal served for it.
func (l *Launch) Close() {
	if l == nil {
		return
	}
	l.once.Do(func() {
		l.closeChild()
		l.dropRuleset()
		l.closeServed()
		if l.endpoint != nil {
			l.endpoint.Close()
		}
	})
}

var errNoRules = errors.New("confine: the Landlock library made no rules although the kernel enforces files")
