package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// This file is the attempt lifecycle of one ticket: lock it, start or resume
// an attempt, record how the attempt ended, and reset.

// LockFile is the lock file inside a ticket folder. It is left in place when
// the lock is released: deleting it would let a later process lock a new file
// of the same name while an older one still holds the deleted one.
const LockFile = "retry-state.lock"

// The ticket artifacts the detection reads.
const (
	CloseSummaryFile = "close-summary.md"
	ReviewFile       = "review.md"
)

// ErrTicketLocked is wrapped when another holder (another peal process, or
// another task of the same run) has the ticket's lock.
var ErrTicketLocked = errors.New("ticket locked")

// Ticket is the retry state of one ticket, held under an exclusive lock from
// OpenTicket until Close, so that two runs never interleave their attempts.
type Ticket struct {
	mu    sync.Mutex // State may be read while the runner completes an attempt
	id    string
	dir   string
	lock  *os.File // nil once closed
	state RetryState
}

// OpenTicket locks ticket id in knowledgeDir and loads its retry state. The
// lock is a non-blocking flock, released by Close or by the death of the
// process, so a crash never leaves a stale lock; if another holder has it
// the error wraps ErrTicketLocked. A missing retry-state.json gives a fresh
// state; an unreadable one is kept aside (KeepAside, stamped with now) and a
// warning says so. OpenTicket writes nothing else: the first save is Begin's.
func OpenTicket(knowledgeDir, id string, now time.Time) (*Ticket, []string, error) {
	if err := checkTicketID(id); err != nil {
		return nil, nil, err
	}
	dir := TicketDir(knowledgeDir, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("ticket folder of %s: %w", id, err)
	}
	lock, err := lockTicket(dir, id)
	if err != nil {
		return nil, nil, err
	}
	t := &Ticket{id: id, dir: dir, lock: lock, state: freshState(id)}
	path := filepath.Join(dir, RetryStateFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil, nil
	}
	if err != nil {
		lock.Close()
		return nil, nil, fmt.Errorf("retry state of %s: %w", id, err)
	}
	st, derr := decodeRetryState(data, id)
	if derr == nil {
		t.state = st
		return t, nil, nil
	}
	aside, err := KeepAside(path, now)
	if err != nil {
		lock.Close()
		return nil, nil, fmt.Errorf("retry state %s is unreadable (%v) and cannot be moved aside: %w", path, derr, err)
	}
	return t, []string{fmt.Sprintf("retry state %s is unreadable (%v): kept it as %s and started fresh", path, derr, aside)}, nil
}

func freshState(id string) RetryState {
	return RetryState{Version: RetryStateVersion, TicketID: id, Attempts: []Attempt{}, Status: TicketActive}
}

// lockTicket takes the exclusive lock of the ticket folder dir.
func lockTicket(dir, id string) (*os.File, error) {
	path := filepath.Join(dir, LockFile)
	// os.OpenFile sets close-on-exec, so the agents peal starts do not
	// inherit the lock and keep it alive after peal has gone.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock of ticket %s: %w", id, err)
	}
	held, err := tryLock(f)
	if err == nil && held {
		return f, nil
	}
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("locking ticket %s (%s): %w", id, path, err)
	}
	return nil, fmt.Errorf("%w: %s is being worked on by another peal run or task, which holds %s", ErrTicketLocked, id, path)
}

// ID is the ticket id.
func (t *Ticket) ID() string { return t.id }

// Dir is the ticket folder, where close-summary.md and review.md live.
func (t *Ticket) Dir() string { return t.dir }

// State returns a copy of the retry state.
func (t *Ticket) State() RetryState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state.clone()
}

// Exhausted reports whether the ticket has used its retries: maxRetries or
// more blocked attempts and the last attempt blocked too. It looks at the
// last attempt rather than the aggregate status because tf keeps the
// aggregate "active" after a blocked close.
func (t *Ticket) Exhausted(maxRetries int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state.Exhausted(maxRetries)
}

// Begin starts an attempt and saves. An attempt still in progress (its run
// crashed or was interrupted) is resumed with its number and start time, so
// an interruption does not cost a retry. Otherwise attempt len+1 starts, its
// trigger saying why: the first attempt, a blocked quality gate, or a manual
// re-run after a close or an error. escalation gives the models for an
// attempt number (nil means no escalation, all nulls); it is asked again on a
// resume, so a changed configuration applies.
func (t *Ticket) Begin(now time.Time, escalation func(attemptNumber int) Escalation) (Attempt, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lock == nil {
		return Attempt{}, false, t.closedError()
	}
	next := t.state.clone()
	n := len(next.Attempts)
	resumed := n > 0 && next.Attempts[n-1].Status == AttemptInProgress
	if !resumed {
		trigger := TriggerManualRetry
		switch {
		case n == 0:
			trigger = TriggerInitial
		case next.Attempts[n-1].Status == AttemptBlocked:
			trigger = TriggerQualityGate
		}
		next.Attempts = append(next.Attempts, Attempt{
			AttemptNumber: n + 1,
			StartedAt:     stamp(now),
			Status:        AttemptInProgress,
			Trigger:       trigger,
		})
	}
	a := &next.Attempts[len(next.Attempts)-1]
	var e Escalation
	if escalation != nil {
		e = escalation(a.AttemptNumber).clone()
	}
	if a.Escalation != nil && e.extra == "" {
		e.extra = a.Escalation.extra // members tf added stay when peal refreshes the models
	}
	a.Escalation = &e
	next.LastAttemptAt = stamp(now)
	next.Status = TicketActive
	if err := t.save(next); err != nil {
		return Attempt{}, false, err
	}
	t.state = next
	return a.clone(), resumed, nil
}

// Complete records how the attempt in progress ended and saves. status is
// AttemptClosed (retry count back to 0, ticket closed), AttemptBlocked (one
// more retry used, ticket stays active as tf keeps it) or AttemptError (the
// run failed before a verdict: nothing is counted). gate, when not nil, is
// recorded as the attempt's quality gate.
func (t *Ticket) Complete(now time.Time, status string, gate *QualityGate) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lock == nil {
		return t.closedError()
	}
	switch status {
	case AttemptClosed, AttemptBlocked, AttemptError:
	default:
		return fmt.Errorf("completing attempt of %s: status %q is not %s, %s or %s", t.id, status, AttemptClosed, AttemptBlocked, AttemptError)
	}
	next := t.state.clone()
	n := len(next.Attempts)
	if n == 0 || next.Attempts[n-1].Status != AttemptInProgress {
		return fmt.Errorf("completing attempt of %s: no attempt is in progress", t.id)
	}
	a := &next.Attempts[n-1]
	a.CompletedAt = stamp(now)
	a.Status = status
	if gate != nil {
		g := gate.clone()
		a.QualityGate = &g
	}
	// An errored run usually stopped before writing a close summary, and a
	// reference to a file that is not there would mislead whoever reads it.
	if status != AttemptError || fileExists(filepath.Join(t.dir, CloseSummaryFile)) {
		a.CloseSummaryRef = CloseSummaryFile
	}
	switch status {
	case AttemptClosed:
		next.RetryCount = 0
		next.Status = TicketClosed
	case AttemptBlocked:
		next.RetryCount++
		next.Status = TicketActive
	}
	if err := t.save(next); err != nil {
		return err
	}
	t.state = next
	return nil
}

// Close releases the lock; the handle cannot save any more. Closing twice is
// harmless.
func (t *Ticket) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lock == nil {
		return nil
	}
	err := t.lock.Close()
	t.lock = nil
	return err
}

func (t *Ticket) closedError() error {
	return fmt.Errorf("ticket %s: the handle is closed and no longer holds the lock", t.id)
}

// save writes st; the caller adopts st only when this succeeds, so the
// handle never shows a state the file does not have.
func (t *Ticket) save(st RetryState) error {
	path := filepath.Join(t.dir, RetryStateFile)
	if err := WriteJSONAtomic(path, st); err != nil {
		return fmt.Errorf("saving retry state %s: %w", path, err)
	}
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// ResetTicket moves ticket id's retry-state.json to
// retry-state.json.bak.<UTC YYYYMMDDTHHMMSSZ> (with .1, .2… appended if that
// name is taken) and returns the new path, so the next attempt starts at 1
// and nothing is lost. It takes the ticket's lock for the rename, so it fails
// with ErrTicketLocked while a run works on the ticket; call it before
// OpenTicket. A missing file gives an error wrapping fs.ErrNotExist.
func ResetTicket(knowledgeDir, id string, now time.Time) (string, error) {
	if err := checkTicketID(id); err != nil {
		return "", err
	}
	dir := TicketDir(knowledgeDir, id)
	path := filepath.Join(dir, RetryStateFile)
	// Checking before locking keeps a reset of an unknown ticket from
	// creating its folder and lock file.
	if _, err := os.Lstat(path); err != nil {
		return "", fmt.Errorf("resetting retry state of %s: %w", id, err)
	}
	lock, err := lockTicket(dir, id)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	base := path + ".bak." + now.UTC().Format("20060102T150405Z")
	backup := base
	for i := 1; ; i++ {
		_, err := os.Lstat(backup)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("resetting retry state of %s: %w", id, err)
		}
		backup = fmt.Sprintf("%s.%d", base, i)
	}
	if err := os.Rename(path, backup); err != nil {
		return "", fmt.Errorf("resetting retry state of %s: %w", id, err)
	}
	if err := syncDir(dir); err != nil {
		return "", fmt.Errorf("resetting retry state of %s: %w", id, err)
	}
	return backup, nil
}
