package phase

import (
	"context"
	"fmt"
	"log/slog"
	"peal/internal/text"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Class is how a finished attempt ended, as far as retrying goes.
type Class int

const (
	// Succeeded: the attempt did what was asked.
	Succeeded Class = iota
	// Ordinary: a timeout, a non-zero exit or a bad answer; retried by the
	// call's own budget (Retry.Attempts).
	Ordinary
	// Fatal: no retry can heal it (not logged in, invalid key, a refusal).
	Fatal
	// Network: the model's API could not be reached.
	Network
	// RateLimited: the API refused for now (HTTP 429, a usage limit, overloaded).
	RateLimited
	// Transient: a known hiccup of the CLI itself (e.g. two processes racing
	// on one configuration file); retried at once.
	Transient
)

func (c Class) String() string {
	switch c {
	case Succeeded:
		return "success"
	case Ordinary:
		return "ordinary"
	case Fatal:
		return "fatal"
	case Network:
		return "network"
	case RateLimited:
		return "rate limit"
	case Transient:
		return "transient"
	}
	return fmt.Sprintf("class %d", int(c))
}

// Verdict is the classification of one finished attempt.
type Verdict struct {
	Class Class
	// Err describes the failure (nil on success): what the final error
	// message quotes.
	Err error
	// Wait is, for RateLimited, how long until the limit resets as the
	// agent said; 0 when it did not say.
	Wait time.Duration
	// Waited is, for RateLimited, how long the attempt itself spent on the
	// limit: the CLI's own retries of refused requests, which it showed as
	// it went. It counts against the budget's MaxWait like a wait between
	// attempts.
	Waited time.Duration
	// AgentOnly marks a Fatal failure of the agent of this attempt alone
	// (the model it was asked for does not exist, its account is out of
	// quota, the prompt does not fit its model's window): while the other
	// agent of the call is left, the call goes on with that agent, at once
	// and without spending a retry, and never uses this one again.
	AgentOnly bool
	// Again marks a failure that the caller's next attempt avoids by
	// changing its request (it starts the agent's conversation afresh):
	// that attempt follows at once, with the same agent, without spending
	// a retry. Do grants it once per agent and call; a second is judged by
	// its class.
	Again bool
}

// Classifier decides what a finished attempt means. Deciding whether an
// attempt failed, and how, is kept apart from deciding how often and when
// to retry it (the Budgets), so a new kind of failure is a new Class and a
// new Budget, not a new branch in Do.
type Classifier func(Result) Verdict

// Budget is how one class of failure is retried within one call.
type Budget struct {
	// Retries is how many failures of this class the call absorbs.
	Retries int
	// Backoff yields the delay before each retry; nil means none.
	Backoff backoff.BackOff
	// MaxWait, when set, caps the total time the call spends waiting on
	// this class. A wait the agent announced (Verdict.Wait: the server's
	// retry time) is the first retry's delay instead of the backoff; a
	// later retry waits the longer of the two, since the CLI has by then
	// waited the server's time by itself and been refused again.
	MaxWait time.Duration
	// GiveUp, when set, is the latest a retry of this class may start,
	// counted from the start of the call's first attempt (its attempts and
	// waits so far, and this retry's wait): a CLI whose every attempt takes
	// long by itself cannot stretch the budget's retries out.
	GiveUp time.Duration
}

// NetworkBudget is the budget of network failures: retries after a wait of
// first, doubling up to most, ±20%, none starting later than giveUp after
// the call began (0: no such limit).
func NetworkBudget(retries int, first, most, giveUp time.Duration) Budget {
	return Budget{Retries: retries, Backoff: Exponential(first, most, 0.2), GiveUp: giveUp}
}

// Retry is everything that differs between kinds of calls as far as
// retrying goes: how a result is classified, the budget and delays of each
// class of failure, and which agent the next attempt uses. The loop that
// applies it exists once, in Do.
type Retry struct {
	// Attempts is the budget of ordinary failures: 1 + the retry count.
	Attempts int
	// Classify judges each attempt. nil means: Failure (CheckExit when nil)
	// decides, and every failure is Ordinary.
	Classify Classifier
	// Failure tells why a finished attempt failed, or nil when it
	// succeeded; used only when Classify is nil.
	Failure func(Result) error
	// Backoff yields the delay before each ordinary retry; nil means none.
	Backoff backoff.BackOff
	// Budgets of the other classes. A class without a budget is treated as
	// Ordinary; Fatal is never retried.
	Budgets map[Class]Budget
	// Fallback makes even attempts use the fallback agent.
	Fallback bool
	// Skip, when set, names the agents (RolePrimary, RoleFallback) that are
	// known, before the call, to be unable to serve it: with a fallback,
	// every attempt uses the other one.
	Skip func(role Role) bool
	// Sleep waits between attempts; nil waits on a timer (tests pass a
	// recorder).
	Sleep func(ctx context.Context, d time.Duration) error
}

// Attempt is what the loop hands to the caller's build function.
type Attempt struct {
	N, Of int  // 1-based attempt number and the most attempts the call can make
	Role  Role // RolePrimary or RoleFallback
	// Allowed is the call's own attempts (Retry.Attempts) and Network the
	// retries its network budget adds on top; 0 for calls outside Do.
	Allowed, Network int
	// Counted is the attempt's number among those the retry counts allow
	// (Allowed, and Network on top): an attempt after a wait on a rate
	// limit, after a hiccup of the CLI or after an agent that could not
	// serve the call is not one of them, and takes the number of the one
	// before it. 0 for calls outside Do, which count every attempt.
	Counted int
	// RateLimitCap is the most the call may wait on rate limits in all
	// (the RateLimited budget's MaxWait; 0: no cap), and RateLimitWaited
	// what it has waited so far: a watcher of the attempt can end the
	// CLI's own retries of a limit once they outlast the rest.
	RateLimitCap, RateLimitWaited time.Duration
}

// String is the attempt as a person reads it: "attempt 2 of 2" or, when
// network failures have a budget of their own, "attempt 2 of 2, +2 on
// network failures", and an attempt past the call's own count is one of
// those: "attempt 3: network retry 1 of 2"; attempts that did not count
// (after a wait on a rate limit, for instance) are added: "attempt 1 of 2
// (+3 not counted)".
func (a Attempt) String() string {
	allowed := a.Allowed
	if allowed == 0 {
		allowed = max(a.Of, 1)
	}
	n := max(a.N, 1)
	if a.Counted > 0 {
		n = a.Counted
	}
	var s string
	switch {
	case n > allowed && a.Network > 0:
		s = fmt.Sprintf("attempt %d: network retry %d of %d", n, n-allowed, a.Network)
	case n > allowed:
		s = fmt.Sprintf("attempt %d", n) // never "attempt 3 of 2"
	default:
		s = fmt.Sprintf("attempt %d of %d", n, allowed)
		if a.Network > 0 {
			s += fmt.Sprintf(", +%d on network failures", a.Network)
		}
	}
	if a.Counted > 0 && a.N > a.Counted {
		s += fmt.Sprintf(" (+%d not counted)", a.N-a.Counted)
	}
	return s
}

// CheckExit is the default failure rule: timeout or non-zero exit. The error
// quotes the line of the output that explains the failure.
func CheckExit(r Result) error {
	if r.TimedOut {
		return &TimeoutError{Phase: r.Phase, Limit: r.Limit, Idle: r.Idle, Line: Explain(r)}
	}
	if r.ExitCode != 0 {
		return &ExitError{Phase: r.Phase, Code: r.ExitCode, Line: Explain(r)}
	}
	return nil
}

// budgetState is what is left of one class's budget during a call.
type budgetState struct {
	Budget
	left   int
	waited time.Duration
}

// Do runs build(attempt) under the policy until an attempt succeeds or a
// failure ends the call. It returns the last result and the number of
// attempts made. Each failed attempt is classified: Fatal ends the call at
// once (*FatalError); any other class draws on its own budget and waits its
// own delay. A spent budget ends the call: *UnreachableError when every
// failure was a network failure, *RateLimitError for a rate limit that
// outlasts its budget, *FailedError otherwise. A start failure or an
// interruption ends the loop at once.
func Do(ctx context.Context, log *slog.Logger, p Retry, build func(Attempt) Spec) (Result, int, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := newLoop(p)
	for n := 1; ; n++ {
		a := l.attempt(n)
		spec := build(a)
		res, err := Run(ctx, spec)
		if err != nil {
			return res, n, err
		}
		delay, retry, err := l.judge(log, a, spec, res)
		if !retry {
			return res, n, err
		}
		if delay < 0 {
			continue // at once, without spending a retry
		}
		if err := l.sleep(ctx, delay); err != nil {
			return res, n, interrupted(spec.Phase, ctx)
		}
		l.spent += delay
	}
}

// loop is the state of one call's retry loop: the budgets left, which
// agent's turn it is, what was spent.
type loop struct {
	p        Retry
	classify Classifier
	sleep    func(context.Context, time.Duration) error
	budgets  map[Class]*budgetState
	// allNetwork: every failure so far was the network's (or a hiccup).
	allNetwork bool
	spent      time.Duration // the call's attempts and waits so far
	counted    int           // the number of the next attempt among the counted ones
	skipped    map[Role]bool
	again      map[Role]bool // the agents granted an attempt again
	turn       int
	same       Role // the agent of an attempt granted again
}

func newLoop(p Retry) *loop {
	l := &loop{p: p, classify: p.Classify, sleep: p.Sleep, allNetwork: true, counted: 1, skipped: map[Role]bool{}, again: map[Role]bool{}}
	if l.classify == nil {
		l.classify = byFailure(p.Failure)
	}
	if l.sleep == nil {
		l.sleep = wait
	}
	l.budgets = map[Class]*budgetState{Ordinary: {Budget: Budget{Retries: max(p.Attempts, 1) - 1, Backoff: p.Backoff}}}
	for class, b := range p.Budgets {
		if class != Ordinary && class != Fatal && class != Succeeded {
			l.budgets[class] = &budgetState{Budget: b}
		}
	}
	for _, b := range l.budgets {
		b.left = b.Retries
		if b.Backoff == nil {
			b.Backoff = &backoff.ZeroBackOff{}
		}
		b.Backoff.Reset()
	}
	if p.Fallback && p.Skip != nil {
		for _, role := range []Role{RolePrimary, RoleFallback} {
			l.skipped[role] = p.Skip(role)
		}
	}
	return l
}

// attempt is attempt n: its agent (the fallback's turn on even turns, the
// same agent for an attempt granted again) and how it counts.
func (l *loop) attempt(n int) Attempt {
	role := l.same
	if l.same == "" {
		l.turn++
		role = RolePrimary
		if l.p.Fallback && l.turn%2 == 0 {
			role = RoleFallback
		}
		if l.skipped[role] && !l.skipped[otherRole(role)] {
			role = otherRole(role)
		}
	}
	l.same = ""
	// The most attempts the call can still make: the counted budgets
	// (ordinary and network) that are left.
	of := n + l.budgets[Ordinary].left
	network := 0
	if nb := l.budgets[Network]; nb != nil {
		of += nb.left
		network = nb.Retries
	}
	a := Attempt{N: n, Of: of, Role: role, Allowed: max(l.p.Attempts, 1), Network: network, Counted: l.counted}
	if rb := l.budgets[RateLimited]; rb != nil {
		a.RateLimitCap, a.RateLimitWaited = rb.MaxWait, rb.waited
	}
	return a
}

// judge is what attempt a (of spec) that ended with res leads to: another
// attempt after delay (a negative delay: at once, without spending a
// retry), or the end of the call with err (nil: it succeeded).
func (l *loop) judge(log *slog.Logger, a Attempt, spec Spec, res Result) (delay time.Duration, retry bool, err error) {
	role := a.Role
	v := l.classify(res)
	if v.Class == Succeeded {
		judged(spec, res, v, 0, false)
		return 0, false, nil
	}
	if v.Err == nil {
		v.Err = fmt.Errorf("%s call failed", spec.Phase)
	}
	switch {
	case v.Again && !l.again[role]:
		l.again[role], l.same = true, role
		l.spent += res.Duration
		judged(spec, res, v, 0, true)
		log.Warn("the next attempt changes the request and follows at once, without spending a retry", "phase", spec.Phase,
			"attempt", spec.Attempt.String(), "role", role, "reason", v.Err)
		return -1, true, nil
	case v.Class == Fatal && v.AgentOnly && l.p.Fallback && !l.skipped[otherRole(role)]:
		l.skipped[role] = true
		judged(spec, res, v, 0, true)
		log.Warn("the agent cannot serve this call: going on with the other agent, without spending a retry", "phase", spec.Phase,
			"attempt", spec.Attempt.String(), "role", role, "reason", v.Err)
		return -1, true, nil
	case v.Class == Fatal:
		judged(spec, res, v, 0, false)
		return 0, false, &FatalError{Phase: spec.Phase, Last: v.Err}
	}
	return l.spend(log, a.N, spec, res, v)
}

// spend charges a failure to its class's budget: the delay before the next
// attempt, or, when the budget is spent, the call's error.
func (l *loop) spend(log *slog.Logger, n int, spec Spec, res Result, v Verdict) (time.Duration, bool, error) {
	b := l.budgets[v.Class]
	if b == nil {
		v.Class, b = Ordinary, l.budgets[Ordinary]
	}
	if v.Class != Network && v.Class != Transient {
		l.allNetwork = false
	}
	l.spent += res.Duration
	if v.Class == RateLimited {
		b.waited += v.Waited
	}
	delay, ok := b.next(v, l.spent)
	judged(spec, res, v, delay, ok)
	if !ok {
		switch {
		case v.Class == Network && l.allNetwork:
			return 0, false, &UnreachableError{Phase: spec.Phase, Attempts: n, Last: v.Err}
		case v.Class == RateLimited:
			return 0, false, &RateLimitError{Phase: spec.Phase, Attempts: n, Waited: b.waited, Limit: b.MaxWait, Last: v.Err}
		}
		return 0, false, &FailedError{Phase: spec.Phase, Attempts: n, Last: v.Err}
	}
	msg := "call failed, retrying"
	switch v.Class {
	case RateLimited:
		// A wait, not a retry: the next attempt keeps this one's number.
		msg = fmt.Sprintf("waiting %s before the next attempt (rate limited, not counted)", text.Seconds(delay.Round(time.Second)))
	case Transient:
		msg = "call failed, retrying at once (a hiccup of the CLI, not counted)"
	default:
		l.counted++
	}
	log.Warn(msg, "phase", spec.Phase, "attempt", spec.Attempt.String(), "class", v.Class.String(), "reason", v.Err,
		"delay", delay, "retries_left", fmt.Sprintf("%d on %s failures", b.left, v.Class))
	return delay, true, nil
}

// otherRole is the agent that is not role.
func otherRole(role Role) Role {
	if role == RoleFallback {
		return RolePrimary
	}
	return RoleFallback
}

// next spends one retry of the budget and returns the delay before it;
// false when the budget is spent, or the retry would start past GiveUp
// (spent is how long the call has taken so far).
func (b *budgetState) next(v Verdict, spent time.Duration) (time.Duration, bool) {
	if b.left <= 0 {
		return 0, false
	}
	first := b.left == b.Retries
	delay := b.Backoff.NextBackOff()
	if delay == backoff.Stop {
		return 0, false
	}
	switch {
	case v.Wait > 0 && first:
		delay = v.Wait
	case v.Wait > 0:
		delay = max(delay, v.Wait)
	}
	if b.MaxWait > 0 {
		rest := b.MaxWait - b.waited
		if rest <= 0 || (v.Wait > 0 && v.Wait > rest) {
			// Waiting for a reset beyond the cap is pointless: give up now.
			return 0, false
		}
		delay = min(delay, rest)
	}
	if b.GiveUp > 0 && spent+delay > b.GiveUp {
		return 0, false
	}
	b.left--
	b.waited += delay
	return delay, true
}

// byFailure is the classifier of calls that only tell success from failure.
func byFailure(failure func(Result) error) Classifier {
	if failure == nil {
		failure = CheckExit
	}
	return func(r Result) Verdict {
		if err := failure(r); err != nil {
			return Verdict{Class: Ordinary, Err: err}
		}
		return Verdict{Class: Succeeded}
	}
}

// Exponential is a delay that starts at first and doubles up to most, with
// ±jitter, and never gives up by itself (a Retry's budgets decide).
func Exponential(first, most time.Duration, jitter float64) backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = first
	b.MaxInterval = max(most, first)
	b.Multiplier = 2
	b.RandomizationFactor = jitter
	b.MaxElapsedTime = 0
	return b
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
