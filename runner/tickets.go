package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"peal/phase"
	"peal/plan"
	"slices"
	"sync"
	"time"

	"peal/check"
	"peal/config"
	"peal/review"
	"peal/state"
	"peal/tickets"
)

// The retry-state store: every ticket's attempts are recorded in
// <knowledge_dir>/tickets/<id>/retry-state.json, shared with ticketflow. A
// ticket is the whole run (ticket_id) or one task (<ticket_prefix>-<index>).

// ticketRun is one attempt of one ticket, held under the ticket's lock from
// the start of its work to its close.
type ticketRun struct {
	id      string
	ticket  *tickets.Ticket
	attempt int // attempt number, which drives escalation
}

// runTickets tracks the attempts of a run's tickets.
type runTickets struct {
	cfg *config.Config
	log *slog.Logger
	now func() time.Time
	// closed, when set, runs when a task's ticket attempt has ended, before
	// the task's outcome is recorded in state.json; tests use it to hold a
	// run at that point.
	closed func(plan.Task)

	store *tickets.Store // the store's tickets folder, kept open for the run
	// part is a task's part of its ticket id (state.State.Ticket).
	part func(task int) string

	mu        sync.Mutex
	byTask    map[int]*ticketRun // per-task mode
	run       *ticketRun         // ticket mode (ticket_id)
	leftovers []review.Review    // ticket mode: findings left by every task
	failed    []check.Result     // ticket mode: the checks every task left failing
}

func newTickets(cfg *config.Config, log *slog.Logger, now func() time.Time) *runTickets {
	return &runTickets{cfg: cfg, log: log, now: now, store: tickets.NewStore(cfg.KnowledgeDir), byTask: map[int]*ticketRun{}, part: state.State{}.Ticket}
}

// id is the ticket of a task.
func (ts *runTickets) id(task int) string { return ticketID(ts.cfg, ts.part, task) }

// ticketID is the ticket of a task under cfg: the run's ticket (ticket
// mode), else the plan's prefix and the task's part, which stays the
// task's when it moves (state.TaskEntry.Ticket).
func ticketID(cfg *config.Config, part func(int) string, task int) string {
	if cfg.TicketID != "" {
		return cfg.TicketID
	}
	return cfg.TicketPrefix + "-" + part(task)
}

// of is the attempt a task's calls belong to (nil outside one).
func (ts *runTickets) of(task int) *ticketRun {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.run != nil {
		return ts.run
	}
	return ts.byTask[task]
}

// errSkipped: the ticket used up its retries; nothing runs for it.
var errSkipped = errors.New("ticket skipped")

// begin opens a ticket and starts (or resumes) its attempt. It returns
// errSkipped when escalation is on and the ticket's blocked attempts reached
// max_retries, and an error that ends the run when another process holds the
// ticket.
func (ts *runTickets) begin(id string) (*ticketRun, error) {
	t, err := ts.store.Open(id, ts.now(), func(w string) { ts.log.Warn(w, "ticket", id) })
	if err != nil {
		if errors.Is(err, tickets.ErrLocked) {
			return nil, fmt.Errorf("ticket %s is being worked on by another peal process (its retry state is locked): wait for it or run another ticket", id)
		}
		return nil, fmt.Errorf("ticket %s: %w", id, err)
	}
	if ts.cfg.EscalationEnabled && t.Exhausted(int(ts.cfg.EscalationMaxRetries)) {
		st := t.State()
		t.Close()
		ts.log.Warn("skipping ticket: its last attempt was blocked and it has used its retries",
			"ticket", id, "retry_count", st.RetryCount, "max_retries", ts.cfg.EscalationMaxRetries)
		return nil, errSkipped
	}
	attempt, resumed, err := t.Begin(ts.now(), ts.escalationFor)
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("ticket %s: %w", id, err)
	}
	ts.log.Info("ticket attempt", "ticket", id, "attempt", attempt.AttemptNumber, "trigger", attempt.Trigger, "resumed", resumed)
	return &ticketRun{id: id, ticket: t, attempt: attempt.AttemptNumber}, nil
}

// peek reads which attempt a ticket's next run would be, without
// locking or writing; note says why the ticket would not run.
func (ts *runTickets) peek(id string) (int, string) {
	st, err := tickets.Load(ts.cfg.KnowledgeDir, id)
	if err != nil {
		// Missing or unreadable: a run starts a fresh state.
		return 1, ""
	}
	if ts.cfg.EscalationEnabled && st.Exhausted(int(ts.cfg.EscalationMaxRetries)) {
		return 0, fmt.Sprintf("skipped: %d blocked attempts reached max_retries %d", st.RetryCount, ts.cfg.EscalationMaxRetries)
	}
	return st.NextAttempt(), ""
}

// escalationFor is the escalation recorded for attempt n.
func (ts *runTickets) escalationFor(n int) tickets.Escalation {
	if !ts.cfg.EscalationEnabled {
		return tickets.Escalation{}
	}
	return tickets.ModelsFor(n, ts.cfg.EscalationFixer, ts.cfg.EscalationSecondOpinion, ts.cfg.EscalationWorker)
}

// modelFor is the model of a call of the given phase on attempt n of its
// ticket (0: no ticket): the base model, or, with escalation on, tf's
// curve — the fixer from attempt 2 for address; the second opinion for
// triage and the worker for plan and execute from attempt 3. It depends on
// nothing else, so a dry run asks it exactly as a run does.
func modelFor(cfg *config.Config, n int, phaseName phase.Name) string {
	model, _ := modelSetting(cfg, n, phaseName)
	return model
}

// modelSetting is modelFor and the key that set the model: model, an
// escalation key, or "" when no model is set (the CLI's default).
func modelSetting(cfg *config.Config, n int, phaseName phase.Name) (model, key string) {
	base := func() (string, string) {
		if cfg.Model == "" {
			return "", ""
		}
		return cfg.Model, "model"
	}
	if n == 0 || !cfg.EscalationEnabled {
		return base()
	}
	esc := tickets.ModelsFor(n, cfg.EscalationFixer, cfg.EscalationSecondOpinion, cfg.EscalationWorker)
	var escalated *string
	switch phaseName {
	case phase.Address:
		escalated, key = esc.Fixer, "escalation.fixer"
	case phase.Triage:
		escalated, key = esc.ReviewerSecondOpinion, "escalation.reviewer_second_opinion"
	case phase.Plan, phase.Execute:
		escalated, key = esc.Worker, "escalation.worker"
	}
	if escalated != nil && *escalated != "" {
		return *escalated, key
	}
	return base()
}

// attempt is the attempt number of the ticket a task's calls belong to
// (0 outside one).
func (ts *runTickets) attempt(task int) int {
	if tr := ts.of(task); tr != nil {
		return tr.attempt
	}
	return 0
}

// beginTask starts the ticket of a task in per-task mode; errSkipped
// means the task does not run.
func (ts *runTickets) beginTask(t plan.Task) error {
	if ts.cfg.TicketID != "" {
		return nil
	}
	tr, err := ts.begin(ts.id(t.Index))
	if err != nil {
		return err
	}
	ts.mu.Lock()
	ts.byTask[t.Index] = tr
	ts.mu.Unlock()
	return nil
}

// release lets go of a task's ticket without ending its attempt
// (the task never started; a later run resumes the attempt).
func (ts *runTickets) release(t plan.Task) {
	ts.mu.Lock()
	tr := ts.byTask[t.Index]
	delete(ts.byTask, t.Index)
	ts.mu.Unlock()
	if tr != nil {
		tr.ticket.Close()
	}
}

// finishTask closes the attempt of a task's ticket in per-task mode.
func (ts *runTickets) finishTask(t plan.Task, res taskResult) {
	if ts.cfg.TicketID != "" {
		return
	}
	ts.mu.Lock()
	tr := ts.byTask[t.Index]
	delete(ts.byTask, t.Index)
	ts.mu.Unlock()
	if tr == nil {
		return
	}
	var leftovers []review.Review
	if res.leftover != nil {
		leftovers = append(leftovers, *res.leftover)
	}
	ts.end(tr, leftovers, res.failedChecks, res.err != nil && !isFindingsRemaining(res.err), isInterrupted(res.err))
	if ts.closed != nil {
		ts.closed(t)
	}
}

// end ends an attempt as its work ended — not as the run is when
// the attempt is closed: work cut short by an interruption stays in progress
// (a signal does not cost an attempt), while work that finished is recorded
// even if a signal came since, so that the ticket agrees with state.json.
// Work that failed for another reason than left-over findings or failing
// checks is an error; otherwise close-summary.md is written from the
// left-over findings and the checks that still failed (any of which blocks
// the ticket), and the attempt completes as that file says.
func (ts *runTickets) end(tr *ticketRun, leftovers []review.Review, checks []check.Result, failed, interrupted bool) {
	defer tr.ticket.Close()
	log := ts.log.With("ticket", tr.id, "attempt", tr.attempt)
	if interrupted {
		log.Info("attempt left in progress: its work was interrupted")
		return
	}
	if failed {
		if err := tr.ticket.Complete(ts.now(), tickets.AttemptError, nil); err != nil {
			log.Error("could not record the attempt", "err", err)
		}
		log.Info("attempt ended in error")
		return
	}
	counts := gateCounts(leftovers)
	blocked := blocks(counts, ts.cfg.FailOn) || len(checks) > 0
	if err := tr.ticket.WriteCloseSummary(blocked, counts, closeChecks(checks)...); err != nil {
		log.Error("could not write close-summary.md", "err", err)
		return
	}
	cs, err := tr.ticket.CloseStatus()
	if err != nil {
		log.Error("could not read close-summary.md back", "err", err)
		return
	}
	status := tickets.AttemptClosed
	if cs.Status == "blocked" {
		status = tickets.AttemptBlocked
	}
	gate := &tickets.QualityGate{FailOn: slices.Clone(ts.cfg.FailOn), Counts: counts}
	if err := tr.ticket.Complete(ts.now(), status, gate); err != nil {
		log.Error("could not record the attempt", "err", err)
		return
	}
	log.Info("attempt completed", "status", status, "critical", counts.Critical, "major", counts.Major,
		"minor", counts.Minor, "warnings", counts.Warnings, "suggestions", counts.Suggestions, "failed_checks", len(checks))
}

// closeChecks are the failed checks as close-summary.md lists them.
func closeChecks(checks []check.Result) []tickets.FailedCheck {
	out := make([]tickets.FailedCheck, 0, len(checks))
	for _, c := range checks {
		out = append(out, tickets.FailedCheck{Command: c.Command, Result: c.Outcome(), LastLine: c.LastLine()})
	}
	return out
}

// gateCounts counts left-over findings by the gate's severities: stet's
// error → Critical, warning → Major, info → Minor, nitpick → Suggestions,
// anything else → Warnings; a review that is not JSON counts as one Major.
func gateCounts(reviews []review.Review) tickets.Counts {
	var c tickets.Counts
	for _, rv := range reviews {
		if !rv.Present {
			continue
		}
		if !rv.Structured {
			c.Major++
			continue
		}
		for _, f := range rv.Findings {
			switch f.Severity {
			case "error":
				c.Critical++
			case "warning":
				c.Major++
			case "info":
				c.Minor++
			case "nitpick":
				c.Suggestions++
			default:
				c.Warnings++
			}
		}
	}
	return c
}

// blocks reports whether any count of a fail_on severity is above zero; an
// empty fail_on is no gate.
func blocks(c tickets.Counts, failOn []string) bool {
	for _, sev := range failOn {
		if c.Of(sev) > 0 {
			return true
		}
	}
	return false
}

func isFindingsRemaining(err error) bool { return review.IsFindingsRemaining(err) }

// reset backs up the retry state of this run's tickets (--retry-reset).
func (ts *runTickets) reset(tasks []plan.Task) error {
	ids := []string{ts.cfg.TicketID}
	if ts.cfg.TicketID == "" {
		ids = ids[:0]
		for _, t := range tasks {
			ids = append(ids, ts.id(t.Index))
		}
	}
	for _, id := range ids {
		backup, err := tickets.Reset(ts.cfg.KnowledgeDir, id, ts.now())
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return fmt.Errorf("--retry-reset: ticket %s: %w", id, err)
		default:
			ts.log.Info("retry state reset", "ticket", id, "backup", backup)
		}
	}
	return nil
}

// addLeftover keeps the findings a task left, in ticket mode, for the close
// of the run's ticket.
func (ts *runTickets) addLeftover(rv review.Review) {
	ts.mu.Lock()
	ts.leftovers = append(ts.leftovers, rv)
	ts.mu.Unlock()
}

// addFailedChecks keeps the checks a task left failing, in ticket mode,
// for the close of the run's ticket.
func (ts *runTickets) addFailedChecks(checks []check.Result) {
	ts.mu.Lock()
	ts.failed = append(ts.failed, checks...)
	ts.mu.Unlock()
}
