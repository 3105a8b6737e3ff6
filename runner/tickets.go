package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"time"

	"peal/check"
	"peal/config"
	"peal/plan"
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

	store *tickets.Store     // the store's tickets folder, kept open for the run
	esc   tickets.Escalating // escalation.*
	// part is a task's part of its ticket id (state.State.Ticket).
	part func(task int) string

	mu        sync.Mutex
	byTask    map[int]*ticketRun // per-task mode
	run       *ticketRun         // ticket mode (ticket_id)
	leftovers []review.Review    // ticket mode: findings left by every task
	failed    []check.Result     // ticket mode: the checks every task left failing
}

func newTickets(cfg *config.Config, log *slog.Logger, now func() time.Time) *runTickets {
	esc := tickets.Escalating{On: cfg.EscalationEnabled, MaxRetries: int(cfg.EscalationMaxRetries),
		Fixer: cfg.EscalationFixer, SecondOpinion: cfg.EscalationSecondOpinion, Worker: cfg.EscalationWorker}
	return &runTickets{cfg: cfg, log: log, now: now, store: tickets.NewStore(cfg.KnowledgeDir), esc: esc, byTask: map[int]*ticketRun{}, part: state.State{}.Ticket}
}

// id is the ticket of a task.
func (ts *runTickets) id(task int) string { return ts.cfg.Ticket(ts.part(task)) }

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
	t, attempt, resumed, err := ts.store.Start(id, ts.now(), ts.esc, func(w string) { ts.log.Warn(w, "ticket", id) })
	var ex *tickets.ExhaustedError
	switch {
	case errors.As(err, &ex):
		ts.log.Warn("skipping ticket: its last attempt was blocked and it has used its retries", "ticket", id, "retry_count", ex.RetryCount, "max_retries", ex.MaxRetries)
		return nil, errSkipped
	case errors.Is(err, tickets.ErrLocked):
		return nil, fmt.Errorf("ticket %s is being worked on by another peal process (its retry state is locked): wait for it or run another ticket", id)
	case err != nil:
		return nil, fmt.Errorf("ticket %s: %w", id, err)
	}
	ts.log.Info("ticket attempt", "ticket", id, "attempt", attempt.AttemptNumber, "trigger", attempt.Trigger, "resumed", resumed)
	return &ticketRun{id: id, ticket: t, attempt: attempt.AttemptNumber}, nil
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
// even if a signal came since, so that the ticket agrees with state.json
// (tickets.Ticket.End).
func (ts *runTickets) end(tr *ticketRun, leftovers []review.Review, checks []check.Result, failed, interrupted bool) {
	log := ts.log.With("ticket", tr.id, "attempt", tr.attempt)
	counts := review.GateCounts(leftovers...)
	e := tickets.Ending{Interrupted: interrupted, Failed: failed, Counts: counts, FailOn: ts.cfg.FailOn}
	for _, c := range checks {
		e.Checks = append(e.Checks, tickets.FailedCheck{Command: c.Command, Result: c.Outcome(), LastLine: c.LastLine()})
	}
	status, err := tr.ticket.End(ts.now(), e)
	switch {
	case err != nil:
		log.Error("could not record the attempt", "err", err)
	case interrupted:
		log.Info("attempt left in progress: its work was interrupted")
	case failed:
		log.Info("attempt ended in error")
	default:
		log.Info("attempt completed", "status", status, "critical", counts.Critical, "major", counts.Major,
			"minor", counts.Minor, "warnings", counts.Warnings, "suggestions", counts.Suggestions, "failed_checks", len(checks))
	}
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
