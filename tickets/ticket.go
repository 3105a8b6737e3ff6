package tickets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"peal/internal/jsonobj"
	"peal/internal/safefs"
)

// This file is the attempt lifecycle of one ticket: lock it, start or resume
// an attempt, record how the attempt ended, and reset.
//
// ticketflow writes retry-state.json without any lock, so the file is read
// again under peal's lock before every write, and a write changes only the
// attempt of this run (and the aggregate members its result moves): what
// another program added meanwhile stays.

// LockFile is the lock file inside a ticket folder. It is left in place when
// the lock is released: deleting it would let a later process lock a new file
// of the same name while an older one still holds the deleted one.
const LockFile = "retry-state.lock"

// The ticket artifacts the detection reads.
const (
	CloseSummaryFile = "close-summary.md"
	ReviewFile       = "review.md"
)

// ErrLocked is wrapped when another holder (another peal process, or
// another task of the same run) has the ticket's lock.
var ErrLocked = errors.New("ticket locked")

// Ticket is the retry state of one ticket, held under an exclusive lock from
// Open until Close, so that two peal runs never interleave their
// attempts.
type Ticket struct {
	mu   sync.Mutex // State may be read while the runner completes an attempt
	id   string
	dir  *safefs.Dir
	lock *safefs.Lock // nil once closed
	warn func(string)
	data []byte    // the file as last read or written; nil: there is none
	mine *attempt  // the attempt this handle began, until it is completed
	now  time.Time // when the handle was opened: the stamp of a fresh state
	// summary is the text of close-summary.md as this handle wrote (or
	// found already there) for its attempt; "" until then, when a file
	// there is an earlier attempt's or another program's. CloseStatus
	// reads the verdict from it.
	summary string
}

// attempt identifies the attempt a handle began, to find it again after
// another program changed the file.
type attempt struct {
	number    int
	startedAt string
	raw       json.RawMessage // as this handle last wrote it
}

// Store is a retry-state store whose tickets folder is opened once
// and then kept open, for a run that opens many tickets. Its methods are
// safe for concurrent use.
type Store struct {
	knowledgeDir string
	mu           sync.Mutex
	tickets      *safefs.Dir // nil until the first ticket, or after a failure
}

// NewStore is the store in knowledgeDir; nothing is opened yet.
func NewStore(knowledgeDir string) *Store {
	return &Store{knowledgeDir: knowledgeDir}
}

// Close closes the tickets folder; the store opens it again if need be.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tickets != nil {
		s.tickets.Close()
		s.tickets = nil
	}
}

// ticketDir opens (creating it) the folder of ticket id, and tells whether
// it was created just now. When the kept tickets folder fails (it was
// removed, say), the store opens it afresh once.
func (s *Store) ticketDir(id string) (*safefs.Dir, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for try := 1; ; try++ {
		if s.tickets == nil {
			tickets, err := openTicketsDir(s.knowledgeDir, true)
			if err != nil {
				return nil, false, storeError(id, err)
			}
			s.tickets = tickets
		}
		dir, created, err := s.tickets.MakeSub(id)
		if err == nil {
			return dir, created, nil
		}
		s.tickets.Close()
		s.tickets = nil
		if try == 2 {
			return nil, false, storeError(id, err)
		}
	}
}

// Open is Open of the package, in this store.
func (s *Store) Open(id string, now time.Time, warn func(string)) (*Ticket, error) {
	if err := checkTicketID(id); err != nil {
		return nil, err
	}
	dir, created, err := s.ticketDir(id)
	if err != nil {
		return nil, err
	}
	lock, err := dir.Lock(LockFile)
	if err != nil {
		dir.Close()
		if errors.Is(err, safefs.ErrLocked) {
			return nil, fmt.Errorf("%w: %s is being worked on by another peal run or task, which holds %s", ErrLocked, id, dir.Join(LockFile))
		}
		return nil, fmt.Errorf("lock of ticket %s: %w", id, err)
	}
	if warn == nil {
		warn = func(string) {}
	}
	t := &Ticket{id: id, dir: dir, lock: lock, warn: warn, now: now}
	// A folder made just now holds no temporary file of a killed save.
	if !created {
		if _, err := dir.RemoveTemps(RetryStateFile, CloseSummaryFile); err != nil {
			t.Close()
			return nil, fmt.Errorf("ticket %s: %w", id, err)
		}
	}
	if _, _, err := t.reload(now); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// reload reads the file again (the caller holds mu and the lock) and
// returns the view and the document to change. An unreadable file is kept
// aside; warnings are told only when the text changed since the last read.
func (t *Ticket) reload(now time.Time) (RetryState, *jsonobj.Object, error) {
	data, err := readRetryFile(t.dir)
	if errors.Is(err, fs.ErrNotExist) {
		t.data = nil
		doc := freshDoc(t.id, t.now)
		st, _, _ := decodeRetryState(doc.File(), t.id)
		return st, doc, nil
	}
	if err != nil && !errors.Is(err, ErrUnreadable) {
		return RetryState{}, nil, err
	}
	var st RetryState
	var doc *jsonobj.Object
	if err == nil {
		st, doc, err = decodeRetryState(data, t.id)
	}
	path := t.dir.Join(RetryStateFile)
	switch {
	case errors.Is(err, ErrUnusable):
		return RetryState{}, nil, fmt.Errorf("retry state %s cannot be used: %w; ticketflow reads it, but peal would have to guess: correct it, or move it aside with `peal retry-state reset %s`", path, err, t.id)
	case err != nil:
		aside, kerr := t.dir.KeepUnreadable(RetryStateFile, now)
		if kerr == nil {
			kerr = t.dir.Sync()
		}
		if kerr != nil {
			return RetryState{}, nil, fmt.Errorf("retry state %s is unreadable (%v) and cannot be moved aside: %w", path, err, kerr)
		}
		t.warn(fmt.Sprintf("retry state %s is unreadable (%v): kept it as %s and started fresh", path, problemOf(err), aside))
		t.data = nil
		doc := freshDoc(t.id, now)
		st, _, _ := decodeRetryState(doc.File(), t.id)
		return st, doc, nil
	}
	if !bytes.Equal(data, t.data) {
		for _, w := range st.Warnings {
			t.warn(fmt.Sprintf("retry state %s: %s", path, w))
		}
	}
	t.data = data
	return st, doc, nil
}

// problemOf is the reason of a file problem without the path around it.
func problemOf(err error) string {
	var fp *fileProblem
	if errors.As(err, &fp) {
		return fp.reason
	}
	return err.Error()
}

// ID is the ticket id.
func (t *Ticket) ID() string { return t.id }

// Dir is the ticket folder, where close-summary.md and review.md live.
func (t *Ticket) Dir() string { return t.dir.Path() }

// State returns the retry state as last read or written.
func (t *Ticket) State() RetryState {
	t.mu.Lock()
	defer t.mu.Unlock()
	data := t.data
	if data == nil {
		data = freshDoc(t.id, t.now).File()
	}
	st, _, _ := decodeRetryState(data, t.id)
	return st
}

// Exhausted reports whether the ticket has used its retries (see
// RetryState.Exhausted).
func (t *Ticket) Exhausted(maxRetries int) bool {
	return t.State().Exhausted(maxRetries)
}

// Begin starts an attempt and saves. An attempt still in progress (its run
// crashed or was interrupted) is resumed with its number and start time, so
// an interruption does not cost a retry. Otherwise attempt len+1 starts, its
// trigger saying why: the first attempt, a blocked quality gate, or a manual
// re-run after a close or an error. escalation gives the models for an
// attempt number (nil means no escalation, all nulls); it is asked again on a
// resume, so a changed configuration applies. The save is not synced to
// disk: a crash that loses it only loses the mark of work that had not ended.
func (t *Ticket) Begin(now time.Time, escalation func(attemptNumber int) Escalation) (Attempt, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lock == nil {
		return Attempt{}, false, t.closedError()
	}
	var view Attempt
	var resumed bool
	var mine *attempt
	err := t.update(now, false, func(st RetryState, doc *jsonobj.Object) error {
		items, _ := jsonobj.ArrayOf(doc, "attempts")
		n := len(st.Attempts)
		resumed = n > 0 && st.Attempts[n-1].Status == AttemptInProgress
		var a *jsonobj.Object
		var number int
		var started string
		if resumed {
			number, started = st.Attempts[n-1].AttemptNumber, st.Attempts[n-1].StartedAt
			a, _ = jsonobj.Parse(items[n-1])
		} else {
			trigger := TriggerManualRetry
			switch {
			case n == 0:
				trigger = TriggerInitial
			case st.Attempts[n-1].Status == AttemptBlocked:
				trigger = TriggerQualityGate
			}
			number, started = n+1, stamp(now)
			a = &jsonobj.Object{}
			a.Set("attemptNumber", number)
			a.Set("startedAt", started)
			a.Set("status", AttemptInProgress)
			a.Set("trigger", trigger)
			items = append(items, nil)
		}
		var e Escalation
		if escalation != nil {
			e = escalation(number)
		}
		setEscalation(a, e)
		items[len(items)-1] = a.Compact()
		doc.SetRaw("attempts", jsonobj.Array(items))
		doc.Set("lastAttemptAt", stamp(now))
		doc.Set("status", TicketActive)
		mine = &attempt{number: number, startedAt: started, raw: a.Compact()}
		var err error
		view, err = readAttempt(a, len(items)-1, func(string, ...any) {})
		return err
	})
	if err != nil {
		return Attempt{}, false, err
	}
	t.mine = mine
	return view, resumed, nil
}

// setEscalation records the models of an attempt. Members another program
// added to an escalation object stay.
func setEscalation(a *jsonobj.Object, e Escalation) {
	eo, k := jsonobj.ObjectOf(a, "escalation")
	if k != jsonobj.OK {
		a.Set("escalation", e)
		return
	}
	eo.Set("fixer", e.Fixer)
	eo.Set("reviewerSecondOpinion", e.ReviewerSecondOpinion)
	eo.Set("worker", e.Worker)
	a.SetRaw("escalation", eo.Compact())
}

// Complete records how this handle's attempt ended and saves durably, with
// whatever the handle wrote since Begin (a close summary). status is
// AttemptClosed (retry count back to 0, ticket closed), AttemptBlocked (one
// more retry used, ticket stays active as tf keeps it) or AttemptError (the
// run failed before a verdict: nothing is counted). gate, when not nil, is
// recorded as the attempt's quality gate. When another program added
// attempts after this one, the ticket's status is theirs to say and stays.
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
	if t.mine == nil {
		return fmt.Errorf("completing attempt of %s: this run has no attempt in progress", t.id)
	}
	var warnings []string
	err := t.update(now, true, func(st RetryState, doc *jsonobj.Object) error {
		warnings = warnings[:0]
		items, _ := jsonobj.ArrayOf(doc, "attempts")
		i := -1
		for j := len(st.Attempts) - 1; j >= 0; j-- {
			if st.Attempts[j].AttemptNumber == t.mine.number && st.Attempts[j].StartedAt == t.mine.startedAt {
				i = j
				break
			}
		}
		var a *jsonobj.Object
		if i < 0 {
			a, _ = jsonobj.Parse(t.mine.raw)
			a.Set("attemptNumber", len(items)+1)
			warnings = append(warnings, fmt.Sprintf("retry state %s no longer holds attempt %d of this run (another program rewrote it): recorded it again as attempt %d",
				t.dir.Join(RetryStateFile), t.mine.number, len(items)+1))
			items = append(items, nil)
			i = len(items) - 1
		} else {
			if s := st.Attempts[i].Status; s != AttemptInProgress {
				warnings = append(warnings, fmt.Sprintf("retry state %s: attempt %d of this run was ended by another program as %s; recording this run's result %s",
					t.dir.Join(RetryStateFile), t.mine.number, jsonobj.Quote(s), status))
			}
			a, _ = jsonobj.Parse(items[i])
		}
		a.Set("completedAt", stamp(now))
		a.Set("status", status)
		if gate != nil {
			g := *gate
			if g.FailOn == nil {
				g.FailOn = []string{}
			}
			a.Set("qualityGate", g)
		}
		// An errored run usually stopped before writing a close summary: a
		// file found there is an earlier attempt's, whose verdict must not
		// be read as this attempt's.
		if status != AttemptError || t.summary != "" {
			a.Set("closeSummaryRef", CloseSummaryFile)
		}
		items[i] = a.Compact()
		doc.SetRaw("attempts", jsonobj.Array(items))
		last := i == len(items)-1
		switch status {
		case AttemptClosed:
			if last {
				doc.Set("retryCount", 0)
				doc.Set("status", TicketClosed)
			}
		case AttemptBlocked:
			n, _ := jsonobj.IntOf(doc, "retryCount")
			doc.Set("retryCount", n+1)
			if last {
				doc.Set("status", TicketActive)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, w := range warnings {
		t.warn(w)
	}
	t.mine = nil
	return nil
}

// maxRetries bounds how often update starts over because another program
// wrote the file meanwhile; after that, its write goes through.
const maxRetries = 20

// update changes the file under the lock as change says, starting from the
// file as this handle last read or wrote it: it edits the document, writes
// the result to a synced temporary file and, if the file is still what the
// edit started from, renames it into place. If another program (ticketflow
// takes no lock) wrote the file meanwhile, it reads that program's version
// and starts over from it, so that only a write landing between the last
// check and the rename can be lost. The check reads the file just before the
// rename, which is why the edit need not read it first as well. sync also
// makes the folder durable, with every write the handle did in it.
func (t *Ticket) update(now time.Time, sync bool, change func(st RetryState, doc *jsonobj.Object) error) error {
	path := t.dir.Join(RetryStateFile)
	for try := 1; ; try++ {
		var st RetryState
		var doc *jsonobj.Object
		var err error
		if try == 1 {
			st, doc, err = t.cached()
		} else {
			st, doc, err = t.reload(now)
		}
		if err != nil {
			return err
		}
		base := t.data
		if err := change(st, doc); err != nil {
			return err
		}
		data := doc.File()
		if bytes.Equal(data, base) {
			return nil // nothing to change: no write
		}
		p, err := t.dir.Prepare(RetryStateFile, data)
		if err != nil {
			return fmt.Errorf("saving retry state %s: %w", path, err)
		}
		current, err := t.dir.ReadFile(RetryStateFile, maxRetryStateFile)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			p.Abort()
			return fmt.Errorf("saving retry state %s: %w", path, err)
		}
		if !bytes.Equal(current, base) && try < maxRetries {
			p.Abort()
			continue
		}
		err = p.Commit()
		if err == nil && sync {
			err = t.dir.Sync()
		}
		if err != nil {
			return fmt.Errorf("saving retry state %s: %w", path, err)
		}
		t.data = data
		return nil
	}
}

// cached is the view and document of the file as this handle last read or
// wrote it (a fresh state when there was none).
func (t *Ticket) cached() (RetryState, *jsonobj.Object, error) {
	data := t.data
	if data == nil {
		data = freshDoc(t.id, t.now).File()
	}
	st, doc, err := decodeRetryState(data, t.id)
	if err != nil {
		// What this handle read or wrote decoded before; should it not
		// now, the file is read again.
		return RetryState{}, nil, fmt.Errorf("retry state %s: %w", t.dir.Join(RetryStateFile), err)
	}
	return st, doc, nil
}

// WriteCloseSummary writes close-summary.md in the shape tf's detection
// reads (see CloseSummary). It is written atomically, so detection never
// sees half a file, and made durable by Complete.
func (t *Ticket) WriteCloseSummary(blocked bool, counts Counts, checks ...FailedCheck) error {
	text, err := CloseSummary(blocked, counts, checks...)
	if err != nil {
		return fmt.Errorf("close summary of %s: %w", t.id, err)
	}
	if old, err := t.dir.ReadFile(CloseSummaryFile, maxArtifact); err == nil && string(old) == text {
		t.summary = text
		return nil // the same summary as the last attempt's: no write
	}
	if err := t.dir.WriteFile(CloseSummaryFile, []byte(text)); err != nil {
		return fmt.Errorf("close summary of %s: %w", t.id, err)
	}
	t.summary = text
	return nil
}

// CloseStatus runs tf's close detection on the ticket's close-summary.md.
// When this handle wrote the file, the detection runs on the text it wrote:
// that text is this attempt's verdict, and tf reads the same bytes.
func (t *Ticket) CloseStatus() (CloseResult, error) {
	if t.summary != "" {
		return closeStatus(t.summary), nil
	}
	data, err := t.dir.ReadFile(CloseSummaryFile, maxArtifact)
	if errors.Is(err, fs.ErrNotExist) {
		return CloseResult{Status: "unknown"}, nil
	}
	if err != nil {
		return CloseResult{}, err
	}
	content, err := artifactText(t.dir.Join(CloseSummaryFile), data)
	if err != nil {
		return CloseResult{}, err
	}
	return closeStatus(content), nil
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
	t.dir.Close()
	t.lock = nil
	return err
}

func (t *Ticket) closedError() error {
	return fmt.Errorf("ticket %s: the handle is closed and no longer holds the lock", t.id)
}

// Reset moves ticket id's retry-state.json to
// retry-state.json.bak.<UTC YYYYMMDDTHHMMSSZ> (with .1, .2… appended if that
// name is taken) and returns the new path, so the next attempt starts at 1
// and nothing is lost. It takes the ticket's lock for the rename, so it fails
// with ErrLocked while a run works on the ticket; call it before
// Open. A missing file gives an error wrapping fs.ErrNotExist.
func Reset(knowledgeDir, id string, now time.Time) (string, error) {
	if err := checkTicketID(id); err != nil {
		return "", err
	}
	// Opening without creating keeps a reset of an unknown ticket from
	// creating its folder and lock file.
	dir, err := openTicketDir(knowledgeDir, id)
	if err != nil {
		return "", fmt.Errorf("resetting retry state of %s: %w", id, err)
	}
	defer dir.Close()
	if _, err := dir.Lstat(RetryStateFile); err != nil {
		return "", fmt.Errorf("resetting retry state of %s: %w", id, err)
	}
	lock, err := dir.Lock(LockFile)
	if errors.Is(err, safefs.ErrLocked) {
		return "", fmt.Errorf("%w: %s is being worked on by a peal run, which holds %s", ErrLocked, id, dir.Join(LockFile))
	}
	if err != nil {
		return "", fmt.Errorf("resetting retry state of %s: %w", id, err)
	}
	defer lock.Close()
	backup, err := dir.KeepAside(RetryStateFile, RetryStateFile+".bak."+safefs.Stamp(now))
	if err == nil {
		err = dir.Sync()
	}
	if err != nil {
		return "", fmt.Errorf("resetting retry state of %s: %w", id, err)
	}
	return backup, nil
}

// CheckStore makes sure that the retry-state store can be written to,
// creating <knowledgeDir>/tickets, so that a store peal cannot write is found
// before any agent works.
func CheckStore(knowledgeDir string) error {
	fail := func(err error) error {
		var full *safefs.FullError
		if errors.As(err, &full) {
			return full
		}
		return fmt.Errorf("retry-state store %s cannot be written to (%w): fix its permissions, or choose another store (knowledge_dir, --knowledge-dir)", knowledgeDir, cause(err))
	}
	root, err := safefs.OpenDir(knowledgeDir, true)
	if err != nil {
		return fail(err)
	}
	defer root.Close()
	tickets, err := root.Sub("tickets", true)
	if err != nil {
		var nr *safefs.NotRegularError
		if errors.As(err, &nr) {
			return fmt.Errorf("retry-state store: %w: peal does not follow links in the store; replace it with a folder, or remove it", err)
		}
		return fail(err)
	}
	defer tickets.Close()
	if err := tickets.CheckWritable(); err != nil {
		return fail(err)
	}
	return nil
}
