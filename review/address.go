package review

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"peal/agent"
	"peal/check"
	"peal/config"
	"peal/phase"
	"peal/prompt"
)

// Result is how Phase 3 of a task ended.
type Result struct {
	Err          error   // nil: Phase 3 let the task complete
	FindingsLeft bool    // completed with findings or failing checks left (on_findings_remaining = warn, or skip after a failed loop)
	Deferred     bool    // findings or failing checks left under on_findings_remaining = defer
	Leftover     *Review // the last review, when findings were left
	Skipped      bool    // the review was skipped under on_stet_fail = skip
	// Checks is the last run of the project's checks when it tells how
	// the task left its tree (nil: no check ran, or the tree changed
	// after it); FailedChecks are the checks charged to the task that
	// still failed after its last round.
	Checks       check.Results
	FailedChecks []check.Result
	// Plateau: the address loop ended early on a plateau (plateau_rounds):
	// what was left stopped going down.
	Plateau bool
	// NoRound says why the agent was asked for no address round, when it
	// was not and the task went through its review ("" otherwise).
	NoRound NoRound
}

// NoRound is why Phase 3 asked the agent to fix nothing: the report says it
// beside a task's 0 review rounds.
type NoRound string

const (
	// Unreviewed: nothing reviewed the work (no stet, no review commands);
	// the project's checks, if any, passed.
	Unreviewed NoRound = "unreviewed"
	// ReviewSkipped: the review failed and was set aside (on_stet_fail =
	// skip).
	ReviewSkipped NoRound = "review_skipped"
	// NoFindings: the review found nothing (and the checks passed).
	NoFindings NoRound = "no_findings"
	// AllDismissed: the review's findings were all dismissed, by triage or
	// by stet_dismiss_patterns, before any was sent to the agent.
	AllDismissed NoRound = "all_dismissed"
)

// standing is what is left to fix after a review and a run of the
// checks: the review's findings, and the checks that fail and are the
// task's to fix (not in red, the checks that failed before it).
type standing struct {
	review Review
	checks check.Results // the latest run; nil without checks
	red    check.Set
}

// failing are the checks the task has to fix.
func (s standing) failing() []check.Result { return s.checks.Charged(s.red) }

// open reports whether anything is left to fix.
func (s standing) open() bool { return s.review.Present || len(s.failing()) > 0 }

// count is how much is left: the findings and the failing checks.
func (s standing) count() int { return s.review.Count() + len(s.failing()) }

// fixes is what an address call is asked to fix.
func (s standing) fixes() prompt.Fixes {
	f := prompt.Fixes{Findings: s.review.Present}
	if f.Findings {
		f.Review, f.Suggestions = s.review.Output, s.review.Suggestions()
	}
	for _, r := range s.failing() {
		f.Checks = append(f.Checks, r.Failure())
	}
	return f
}

// leftover is the review to keep for the ticket, when findings are left.
func (s standing) leftover() *Review {
	if !s.review.Present {
		return nil
	}
	rv := s.review
	return &rv
}

// Review runs Phase 3 of the session's tasks after their execute, their work
// already committed when Commits() says so: the review and the project's
// checks, then the address loop while findings remain or a check the tasks
// are answerable for fails. red are the checks that failed before the
// tasks: they are run and reported, never charged to them. task is the
// index the agent calls carry (the lowest task of a parallel block).
// on_stet_fail decides what a failed stet call or address loop does;
// on_findings_remaining what is left after the last round does.
func (s *Session) Review(ctx context.Context, task int, red check.Set) Result {
	if s == nil {
		return Result{NoRound: Unreviewed} // no Phase 3: no review, no checks
	}
	rv := s.rv
	defer s.flushDismissals(ctx, task)
	reviewing, skipped := !s.skipped && rv.Reviews(), s.skipped
	cur := standing{red: red}
	if reviewing {
		var err error
		if cur.review, err = s.review(ctx, task); err != nil {
			if ctx.Err() != nil || endsRun(err) || refused(err) || rv.cfg.OnStetFail != config.StetSkip {
				return Result{Err: err}
			}
			rv.log.Warn("review failed; the task finishes without it (on_stet_fail = skip)", "task", task, "err", err)
			reviewing, skipped, cur.review = false, true, Review{}
		}
	}
	var err error
	if cur.checks, err = s.check(ctx, task, check.Execute, 0); err != nil {
		return Result{Err: err}
	}
	if !cur.open() {
		why := NoFindings
		switch {
		case skipped:
			why = ReviewSkipped
		case !reviewing:
			why = Unreviewed
		case s.dismissedAll:
			why = AllDismissed
		}
		return Result{Skipped: skipped, Checks: cur.checks, NoRound: why}
	}
	res, err := s.addressLoop(ctx, task, cur, reviewing)
	if err != nil && ctx.Err() == nil && !endsRun(err) && !isFatal(err) && !isTooLarge(err) && !refused(err) {
		switch rv.cfg.OnStetFail {
		case config.StetRetryOnce:
			rv.log.Warn("address loop failed, running it once more (on_stet_fail = retry_once)", "task", task, "err", err)
			res, err = s.addressLoop(ctx, task, res.last, reviewing)
		case config.StetSkip:
			return s.skipLoop(ctx, task, res, err, red)
		}
	}
	if err != nil {
		return Result{Err: err}
	}
	last := res.last
	if res.resolved {
		rv.log.Info("nothing left to fix: findings resolved, checks pass", "task", task, "rounds", res.rounds)
		var why NoRound
		if res.addressed == 0 {
			why = AllDismissed // triage set every finding aside before any fix
		}
		return Result{Skipped: skipped, Checks: last.checks, NoRound: why}
	}
	failing := last.failing()
	left := Result{Leftover: last.leftover(), Skipped: skipped, Checks: last.checks, FailedChecks: failing, Plateau: res.plateau}
	switch rv.cfg.OnFindingsRemaining {
	case config.FindingsWarn:
		rv.log.Warn("findings or failing checks remain after the last address round (on_findings_remaining = warn)", "task", task,
			"rounds", res.rounds, "remaining", last.review.Count(), "failing_checks", len(failing))
		left.FindingsLeft = true
		return left
	case config.FindingsDefer:
		rv.log.Warn("findings or failing checks remain: the task is deferred to the next run (on_findings_remaining = defer)", "task", task,
			"rounds", res.rounds, "remaining", last.review.Count(), "failing_checks", len(failing))
		left.Deferred = true
		return left
	}
	out := ""
	if last.review.Present {
		out = last.review.Output
		if last.review.Stderr != "" {
			out += "\n" + last.review.Stderr
		}
	}
	head, _ := rv.git.Head(context.WithoutCancel(ctx))
	ferr := &FindingsRemainingError{Task: task, Rounds: res.rounds, Remaining: last.review.Count(), Head: head, Output: out, Checks: failing}
	rv.log.Error("findings or failing checks remain after the last address round", "task", task, "rounds", res.rounds,
		"remaining", ferr.Remaining, "failing_checks", len(failing), "head", ferr.Head, "review", out)
	left.Err = ferr
	return left
}

// skipLoop ends Phase 3 after a failed address loop under on_stet_fail =
// skip: the task completes with its findings left, unless a check it is
// answerable for fails on the tree the loop left (the checks run once
// more: the failed call may have changed it), which is never set aside;
// then the loop's error stands.
func (s *Session) skipLoop(ctx context.Context, task int, res loopResult, loopErr error, red check.Set) Result {
	rv := s.rv
	checks, err := s.check(ctx, task, check.Address, res.rounds)
	switch {
	case err != nil:
		return Result{Err: err}
	case len(checks.Charged(red)) > 0:
		rv.log.Error("address loop failed and checks fail: the task fails (a failing check is never set aside)", "task", task, "err", loopErr)
		return Result{Err: loopErr, Checks: checks}
	}
	rv.log.Warn("address loop failed; the task completes with findings left (on_stet_fail = skip)", "task", task, "err", loopErr)
	return Result{FindingsLeft: true, Leftover: res.last.leftover(), Checks: checks}
}

// check runs the project's checks once (none without checks).
func (s *Session) check(ctx context.Context, task int, stage check.Stage, round int) (check.Results, error) {
	return s.rv.checks.Run(ctx, task, stage, round)
}

// review runs one review: stet's, or the last custom command (whose non-zero
// exit means findings, as for a linter; only a timeout fails it).
func (s *Session) review(ctx context.Context, task int) (Review, error) {
	rv := s.rv
	if rv.Builtin() {
		out, err := rv.stet.review(ctx, task)
		kept := s.filter(out)
		s.dismissedAll = out.Present && !kept.Present
		return kept, err
	}
	argv := rv.custom[len(rv.custom)-1]
	attempts := stetAttempts(rv.cfg)
	if err := rv.guarded(); err != nil {
		return Review{}, err
	}
	res, _, err := phase.Do(ctx, rv.log.With("task", task), phase.Retry{Attempts: attempts, Failure: onlyTimeout}, func(a phase.Attempt) phase.Spec {
		return rv.customSpec(task, a, argv)
	})
	if err != nil {
		return Review{}, fmt.Errorf("review (%s): %w", strings.Join(argv, " "), err)
	}
	out := ParseReview(res.Stdout, res.ExitCode)
	out.Stderr = res.Stderr
	rv.log.Info("review finished", "task", task, "findings", out.Present, "count", out.Count(), "exit_code", res.ExitCode)
	return out, nil
}

// onlyTimeout: a custom review's non-zero exit means findings, as for a
// linter; only a timeout is a failure.
func onlyTimeout(res phase.Result) error {
	if res.TimedOut {
		return phase.CheckExit(res)
	}
	return nil
}

// loopResult is where an address loop ended.
type loopResult struct {
	resolved  bool
	plateau   bool // it ended early on a plateau
	rounds    int
	addressed int      // the address calls it made
	last      standing // the latest review and checks (the ones before a failure, on error)
}

// addressLoop is the one address loop of every review mode, and of the
// checks alone: each round triages (built-in mode: findings not worth a fix
// are set aside; failing checks never are), asks the agent to fix the
// findings and the failing checks in one call, commits the fix so that the
// review sees it, reviews again and runs the checks again, until nothing is
// left or max_address_rounds is used up. reviewing is false when the
// session reviews nothing (no review, or it was skipped): only the checks
// drive the loop.
func (s *Session) addressLoop(ctx context.Context, task int, cur standing, reviewing bool) (loopResult, error) {
	rv := s.rv
	rounds := int(rv.cfg.MaxAddressRounds)
	stalled := 0   // rounds in a row after which what is left did not go down
	addressed := 0 // address calls made
	for round := 1; round <= rounds; round++ {
		rv.log.Info("address round", "task", task, "round", round, "of", rounds, "findings", cur.review.Count(), "failing_checks", len(cur.failing()))
		if reviewing && rv.Builtin() && cur.review.Present {
			next, err := s.triage(ctx, task, cur.review)
			if err != nil {
				return loopResult{rounds: round, last: cur}, err
			}
			if cur.review = next; !cur.open() {
				return loopResult{resolved: true, rounds: round, addressed: addressed, last: cur}, nil
			}
		}
		before := cur.count()
		addressed++
		if _, err := rv.agent.Call(ctx, phase.Address, task, rv.Phase3Attempts(), prompt.Address(cur.fixes())); err != nil {
			return loopResult{rounds: round, last: cur}, err
		}
		if rv.Commits() {
			if _, err := rv.git.Commit(ctx, s.tasks, fmt.Sprintf("address round %d", round)); err != nil {
				return loopResult{rounds: round, last: cur}, err
			}
		}
		if reviewing {
			next, err := s.review(ctx, task)
			if err != nil {
				return loopResult{rounds: round, last: cur}, err
			}
			if rv.Builtin() {
				next = s.dropGone(ctx, task, cur.review, next)
			}
			cur.review = next
		}
		checks, err := s.check(ctx, task, check.Address, round)
		if err != nil {
			return loopResult{rounds: round, last: cur}, err
		}
		if cur.checks = checks; !cur.open() {
			return loopResult{resolved: true, rounds: round, addressed: addressed, last: cur}, nil
		}
		if stalled++; cur.count() < before {
			stalled = 0
		}
		if p := int(rv.cfg.PlateauRounds); p > 0 && stalled >= p {
			rv.log.Warn("address loop ends early on a plateau: what is left stopped going down", "task", task,
				"round", round, "rounds_without_progress", stalled, "findings", cur.review.Count(), "failing_checks", len(cur.failing()))
			return loopResult{plateau: true, rounds: round, last: cur}, nil
		}
	}
	return loopResult{rounds: rounds, last: cur}, nil
}

// Phase3Attempts is 1 + min(phase_3_retry_count, 2): the cap holds whatever
// layer set the count.
func (rv *Reviewer) Phase3Attempts() int {
	return 1 + int(min(rv.cfg.Phase3RetryCount, 2))
}

// triage decides which findings of a review are not worth addressing and
// sets them aside for the rest of the session's Phase 3. It never fails the
// task: a failed triage call sets nothing aside. Only an interruption, an
// unreachable agent, a fatal failure or a prompt too large is an error.
//
// The findings set aside are dismissed in stet only when the address loop
// ends (flushDismissals): stet never reviews again a hunk that holds a
// dismissed finding, so dismissing one before the agent fixes another in
// the same hunk would hide the fix from every later review.
func (s *Session) triage(ctx context.Context, task int, cur Review) (Review, error) {
	rv := s.rv
	if !cur.Structured {
		rv.log.Warn("review output is not structured JSON: the structured dismiss step is skipped", "task", task)
		return cur, nil
	}
	var dismissals []dismissal
	if rv.cfg.StetDisableLLMTriage {
		dismissals = triageByPatterns(cur.Findings, rv.cfg.StetDismissPatterns)
	} else {
		answer, err := s.askTriage(ctx, task, cur)
		if err != nil {
			return cur, err
		}
		dismissals = parseTriage(answer, cur.Findings)
	}
	for _, d := range dismissals {
		if s.setAside(d) {
			rv.log.Info("finding set aside by triage; it is dismissed in stet when the address loop ends", "task", task, "id", d.ID, "reason", d.Reason)
		}
	}
	return s.filter(cur), nil
}

// setAside leaves a finding out of the rest of the session's Phase 3 and
// queues its `stet dismiss`; false when it was set aside already.
func (s *Session) setAside(d dismissal) bool {
	if s.ignored[d.ID] {
		return false
	}
	if s.ignored == nil {
		s.ignored = map[string]bool{}
	}
	s.ignored[d.ID] = true
	s.dismissals = append(s.dismissals, d)
	return true
}

// dropGone sets aside, as already_correct, each finding of the review
// before a fix that stet still reports after it although the code it
// flagged is gone: its file was removed, its line lies past the file's end,
// or no hunk of the task's diff covers its line any more. stet resolves a
// finding only when a hunk it reviews again covers the finding's line, so a
// fix by deletion would leave such a finding active for good.
func (s *Session) dropGone(ctx context.Context, task int, before, after Review) Review {
	if !after.Structured || s.baseline == "" {
		return after
	}
	earlier := map[string]bool{}
	for _, f := range before.Findings {
		earlier[f.ID] = true
	}
	for _, f := range after.Findings {
		if f.ID == "" || !earlier[f.ID] || s.ignored[f.ID] {
			continue
		}
		line := f.Line
		if f.Range != nil && f.Range.Start > 0 {
			line = f.Range.Start
		}
		if why := s.gone(ctx, f.location(), line); why != "" && s.setAside(dismissal{f.ID, "already_correct"}) {
			s.rv.log.Info("finding dismissed as already_correct: the code it flagged is gone", "task", task, "id", f.ID,
				"file", f.location(), "line", line, "why", why)
		}
	}
	return s.filter(after)
}

// gone says why the code at line of file (relative to the top of the work
// tree) is gone since the session's start, or "" when it is not (or that
// cannot be told).
func (s *Session) gone(ctx context.Context, file string, line int) string {
	if line <= 0 || !filepath.IsLocal(filepath.FromSlash(file)) {
		return ""
	}
	data, err := os.ReadFile(filepath.Join(s.rv.git.Top(), filepath.FromSlash(file)))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "its file is gone"
	case err != nil:
		return ""
	}
	lines := bytes.Count(data, []byte("\n"))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		lines++
	}
	if line > lines {
		return "its line is past the end of the file"
	}
	covered, err := s.rv.git.Covered(ctx, s.baseline, file, line)
	if err != nil {
		s.rv.log.Warn("could not tell whether a finding's code is gone; it stays", "file", file, "line", line, "err", err)
		return ""
	}
	if !covered {
		return "no change of the task covers its line any more"
	}
	return ""
}

// filter leaves out of a structured review the findings triage set aside.
func (s *Session) filter(rv Review) Review {
	if !rv.Structured || len(s.ignored) == 0 {
		return rv
	}
	kept := slices.DeleteFunc(slices.Clone(rv.Findings), func(f Finding) bool { return s.ignored[f.ID] })
	if len(kept) == len(rv.Findings) {
		return rv
	}
	rv.Findings, rv.Present = kept, len(kept) > 0
	if data, err := json.Marshal(struct {
		Findings []Finding `json:"findings"`
	}{nonNilFindings(kept)}); err == nil {
		rv.Output = string(data)
	}
	return rv
}

func nonNilFindings(fs []Finding) []Finding {
	if fs == nil {
		return []Finding{}
	}
	return fs
}

// flushDismissals dismisses in stet the findings triage set aside (`stet
// dismiss ID REASON`, each a warning on failure), so that stet's history
// keeps the reasons. An interrupted run skips it.
func (s *Session) flushDismissals(ctx context.Context, task int) {
	if ctx.Err() != nil || !s.rv.Builtin() {
		return
	}
	for _, d := range s.dismissals {
		s.rv.stet.dismiss(ctx, task, d)
	}
	s.dismissals = nil
}

// askTriage asks the agent the triage question. After its attempts, a timeout
// is logged as an error and a non-zero exit counts as an empty answer: either
// way nothing is dismissed. Only an interruption, an unreachable agent, a
// fatal failure or a prompt too large to send is returned.
func (s *Session) askTriage(ctx context.Context, task int, cur Review) (string, error) {
	rv := s.rv
	ask := prompt.Triage(cur.Output)
	answer, err := rv.agent.Call(ctx, phase.Triage, task, rv.Phase3Attempts(), ask)
	switch {
	case err == nil:
		return answer, nil
	case ctx.Err() != nil, endsRun(err), isFatal(err), isTooLarge(err):
		return "", err
	case isTimeout(err):
		rv.log.Error("triage call failed; nothing is dismissed this round", "task", task, "err", err)
	default:
		rv.log.Warn("triage call failed; its answer counts as empty and nothing is dismissed", "task", task, "err", err)
	}
	return "", nil
}

// endsRun reports an error after which no task can succeed (see
// phase.RunEnder).
func endsRun(err error) bool { return phase.EndsRun(err) }

// refused: stet would have read settings a call made in the task's tree.
// No retry and no skip: the task's review fails.
func refused(err error) bool {
	var ce *ConfigError
	return errors.As(err, &ce)
}

func isFatal(err error) bool {
	var fe *phase.FatalError
	return errors.As(err, &fe)
}

func isTimeout(err error) bool {
	var te *phase.TimeoutError
	return errors.As(err, &te)
}

// isTooLarge: the prompt cannot be handed to the agent (a review too large
// for the argument of a CLI that takes its prompt there); no retry helps.
func isTooLarge(err error) bool {
	var pe *agent.PromptTooLongError
	return errors.As(err, &pe)
}
