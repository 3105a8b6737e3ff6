package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"peal/phase"
)

// FindingsRemainingError: findings were left after the last address round
// under on_findings_remaining = "fail".
type FindingsRemainingError struct {
	Task      int
	Rounds    int
	Remaining int
	Head      string // HEAD commit of the repo when the loop ended
	Output    string // the last review's stdout and stderr
}

func (e *FindingsRemainingError) Error() string {
	return fmt.Sprintf("%d finding(s) remain after %d address round(s) at commit %s; last review: %s",
		e.Remaining, e.Rounds, e.Head, snippet(e.Output))
}

// review runs Phase 3 for a task whose execute succeeded: the review, then
// the address loop while findings remain. on_stet_fail decides what a failed
// stet call or address loop does; on_findings_remaining what findings left
// after the last round do.
func (r *run) review(ctx context.Context, t Task) taskResult {
	if r.stet == nil {
		return taskResult{}
	}
	first, err := r.stet.review(ctx, t.Index)
	if err != nil {
		if ctx.Err() == nil && r.cfg.OnStetFail == "skip" {
			r.log.Warn("review failed; the task finishes without Phase 3 (on_stet_fail = skip)", "task", t.Index, "err", err)
			return taskResult{}
		}
		return taskResult{err: err}
	}
	if !first.Present {
		return taskResult{}
	}
	res, err := r.addressLoop(ctx, t, first)
	if err != nil && ctx.Err() == nil && !endsRun(err) && !isFatal(err) {
		switch r.cfg.OnStetFail {
		case "retry_once":
			r.log.Warn("address loop failed, running it once more (on_stet_fail = retry_once)", "task", t.Index, "err", err)
			res, err = r.addressLoop(ctx, t, res.last)
		case "skip":
			r.log.Warn("address loop failed; the task completes with findings left (on_stet_fail = skip)", "task", t.Index, "err", err)
			return taskResult{findingsLeft: true, leftover: &res.last}
		}
	}
	if err != nil {
		return taskResult{err: err}
	}
	if res.resolved {
		r.log.Info("review findings resolved", "task", t.Index, "rounds", res.rounds)
		return taskResult{}
	}
	switch r.cfg.OnFindingsRemaining {
	case "warn":
		r.log.Warn("findings remain after the last address round (on_findings_remaining = warn)", "task", t.Index,
			"rounds", res.rounds, "remaining", res.last.Count())
		return taskResult{findingsLeft: true, leftover: &res.last}
	case "defer":
		r.log.Warn("findings remain: the task is deferred to the next run (on_findings_remaining = defer)", "task", t.Index,
			"rounds", res.rounds, "remaining", res.last.Count())
		return taskResult{deferred: true, leftover: &res.last}
	}
	out := res.last.Output
	if res.last.Stderr != "" {
		out += "\n" + res.last.Stderr
	}
	ferr := &FindingsRemainingError{Task: t.Index, Rounds: res.rounds, Remaining: res.last.Count(), Head: r.head(ctx), Output: out}
	r.log.Error("findings remain after the last address round", "task", t.Index, "rounds", res.rounds,
		"remaining", ferr.Remaining, "head", ferr.Head, "review", out)
	return taskResult{err: ferr, leftover: &res.last}
}

// loopResult is where an address loop ended.
type loopResult struct {
	resolved bool
	rounds   int
	last     Review // the latest review (the one before a failure, on error)
}

// addressLoop is the one address loop of both review modes: each round
// triages (built-in mode), asks the agent to fix what is left, and reviews
// again, until no finding is left or max_address_rounds is used up.
func (r *run) addressLoop(ctx context.Context, t Task, cur Review) (loopResult, error) {
	rounds := int(r.cfg.MaxAddressRounds)
	stalled := 0 // rounds in a row after which the findings did not go down
	for round := 1; round <= rounds; round++ {
		r.log.Info("address round", "task", t.Index, "round", round, "of", rounds, "findings", cur.Count())
		before := cur.Count()
		if r.stet.builtin() {
			next, err := r.triage(ctx, t, cur)
			if err != nil {
				return loopResult{rounds: round, last: cur}, err
			}
			if cur = next; !cur.Present {
				return loopResult{resolved: true, rounds: round, last: cur}, nil
			}
		}
		prompt := phase.AddressPrompt(cur.Output, cur.Suggestions())
		if _, err := r.agentCall(ctx, "address", t.Index, r.phase3Attempts(), nil, prompt); err != nil {
			return loopResult{rounds: round, last: cur}, err
		}
		next, err := r.stet.review(ctx, t.Index)
		if err != nil {
			return loopResult{rounds: round, last: cur}, err
		}
		if cur = next; !cur.Present {
			return loopResult{resolved: true, rounds: round, last: cur}, nil
		}
		if stalled++; cur.Count() < before {
			stalled = 0
		}
		if p := int(r.cfg.PlateauRounds); p > 0 && stalled >= p {
			r.log.Warn("address loop ends early on a plateau: the findings stopped going down", "task", t.Index,
				"round", round, "rounds_without_progress", stalled, "findings", cur.Count())
			return loopResult{rounds: round, last: cur}, nil
		}
	}
	return loopResult{rounds: rounds, last: cur}, nil
}

// phase3Attempts is 1 + min(phase_3_retry_count, 2): the cap holds whatever
// layer set the count.
func (r *run) phase3Attempts() int {
	return 1 + int(min(r.cfg.Phase3RetryCount, 2))
}

// triage decides which findings of a review are not worth addressing,
// dismisses them and reviews again. It never fails the task: a failed triage
// call dismisses nothing. Only a failed review (or an interruption) is an error.
func (r *run) triage(ctx context.Context, t Task, cur Review) (Review, error) {
	if !cur.Structured {
		r.log.Warn("review output is not structured JSON: the structured dismiss step is skipped", "task", t.Index)
		return cur, nil
	}
	var dismissals []dismissal
	if r.cfg.StetDisableLLMTriage {
		dismissals = triageByPatterns(cur.Findings, r.cfg.StetDismissPatterns)
	} else {
		answer, err := r.askTriage(ctx, t, cur)
		if err != nil {
			return cur, err
		}
		dismissals = ParseTriage(answer, cur.Findings)
	}
	if len(dismissals) == 0 {
		return cur, nil
	}
	for _, d := range dismissals {
		r.stet.dismiss(ctx, t.Index, d)
	}
	if ctx.Err() != nil {
		return cur, &phase.InterruptedError{Phase: "stet", Cause: context.Cause(ctx)}
	}
	return r.stet.review(ctx, t.Index)
}

// askTriage asks the agent the triage question. After its attempts, a timeout
// is logged as an error and a non-zero exit counts as an empty answer: either
// way nothing is dismissed. Only an interruption is returned.
func (r *run) askTriage(ctx context.Context, t Task, cur Review) (string, error) {
	res, err := r.agentCall(ctx, "triage", t.Index, r.phase3Attempts(), nil, phase.TriagePrompt(cur.Output))
	switch {
	case err == nil:
		return res.Stdout, nil
	case ctx.Err() != nil, endsRun(err), isFatal(err):
		return "", err
	case isTimeout(err):
		r.log.Error("triage call failed; nothing is dismissed this round", "task", t.Index, "err", err)
	default:
		r.log.Warn("triage call failed; its answer counts as empty and nothing is dismissed", "task", t.Index, "err", err)
	}
	return "", nil
}

// endsRun reports an error after which no task can succeed: the agent is
// unreachable (every attempt of a call failed with a network error).
func endsRun(err error) bool {
	var ue *phase.UnreachableError
	return errors.As(err, &ue) || endsRunAgent(err)
}

func isFatal(err error) bool {
	var fe *phase.FatalError
	return errors.As(err, &fe)
}

func isTimeout(err error) bool {
	var te *phase.TimeoutError
	return errors.As(err, &te)
}

// head is the repo's HEAD commit, or "unknown".
func (r *run) head(ctx context.Context) string {
	res, err := r.command(context.WithoutCancel(ctx), "git", []string{"git", "rev-parse", "HEAD"}, 30*time.Second)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(res.Stdout)
}
