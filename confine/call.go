package confine

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
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
	// Env are variables the policy sets for the call, over what it
	// inherits (the git configuration peal writes for it).
	Env []string
	// Proxy, when set, is the run's proxy: the call gets an endpoint of its
	// own that reaches only Allow, and its environment points at it.
	Proxy *Proxy
	Allow Allow
	// Reached, when set, hears of each connection the proxy makes for the
	// call to a host of Allow (err nil), or fails to make: what the call's
	// watcher needs to tell a call that cannot reach its API from one that
	// is slow.
	Reached func(hostport string, err error)
	// Keys, when set (with a Proxy), are the model keys the call's model
	// endpoint holds: the call gets a placeholder in each key variable
	// (whatever it inherited there is dropped) and the endpoint's base
	// URLs, and never the keys. Reached then hears of the endpoint's
	// forwards to the model API, not of the proxy's tunnels: those go to
	// the CLI's other hosts, whose failures say nothing of its API.
	Keys *KeyHold
	// Withhold are variables the call never gets, whatever EnvPass says
	// and whoever adds them: model keys peal neither holds nor passes.
	Withhold []string
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
		return append(env, c.Env...)
	}
	return append(withoutVars(FilterEnv(env, c.EnvPass), c.Withhold), c.Env...)
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
	cmd.Env = withoutVars(cmd.Env, c.Withhold)
	l := &Launch{launcherFD: -1}
	if c.Proxy != nil {
		tunnels := c.Reached
		if c.Keys != nil {
			tunnels = nil // its model endpoint tells of its API
		}
		ep, err := c.Proxy.OpenReached(id, c.Allow, tunnels)
		if err != nil {
			return nil, err
		}
		l.endpoint = ep
		l.doors = append(l.doors, ep)
		cmd.Env = append(cmd.Env, ep.Env()...)
	}
	if c.Keys != nil {
		if c.Proxy == nil {
			l.Close()
			return nil, errors.New("confine: a call's model endpoint needs the run's proxy")
		}
		ke, err := c.Proxy.OpenKeysReached(id, c.Keys, c.Reached)
		if err != nil {
			l.Close()
			return nil, err
		}
		l.doors = append(l.doors, ke)
		if l.endpoint != nil {
			l.endpoint.admit(ke.hostport(), ke)
		}
		env, args := ke.Point()
		cmd.Env = append(withoutVars(cmd.Env, c.Keys.Vars()), env...)
		if len(args) > 0 && len(cmd.Args) > 0 {
			cmd.Args = append(append([]string{cmd.Args[0]}, args...), cmd.Args[1:]...)
		}
	}
	if pol.TCP != nil {
		pol.TCP.Connect = append(pol.TCP.Connect, doorPorts(l.doors)...)
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

// Launch is a confined call under way: its doors (its proxy endpoint and
// its model endpoint), and its launcher: the control socket, and what peal
// serves for the call.
type Launch struct {
	endpoint *Endpoint
	// doors are the call's listeners on 127.0.0.1, the proxy endpoint's
	// first: in a network namespace, each is served on the same port
	// there too.
	doors []Door
	// ctl is peal's end of the launcher's control socket; child are the
	// launcher's files (its end), closed once it started.
	ctl   *net.UnixConn
	child []*os.File
	// ruleset is the call's Landlock ruleset, being built until Wait
	// sends it to the launcher (nil without Landlock, or once sent).
	ruleset chan builtRuleset
	cmd     *exec.Cmd
	flags   uint32 // the launcher's (package launch)
	rules   *netRules
	sup     *supervisor
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
		for _, d := range l.doors {
			d.Close()
		}
	})
}

// withoutVars is env without the variables named.
func withoutVars(env, names []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if foldEnvNames {
			name = strings.ToUpper(name)
		}
		if !slices.Contains(names, name) {
			out = append(out, kv)
		}
	}
	return out
}

var errNoRules = errors.New("confine: the Landlock library made no rules although the kernel enforces files")
