package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	"peal/internal/text"
	"peal/phase"
)

// Auth is how to tell whether a CLI can authenticate without asking a
// person.
type Auth struct {
	// Env are variables that carry credentials: any one set is enough.
	Env []string
	// Status are the arguments of the CLI's own "am I logged in" command;
	// nil when it has none.
	Status []string
	// LoggedIn reads that command's output and exit code: known is false
	// when the output does not say; line is the line of the output that
	// says it, the one a message quotes ("" for none).
	LoggedIn func(out string, exit int) (loggedIn, known bool, line string)
	// BeforeRun makes peal check before the first call and stop at once
	// when the CLI cannot authenticate (it would otherwise wait or retry).
	BeforeRun bool
	// LoginHint says how to authenticate in CI.
	LoginHint string
}

// AuthStatus is the outcome of an authentication check.
type AuthStatus struct {
	OK    bool // the CLI can authenticate
	Known bool // the check could tell
	// Unclear: the status command ran and answered, but said neither yes
	// nor no. That is no CLI of this kind as peal knows it (a wrapper, a
	// stand-in such as a script), so a run goes on and lets its first call
	// tell; the kind's refusal and login-prompt messages still end that
	// call at once.
	Unclear bool
	// Err: the status command could not run (it did not start, or was
	// interrupted); Detail says so. It says nothing of the credentials, so
	// no login hint goes with it.
	Err    error
	Detail string // how it knows, for one line of output
}

// StatusTimeout bounds the CLI's status command.
const StatusTimeout = 30 * time.Second

// CheckAuth tells whether the CLI at path can authenticate: one of the
// kind's credential variables is set in env (the environment its calls
// get), or its status command reports a session. prepare, when set,
// readies the status command's Spec before it starts: a run confines it as
// one of the kind's calls, since it runs the CLI, whose own folders (its
// settings, its hooks, its installed versions) a confined call may write.
func (k *Kind) CheckAuth(ctx context.Context, path, dir string, env []string, prepare func(*phase.Spec)) AuthStatus {
	a := k.Auth
	for _, name := range a.Env {
		if v := lookup(env, name); v != "" {
			return AuthStatus{OK: true, Known: true, Detail: name + " is set"}
		}
	}
	if a.Status == nil {
		if len(a.Env) == 0 {
			return AuthStatus{Detail: "the " + k.Name + " CLI has no way to tell; its first call will"}
		}
		return AuthStatus{Detail: fmt.Sprintf("none of %s is set, and the %s CLI cannot say whether it has a session", strings.Join(a.Env, ", "), k.Name)}
	}
	argv := append([]string{path}, a.Status...)
	spec := phase.Spec{Phase: phase.Auth, Argv: argv, Dir: dir, Env: env, Timeout: StatusTimeout, KillGrace: time.Second}
	if prepare != nil {
		prepare(&spec)
	}
	res, err := phase.Run(ctx, spec)
	shown := strings.Join(append([]string{k.DefaultCmd}, a.Status...), " ")
	switch {
	case err != nil:
		return AuthStatus{Err: err, Detail: fmt.Sprintf("`%s` could not run: %v", shown, err)}
	case res.TimedOut:
		return AuthStatus{Detail: fmt.Sprintf("`%s` did not answer within %s", shown, StatusTimeout)}
	}
	out := text.Clean(res.Stdout + "\n" + res.Stderr)
	in, known, line := a.LoggedIn(out, res.ExitCode)
	if line = text.Quote(line); line == "" {
		line = text.LastMeaningful(out)
	}
	switch {
	case known && in:
		return AuthStatus{OK: true, Known: true, Detail: fmt.Sprintf("`%s` reports a session: %s", shown, line)}
	case known:
		return AuthStatus{Known: true, Detail: fmt.Sprintf("no credential variable set (%s) and `%s` says: %s", strings.Join(a.Env, ", "), shown, line)}
	}
	return AuthStatus{Unclear: true, Detail: fmt.Sprintf("`%s` exited %d without saying whether there is a session: %s", shown, res.ExitCode, line)}
}

// AuthError: the CLI cannot authenticate, so no call is made.
type AuthError struct {
	Kind   string
	Detail string
	Hint   string
}

// EndsRun: no later call can authenticate either.
func (e *AuthError) EndsRun() bool { return true }

func (e *AuthError) Error() string {
	return fmt.Sprintf("the %s CLI cannot authenticate: %s; %s", e.Kind, e.Detail, e.Hint)
}

// lookup is the value of name in env, the last setting winning as in exec.
func lookup(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}

// saysLoggedIn is the usual reading of a status command: "not logged in"
// says no, "logged in" says yes; the line quoted is the one that says it.
func saysLoggedIn(out string, _ int) (bool, bool, string) {
	for _, says := range []struct {
		in      bool
		phrases []string
	}{
		{false, []string{"not logged in", "not authenticated", "logged out"}},
		{true, []string{"logged in", "authenticated as"}},
	} {
		for _, l := range strings.Split(out, "\n") {
			low := strings.ToLower(l)
			for _, p := range says.phrases {
				if strings.Contains(low, p) {
					return says.in, true, l
				}
			}
		}
	}
	return false, false, ""
}
