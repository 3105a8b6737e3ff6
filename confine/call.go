package confine

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
)

// Call is the confinement of one child process, filled by the caller for
// each call and handed to phase (phase.Spec.Confine), which calls Environ
// and Prepare when it starts the child.
type Call struct {
	Mode Mode
	// Policy is what the kernel enforces. The call's temporary folder is
	// added by Prepare; with a Proxy and Policy.TCP set, so is the
	// endpoint's port.
	Policy Policy
	// EnvPass are the variables of peal's environment that pass besides
	// BasicEnv: names or PREFIX_* patterns (the kind's own variables,
	// confine_env_pass).
	EnvPass []string
	// Proxy, when set, is the run's proxy: the call gets an endpoint of its
	// own that reaches only Allow, and its environment points at it.
	Proxy *Proxy
	Allow Allow
}

// Environ is what the call keeps of the environment it inherits from peal;
// what peal adds on purpose for the call comes after it and is kept.
func (c *Call) Environ(env []string) []string {
	if c.Mode == Off {
		return env
	}
	return FilterEnv(env, c.EnvPass)
}

// LaunchEnv names the variable that makes peal's binary the launcher of a
// confined program. It is set in the launcher's environment only and taken
// out before the program runs.
const LaunchEnv = "PEAL_CONFINED_LAUNCH"

// Prepare makes cmd, not started yet, start confined: with the proxy's
// variables added to cmd.Env and, where the kernel enforces files, as the
// launcher (peal's own binary), which applies the rules to itself and then
// runs cmd's program with cmd's arguments. id names the call in the proxy's
// refusals; tempDir (when not "") is the call's temporary folder, which it
// may write. It returns nil when there is nothing to do (Off, or cmd could
// not be resolved: its Start then fails as it would have). Under On it
// fails when the file-system rules cannot be enforced; under Auto it
// enforces what the kernel has.
func (c *Call) Prepare(cmd *exec.Cmd, id, tempDir string) (*Launch, error) {
	if c.Mode == Off || cmd.Err != nil {
		return nil, nil
	}
	if cmd.Env == nil {
		cmd.Env = c.Environ(os.Environ())
	}
	pol := c.Policy.Clone()
	if tempDir != "" {
		pol.Write = append(pol.Write, Path{Path: tempDir, Key: KeyTemp})
	}
	l := &Launch{}
	if c.Proxy != nil {
		ep, err := c.Proxy.Open(id, c.Allow)
		if err != nil {
			return nil, err
		}
		l.endpoint = ep
		cmd.Env = append(cmd.Env, ep.Env()...)
		if pol.TCP != nil {
			pol.TCP.Connect = append(pol.TCP.Connect, ep.Port())
		}
	}
	if err := pol.Validate(); err != nil {
		l.Close()
		return nil, err
	}
	sup := Probe()
	if !sup.Files {
		if c.Mode == On {
			l.Close()
			return nil, fmt.Errorf("confine = on, but files cannot be confined: %s", sup.Why)
		}
		return l, nil
	}
	if err := l.launcher(cmd, pol, sup); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// Launch is a confined call under way: its proxy endpoint and the
// launcher's status pipe.
type Launch struct {
	endpoint *Endpoint
	// status is peal's end of the launcher's status pipe; child are the
	// launcher's ends (its rules, its end of the pipe), closed once it
	// started.
	status *os.File
	child  []*os.File
	once   sync.Once
}

// LaunchError is the launcher's word that it could not confine the
// program, which therefore never ran.
type LaunchError struct{ Msg string }

func (e *LaunchError) Error() string { return e.Msg }

// Wait waits, once the launcher has started, until it has run the program
// confined (nil) or has exited without running it (a *LaunchError). The
// launcher answers within a few milliseconds: it applies the rules and
// runs the program. A launch without a launcher has nothing to wait for.
func (l *Launch) Wait() error {
	if l.status == nil {
		return nil
	}
	l.closeChild()
	// The pipe closes when the program starts (close-on-exec); before
	// that, the launcher writes why it failed.
	var buf [1024]byte
	n := 0
	for n < len(buf) {
		m, err := l.status.Read(buf[n:])
		n += m
		if err != nil {
			break
		}
	}
	if n == 0 {
		return nil
	}
	return &LaunchError{Msg: string(buf[:n])}
}

// Endpoint is the call's proxy endpoint; nil without a proxy.
func (l *Launch) Endpoint() *Endpoint { return l.endpoint }

func (l *Launch) closeChild() {
	for _, f := range l.child {
		f.Close()
	}
	l.child = nil
}

// Close releases what the call held: its endpoint (and tunnels), the pipe.
func (l *Launch) Close() {
	l.once.Do(func() {
		l.closeChild()
		if l.status != nil {
			l.status.Close()
		}
		if l.endpoint != nil {
			l.endpoint.Close()
		}
	})
}

var errNoRules = errors.New("confine: the Landlock library made no rules although the kernel enforces files")
