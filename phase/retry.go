package phase

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Policy is everything that differs between kinds of calls as far as
// retrying goes: how a failure is classified, which budget it draws on, how
// long to wait, and which agent the next attempt uses. The loop that applies
// it exists once, in Do.
type Policy struct {
	// Attempts is the budget of ordinary failures: 1 + the retry count.
	Attempts int
	// Failure tells why a finished attempt failed, or nil when it succeeded.
	// nil means CheckExit: a timeout or a non-zero exit is a failure.
	Failure func(Result) error
	// Backoff yields the delay before each ordinary retry; nil means none.
	Backoff backoff.BackOff
	// Fatal lists case-insensitive substrings of a failed call's output that
	// no retry can heal (an agent that is not logged in): no retry at all.
	Fatal []string
	// Network, when set, gives failures that look like network trouble their
	// own budget and delays.
	Network *NetworkPolicy
	// Fallback makes even attempts use the fallback agent.
	Fallback bool
}

// NetworkPolicy is the budget of network failures.
type NetworkPolicy struct {
	Patterns []string        // case-insensitive substrings of stderr or the stdout tail
	Retries  int             // network failures retried, apart from Attempts
	Backoff  backoff.BackOff // delays before network retries
}

// Agent roles, in the environment of every agent call as PEAL_AGENT_ROLE.
const (
	RolePrimary  = "primary"
	RoleFallback = "fallback"
)

// Attempt is what the loop hands to the caller's build function.
type Attempt struct {
	N, Of int    // 1-based attempt number and the most attempts the call can make
	Role  string // RolePrimary or RoleFallback
}

// tailBytes is how much of stdout is searched for error patterns: agents echo
// file contents, so only the end of their output speaks for the failure.
const tailBytes = 4 << 10

// matchOutput reports the first pattern found (case-insensitively) in the
// call's stderr or the last 4 KiB of its stdout.
func matchOutput(res Result, patterns []string) (string, bool) {
	if len(patterns) == 0 {
		return "", false
	}
	out := res.Stdout
	if len(out) > tailBytes {
		out = out[len(out)-tailBytes:]
	}
	text := strings.ToLower(res.Stderr + "\n" + out)
	for _, p := range patterns {
		if p != "" && strings.Contains(text, strings.ToLower(p)) {
			return p, true
		}
	}
	return "", false
}

// NetworkError marks the failure of an attempt as network trouble whatever
// its output says. A Policy's Failure returns it for results whose exit
// status alone means that a service could not be reached (stet exits 2 when
// its review model is unreachable); Do then draws on the network budget.
type NetworkError struct{ Err error }

func (e *NetworkError) Error() string { return e.Err.Error() }
func (e *NetworkError) Unwrap() error { return e.Err }

// networkFailure reports whether a failed attempt is network trouble: its
// failure says so, or its output matches a network pattern.
func networkFailure(res Result, fail error, patterns []string) (string, bool) {
	var ne *NetworkError
	if errors.As(fail, &ne) {
		return "exit status", true
	}
	return matchOutput(res, patterns)
}

// CheckExit is the default failure rule: timeout or non-zero exit.
func CheckExit(r Result) error {
	if r.TimedOut {
		return &TimeoutError{Phase: r.Phase, Limit: r.Limit, Idle: r.Idle}
	}
	if r.ExitCode != 0 {
		return &ExitError{Phase: r.Phase, Code: r.ExitCode, Stderr: Tail(r.Stderr)}
	}
	return nil
}

// Do runs build(attempt) under the policy until an attempt succeeds or a
// failure ends the call. It returns the last result and the number of
// attempts made. Each failed attempt is classified: a fatal pattern ends the
// call at once (*FatalError); a network pattern draws on the network budget
// and, once every attempt failed that way and the budget is spent, ends it
// with *UnreachableError; anything else draws on Attempts (*FailedError when
// spent). A start failure or an interruption ends the loop at once.
func Do(ctx context.Context, log *slog.Logger, p Policy, build func(Attempt) Spec) (Result, int, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	failure := p.Failure
	if failure == nil {
		failure = CheckExit
	}
	ordinary := p.Backoff
	if ordinary == nil {
		ordinary = &backoff.ZeroBackOff{}
	}
	ordinary.Reset()
	var network backoff.BackOff = &backoff.ZeroBackOff{}
	var networkPatterns []string
	networkLeft := 0
	if p.Network != nil {
		networkPatterns, networkLeft = p.Network.Patterns, p.Network.Retries
		if p.Network.Backoff != nil {
			network = p.Network.Backoff
		}
	}
	network.Reset()
	ordinaryLeft := max(p.Attempts, 1) - 1
	most := 1 + ordinaryLeft + networkLeft
	allNetwork := true
	for n := 1; ; n++ {
		role := RolePrimary
		if p.Fallback && n%2 == 0 {
			role = RoleFallback
		}
		spec := build(Attempt{N: n, Of: most, Role: role})
		res, err := Run(ctx, spec)
		if err != nil {
			return res, n, err
		}
		fail := failure(res)
		if fail == nil {
			return res, n, nil
		}
		var delays backoff.BackOff
		if pattern, fatal := matchOutput(res, p.Fatal); fatal {
			return res, n, &FatalError{Phase: spec.Phase, Pattern: pattern, Last: fail}
		} else if pattern, isNetwork := networkFailure(res, fail, networkPatterns); isNetwork {
			if networkLeft == 0 {
				if allNetwork {
					return res, n, &UnreachableError{Phase: spec.Phase, Attempts: n, Last: fail}
				}
				return res, n, &FailedError{Phase: spec.Phase, Attempts: n, Last: fail}
			}
			networkLeft--
			delays = network
			log.Warn("network failure, retrying", "phase", spec.Phase, "attempt", n, "pattern", pattern, "network_retries_left", networkLeft)
		} else {
			allNetwork = false
			if ordinaryLeft == 0 {
				return res, n, &FailedError{Phase: spec.Phase, Attempts: n, Last: fail}
			}
			ordinaryLeft--
			delays = ordinary
		}
		delay := delays.NextBackOff()
		if delay == backoff.Stop {
			return res, n, &FailedError{Phase: spec.Phase, Attempts: n, Last: fail}
		}
		log.Warn("call failed, retrying", "phase", spec.Phase, "attempt", n, "err", fail, "delay", delay)
		if err := wait(ctx, delay); err != nil {
			return res, n, interrupted(spec.Phase, ctx)
		}
	}
}

// wait sleeps for d unless ctx ends first.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
