package tickets

import (
	"fmt"
	"slices"
	"time"
)

// This file is a run's side of an attempt, from its start to its end: the
// escalation the run asks for, a ticket that used up its retries skipped,
// and the attempt ended as its work ended (the close summary written and
// read back as ticketflow's detection reads it).

// Escalating is the escalation of a run's tickets (escalation.*): whether
// it is on, the retries a ticket may use, and the models of each role.
type Escalating struct {
	On                           bool
	MaxRetries                   int
	Fixer, SecondOpinion, Worker string
}

// For is the escalation recorded for attempt n: ticketflow's curve, or
// none when escalation is off.
func (e Escalating) For(n int) Escalation {
	if !e.On {
		return Escalation{}
	}
	return ModelsFor(n, e.Fixer, e.SecondOpinion, e.Worker)
}

// Exhausted reports whether a run skips a ticket whose state is st: with
// escalation on, its last attempt was blocked and it used its retries.
func (e Escalating) Exhausted(st RetryState) bool { return e.On && st.Exhausted(e.MaxRetries) }

// ExhaustedError: the ticket used up its retries (Escalating.Exhausted);
// nothing runs for it.
type ExhaustedError struct {
	ID                     string
	RetryCount, MaxRetries int
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("ticket %s skipped: its last attempt was blocked and it has used its retries (%d of max_retries %d)", e.ID, e.RetryCount, e.MaxRetries)
}

// Start opens ticket id and begins (or resumes) its attempt, with the
// escalation of its number. It fails with an *ExhaustedError when the
// ticket used up its retries, and with an error wrapping ErrLocked when
// another holder works on it. The ticket stays locked until Close.
func (s *Store) Start(id string, now time.Time, esc Escalating, warn func(string)) (*Ticket, Attempt, bool, error) {
	t, err := s.Open(id, now, warn)
	if err != nil {
		return nil, Attempt{}, false, err
	}
	if st := t.State(); esc.Exhausted(st) {
		t.Close()
		return nil, Attempt{}, false, &ExhaustedError{ID: id, RetryCount: st.RetryCount, MaxRetries: esc.MaxRetries}
	}
	a, resumed, err := t.Begin(now, esc.For)
	if err != nil {
		t.Close()
		return nil, Attempt{}, false, fmt.Errorf("ticket %s: %w", id, err)
	}
	return t, a, resumed, nil
}

// Next is the attempt the next run of ticket id would make, read without
// locking or writing; why, when not "", says why no attempt would run. A
// ticket whose state is missing or unreadable starts afresh.
func Next(knowledgeDir, id string, esc Escalating) (n int, why string) {
	st, err := Load(knowledgeDir, id)
	if err != nil {
		return 1, ""
	}
	if esc.Exhausted(st) {
		return 0, fmt.Sprintf("skipped: %d blocked attempts reached max_retries %d", st.RetryCount, esc.MaxRetries)
	}
	return st.NextAttempt(), ""
}

// Ending is how the work of an attempt ended.
type Ending struct {
	// Interrupted: a signal cut the work short (it does not cost an
	// attempt); Failed: it failed for another reason than findings left
	// or checks failing.
	Interrupted, Failed bool
	// Counts are the findings left, by the gate's severities, which
	// FailOn's severities block; Checks the checks left failing, any of
	// which blocks.
	Counts Counts
	FailOn []string
	Checks []FailedCheck
}

// Blocks reports whether any count of a failOn severity is above zero; an
// empty failOn is no gate.
func (c Counts) Blocks(failOn []string) bool {
	return slices.ContainsFunc(failOn, func(sev string) bool { return c.Of(sev) > 0 })
}

// End ends this handle's attempt as its work ended and closes the ticket:
// work cut short stays in progress (status ""); work that failed is an
// error; otherwise close-summary.md is written from what was left, and the
// attempt completes as that file says (closed or blocked), with its quality
// gate. status is what was recorded.
func (t *Ticket) End(now time.Time, e Ending) (status string, err error) {
	defer t.Close()
	switch {
	case e.Interrupted:
		return "", nil
	case e.Failed:
		return AttemptError, t.Complete(now, AttemptError, nil)
	}
	blocked := e.Counts.Blocks(e.FailOn) || len(e.Checks) > 0
	if err := t.WriteCloseSummary(blocked, e.Counts, e.Checks...); err != nil {
		return "", fmt.Errorf("could not write %s: %w", CloseSummaryFile, err)
	}
	cs, err := t.CloseStatus()
	if err != nil {
		return "", fmt.Errorf("could not read %s back: %w", CloseSummaryFile, err)
	}
	status = AttemptClosed
	if cs.Status == "blocked" {
		status = AttemptBlocked
	}
	gate := &QualityGate{FailOn: slices.Clone(e.FailOn), Counts: e.Counts}
	if err := t.Complete(now, status, gate); err != nil {
		return "", err
	}
	return status, nil
}
