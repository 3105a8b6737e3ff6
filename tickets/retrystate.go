package tickets

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"time"

	"peal/internal/jsonobj"
	"peal/internal/safefs"
)

// This file holds ticketflow's retry-state schema v1: the values it uses,
// reading a file, and the view of it that callers get. Files are read the
// way ticketflow (tf) reads them: whatever tf accepts, peal accepts too, with
// a warning where it is odd, and rewrites change only what peal means to.

// RetryStateFile is the name of the retry-state file inside a ticket folder.
const RetryStateFile = "retry-state.json"

// RetryStateVersion is the only schema version this code reads and writes.
const RetryStateVersion = 1

// maxRetryStateFile caps what is read of a retry-state file.
const maxRetryStateFile = 16 << 20

// Aggregate statuses of a ticket (RetryState.Status).
const (
	TicketActive  = "active"
	TicketBlocked = "blocked"
	TicketClosed  = "closed"
)

// Statuses of one attempt (Attempt.Status).
const (
	AttemptInProgress = "in_progress"
	AttemptBlocked    = "blocked"
	AttemptClosed     = "closed"
	AttemptError      = "error"
)

// Why an attempt was started (Attempt.Trigger).
const (
	TriggerInitial     = "initial"
	TriggerQualityGate = "quality_gate"
	TriggerManualRetry = "manual_retry"
	TriggerRalphRetry  = "ralph_retry"
)

// IDPattern is the form of a ticket id in tf's schema, e.g. pt-te9b.
const IDPattern = `^[a-z]+-[a-z0-9]+$`

var ticketIDRe = regexp.MustCompile(IDPattern)

// ErrInvalidID is wrapped by every call given an id that does not match
// IDPattern; checking first also keeps an id like "../x" from naming a
// folder outside the knowledge folder.
var ErrInvalidID = errors.New("invalid ticket id")

// ErrUnreadable is matched by the error for a retry-state file that tf would
// not load either: not JSON, not an object, or without one of the members
// the schema requires. A run keeps such a file aside and starts fresh.
var ErrUnreadable = errors.New("unreadable retry state")

// ErrUnusable is matched by the error for a retry-state file that tf loads
// but whose values peal cannot work with (another schema version, attempts
// that are not a list of objects, an attempt number or retry count that is
// not a whole number). A run refuses the ticket and leaves the file alone.
var ErrUnusable = errors.New("retry state peal cannot use")

// fileProblem says what is wrong with a file, in plain words; kind is
// ErrUnreadable or ErrUnusable.
type fileProblem struct {
	kind   error
	reason string
}

func (e *fileProblem) Error() string        { return e.reason }
func (e *fileProblem) Is(target error) bool { return target == e.kind }

func unreadable(format string, args ...any) error {
	return &fileProblem{ErrUnreadable, fmt.Sprintf(format, args...)}
}

func unusable(format string, args ...any) error {
	return &fileProblem{ErrUnusable, fmt.Sprintf(format, args...)}
}

// ValidID reports whether id matches IDPattern.
func ValidID(id string) bool { return ticketIDRe.MatchString(id) }

// ticketDir is the folder of ticket id: <knowledgeDir>/tickets/<id>.
func ticketDir(knowledgeDir, id string) string {
	return filepath.Join(knowledgeDir, "tickets", id)
}

func checkTicketID(id string) error {
	if !ValidID(id) {
		return fmt.Errorf("%w %s: it must match %s", ErrInvalidID, jsonobj.Quote(id), IDPattern)
	}
	return nil
}

// stamp formats a time the way tf writes it: UTC, whole seconds, a Z suffix.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// RetryState is what a retry-state.json says, read leniently: a member that
// is null or missing reads as its zero value. Marshaling it gives the file's
// own text. Warnings say what was odd in the file.
type RetryState struct {
	Version       int       `json:"version"`
	TicketID      string    `json:"ticketId"`
	Attempts      []Attempt `json:"attempts"`
	LastAttemptAt string    `json:"lastAttemptAt"`
	Status        string    `json:"status"`
	RetryCount    int       `json:"retryCount"`

	Warnings []string `json:"-"`
	raw      []byte   // the file's text
}

// Attempt is one run of the workflow on a ticket.
type Attempt struct {
	AttemptNumber   int          `json:"attemptNumber"`
	StartedAt       string       `json:"startedAt"`
	CompletedAt     string       `json:"completedAt,omitempty"`
	Status          string       `json:"status"`
	Trigger         string       `json:"trigger"`
	QualityGate     *QualityGate `json:"qualityGate,omitempty"`
	Escalation      *Escalation  `json:"escalation,omitempty"`
	CloseSummaryRef string       `json:"closeSummaryRef,omitempty"`
}

// QualityGate is the gate's configuration and the counts it saw.
type QualityGate struct {
	FailOn []string `json:"failOn"`
	Counts Counts   `json:"counts"`
}

// Escalation names the model each role uses on an attempt; nil (JSON null)
// means the role keeps its base model.
type Escalation struct {
	Fixer                 *string `json:"fixer"`
	ReviewerSecondOpinion *string `json:"reviewerSecondOpinion"`
	Worker                *string `json:"worker"`
}

// Severities are the names tf counts, in the order it writes them.
var Severities = []string{"Critical", "Major", "Minor", "Warnings", "Suggestions"}

// Counts are the severity counts of a quality gate. peal writes all five,
// as tf does; when reading, a count that is missing or not a whole number
// reads as 0 (the file keeps it as written).
type Counts struct {
	Critical    int `json:"Critical"`
	Major       int `json:"Major"`
	Minor       int `json:"Minor"`
	Warnings    int `json:"Warnings"`
	Suggestions int `json:"Suggestions"`
}

// field is the count of severity name, nil for a name not in Severities.
func (c *Counts) field(name string) *int {
	switch name {
	case "Critical":
		return &c.Critical
	case "Major":
		return &c.Major
	case "Minor":
		return &c.Minor
	case "Warnings":
		return &c.Warnings
	case "Suggestions":
		return &c.Suggestions
	}
	return nil
}

// Of is the count of severity name; 0 for a name not in Severities.
func (c Counts) Of(name string) int {
	if p := c.field(name); p != nil {
		return *p
	}
	return 0
}

// ModelsFor is tf's escalation curve: attempt 2 escalates the fixer, attempt
// 3 and later also the second-opinion reviewer and the worker. An empty model
// name means "not configured" and stays null.
func ModelsFor(n int, fixer, secondOpinion, worker string) Escalation {
	var e Escalation
	if n >= 2 {
		e.Fixer = model(fixer)
	}
	if n >= 3 {
		e.ReviewerSecondOpinion = model(secondOpinion)
		e.Worker = model(worker)
	}
	return e
}

func model(name string) *string {
	if name == "" {
		return nil
	}
	return &name
}

// MarshalJSON gives the file's own text (a RetryState built by hand, which
// has none, marshals its fields).
func (s RetryState) MarshalJSON() ([]byte, error) {
	if s.raw != nil {
		return s.raw, nil
	}
	type plain RetryState
	if s.Attempts == nil {
		s.Attempts = []Attempt{}
	}
	return json.Marshal(plain(s))
}

// Load reads the retry state of ticket id without locking it, for
// read-only use such as showing it. A missing file gives an error wrapping
// fs.ErrNotExist; a file tf would not load either an error matching
// ErrUnreadable; one peal cannot use an error matching ErrUnusable.
func Load(knowledgeDir, id string) (RetryState, error) {
	if err := checkTicketID(id); err != nil {
		return RetryState{}, err
	}
	dir, err := openTicketDir(knowledgeDir, id)
	if err != nil {
		return RetryState{}, err
	}
	defer dir.Close()
	data, err := readRetryFile(dir)
	if err != nil {
		return RetryState{}, err
	}
	st, _, err := decodeRetryState(data, id)
	if err != nil {
		return RetryState{}, fmt.Errorf("retry state %s: %w", dir.Join(RetryStateFile), err)
	}
	return st, nil
}

// openTicketDir opens the existing folder <knowledgeDir>/tickets/<id>
// without following a link at tickets or at the ticket's folder: a link
// there could lead peal to write outside the store. The store itself is the
// configured folder, links and all. (Store opens and creates the
// folders of the tickets a run works on.)
func openTicketDir(knowledgeDir, id string) (*safefs.Dir, error) {
	tickets, err := openTicketsDir(knowledgeDir, false)
	if err != nil {
		return nil, storeError(id, err)
	}
	defer tickets.Close()
	dir, err := tickets.Sub(id, false)
	if err != nil {
		return nil, storeError(id, err)
	}
	return dir, nil
}

// openTicketsDir opens <knowledgeDir>/tickets, refusing a link there.
func openTicketsDir(knowledgeDir string, create bool) (*safefs.Dir, error) {
	root, err := safefs.OpenDir(knowledgeDir, create)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return root.Sub("tickets", create)
}

func storeError(id string, err error) error {
	var nr *safefs.NotRegularError
	if errors.As(err, &nr) {
		return fmt.Errorf("ticket %s: %w: peal does not follow links in the retry-state store; replace it with a folder, or remove it", id, err)
	}
	return fmt.Errorf("ticket %s: %w", id, err)
}

// readRetryFile reads retry-state.json from a ticket folder. A file larger
// than the cap is unreadable; a special file there is an error.
func readRetryFile(dir *safefs.Dir) ([]byte, error) {
	data, err := dir.ReadFile(RetryStateFile, maxRetryStateFile)
	var nr *safefs.NotRegularError
	var tl *safefs.TooLargeError
	switch {
	case errors.As(err, &nr):
		return nil, fmt.Errorf("%w: peal neither reads it nor writes through it; remove it", err)
	case errors.As(err, &tl):
		return nil, fmt.Errorf("retry state %s: %w", dir.Join(RetryStateFile), unreadable("it is larger than %d MiB", tl.Limit>>20))
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("retry state %s cannot be read: %w", dir.Join(RetryStateFile), cause(err))
	}
	return data, err
}

// requiredMembers are the members whose absence makes tf ignore a file.
var requiredMembers = []string{"version", "ticketId", "attempts", "lastAttemptAt", "status"}

// decodeRetryState reads a retry-state file of ticket id: the view, and the
// document for a rewrite. Its errors say why in plain words and match
// ErrUnreadable or ErrUnusable.
func decodeRetryState(data []byte, id string) (RetryState, *jsonobj.Object, error) {
	doc, err := jsonobj.Parse(data)
	if err != nil {
		return RetryState{}, nil, unreadable("%s", jsonobj.Problem(data, err))
	}
	for _, k := range requiredMembers {
		if !doc.Has(k) {
			return RetryState{}, nil, unreadable("it has no %s", k)
		}
	}
	st := RetryState{raw: data}
	warn := func(format string, args ...any) { st.Warnings = append(st.Warnings, fmt.Sprintf(format, args...)) }
	switch v, k := jsonobj.IntOf(doc, "version"); {
	case k == jsonobj.OK && v == RetryStateVersion:
		st.Version = v
	case k == jsonobj.Null:
		st.Version = RetryStateVersion
		warn("its version is null; read as version %d", RetryStateVersion)
	default:
		raw, _ := doc.Get("version")
		return RetryState{}, nil, unusable("it has schema version %s, and this peal knows version %d only", jsonobj.Quote(string(raw)), RetryStateVersion)
	}
	switch s, k := jsonobj.StringOf(doc, "ticketId"); {
	case k == jsonobj.OK && s == id:
		st.TicketID = s
	case k == jsonobj.OK:
		st.TicketID = s
		warn("it names ticket %s, but it is the file of ticket %s", jsonobj.Quote(s), id)
	default:
		st.TicketID = id
		warn("its ticketId is not a string; read as %s, its folder's", id)
	}
	items, k := jsonobj.ArrayOf(doc, "attempts")
	switch k {
	case jsonobj.Null:
		warn("its attempts are null; read as none")
	case jsonobj.Wrong:
		return RetryState{}, nil, unusable("its attempts are not a list")
	}
	st.Attempts = make([]Attempt, 0, len(items))
	for i, item := range items {
		o, err := jsonobj.Parse(item)
		if err != nil {
			return RetryState{}, nil, unusable("attempt %d of its list is not an object", i+1)
		}
		a, err := readAttempt(o, i, warn)
		if err != nil {
			return RetryState{}, nil, err
		}
		st.Attempts = append(st.Attempts, a)
	}
	st.LastAttemptAt, _ = jsonobj.StringOf(doc, "lastAttemptAt")
	st.Status, _ = jsonobj.StringOf(doc, "status")
	n, k := jsonobj.IntOf(doc, "retryCount")
	if k == jsonobj.Wrong || n < 0 {
		raw, _ := doc.Get("retryCount")
		return RetryState{}, nil, unusable("its retryCount %s is not a whole number of at least 0", jsonobj.Quote(string(raw)))
	}
	st.RetryCount = n
	return st, doc, nil
}

// readAttempt reads the attempt at position i (0-based) of the list.
func readAttempt(o *jsonobj.Object, i int, warn func(string, ...any)) (Attempt, error) {
	var a Attempt
	n, k := jsonobj.IntOf(o, "attemptNumber")
	switch {
	case k == jsonobj.OK && n >= 1:
		a.AttemptNumber = n
	case k == jsonobj.Missing || k == jsonobj.Null:
		a.AttemptNumber = i + 1
		warn("attempt %d of its list has no attemptNumber; read as %d", i+1, i+1)
	default:
		raw, _ := o.Get("attemptNumber")
		return a, unusable("attempt %d of its list has attemptNumber %s, not a whole number of at least 1", i+1, jsonobj.Quote(string(raw)))
	}
	a.StartedAt, _ = jsonobj.StringOf(o, "startedAt")
	a.CompletedAt, _ = jsonobj.StringOf(o, "completedAt")
	a.Status, _ = jsonobj.StringOf(o, "status")
	a.Trigger, _ = jsonobj.StringOf(o, "trigger")
	a.CloseSummaryRef, _ = jsonobj.StringOf(o, "closeSummaryRef")
	if g, k := jsonobj.ObjectOf(o, "qualityGate"); k == jsonobj.OK {
		a.QualityGate = readGate(g)
	}
	if e, k := jsonobj.ObjectOf(o, "escalation"); k == jsonobj.OK {
		a.Escalation = &Escalation{}
		for _, role := range []struct {
			name string
			to   **string
		}{{"fixer", &a.Escalation.Fixer}, {"reviewerSecondOpinion", &a.Escalation.ReviewerSecondOpinion}, {"worker", &a.Escalation.Worker}} {
			if s, k := jsonobj.StringOf(e, role.name); k == jsonobj.OK {
				*role.to = &s
			}
		}
	}
	return a, nil
}

func readGate(o *jsonobj.Object) *QualityGate {
	g := &QualityGate{FailOn: []string{}}
	items, _ := jsonobj.ArrayOf(o, "failOn")
	for _, it := range items {
		var s string
		if json.Unmarshal(it, &s) == nil {
			g.FailOn = append(g.FailOn, s)
		}
	}
	if c, k := jsonobj.ObjectOf(o, "counts"); k == jsonobj.OK {
		for _, name := range Severities {
			*g.Counts.field(name), _ = jsonobj.IntOf(c, name)
		}
	}
	return g
}

// freshDoc is the state of a ticket without a file, as tf creates it.
func freshDoc(id string, now time.Time) *jsonobj.Object {
	o := &jsonobj.Object{}
	o.Set("version", RetryStateVersion)
	o.Set("ticketId", id)
	o.Set("attempts", []any{})
	o.Set("lastAttemptAt", stamp(now))
	o.Set("status", TicketActive)
	o.Set("retryCount", 0)
	return o
}

// Exhausted reports whether the ticket has used its retries: its last attempt
// was blocked and retryCount reached maxRetries. A run with escalation on
// skips such a ticket. It looks at the last attempt rather than the
// aggregate status because tf keeps the aggregate "active" after a blocked
// close.
func (s RetryState) Exhausted(maxRetries int) bool {
	return s.LastStatus() == AttemptBlocked && s.RetryCount >= maxRetries
}

// LastStatus is the status of the last attempt, "" when there is none.
func (s RetryState) LastStatus() string {
	if n := len(s.Attempts); n > 0 {
		return s.Attempts[n-1].Status
	}
	return ""
}

// NextAttempt is the number the next run's attempt gets: an attempt still in
// progress is resumed with its number.
func (s RetryState) NextAttempt() int {
	if n := len(s.Attempts); n > 0 && s.Attempts[n-1].Status == AttemptInProgress {
		return s.Attempts[n-1].AttemptNumber
	}
	return len(s.Attempts) + 1
}

// cause is the innermost error, e.g. "permission denied" for a *PathError
// whose path the message already names.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
