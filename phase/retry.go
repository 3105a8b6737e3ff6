package phase

import (
	"context"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Policy is everything that differs between kinds of calls as far as retrying
// goes. The loop that applies it exists once, in Do.
type Policy struct {
	// Attempts is the total number of attempts (at least 1).
	Attempts int
	// Failure tells why a finished attempt failed, or nil when it succeeded.
	// nil means CheckExit: a timeout or a non-zero exit is a failure.
	Failure func(Result) error
	// Backoff yields the delay before each further attempt; nil means none.
	Backoff backoff.BackOff
}

// Attempt is what the loop hands to the caller's build function.
type Attempt struct {
	N, Of int // 1-based attempt number and total attempts
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

// Do runs build(attempt) under the policy until an attempt succeeds or the
// attempts are used up. It returns the last result and the number of attempts
// made. A start failure or an interruption ends the loop at once; running out
// of attempts returns a *FailedError wrapping the last failure.
func Do(ctx context.Context, log *slog.Logger, p Policy, build func(Attempt) Spec) (Result, int, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	failure := p.Failure
	if failure == nil {
		failure = CheckExit
	}
	delays := p.Backoff
	if delays == nil {
		delays = &backoff.ZeroBackOff{}
	}
	delays.Reset()
	attempts := max(p.Attempts, 1)
	for n := 1; ; n++ {
		spec := build(Attempt{N: n, Of: attempts})
		res, err := Run(ctx, spec)
		if err != nil {
			return res, n, err
		}
		fail := failure(res)
		if fail == nil {
			return res, n, nil
		}
		if n >= attempts {
			return res, n, &FailedError{Phase: spec.Phase, Attempts: n, Last: fail}
		}
		delay := delays.NextBackOff()
		if delay == backoff.Stop {
			return res, n, &FailedError{Phase: spec.Phase, Attempts: n, Last: fail}
		}
		log.Warn("call failed, retrying", "phase", spec.Phase, "attempt", n, "of", attempts, "err", fail, "delay", delay)
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
