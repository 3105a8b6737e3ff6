package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"
)

// This file holds ticketflow's retry-state schema v1: the types, their JSON
// form (the same member names and values tf writes, so that tf and peal can
// take turns on one ticket) and reading a file back.

// RetryStateFile is the name of the retry-state file inside a ticket folder.
const RetryStateFile = "retry-state.json"

// RetryStateVersion is the only schema version this code reads and writes.
const RetryStateVersion = 1

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

// TicketIDPattern is the form of a ticket id in tf's schema, e.g. pt-te9b.
const TicketIDPattern = `^[a-z]+-[a-z0-9]+$`

var ticketIDRe = regexp.MustCompile(TicketIDPattern)

// ErrInvalidTicketID is wrapped by every call given an id that does not match
// TicketIDPattern; checking first also keeps an id like "../x" from naming a
// folder outside the knowledge folder.
var ErrInvalidTicketID = errors.New("invalid ticket id")

// ErrUnreadable is wrapped when a retry-state file exists but is not one this
// code can trust: not JSON, a required member missing or of the wrong type,
// a version other than 1, or another ticket's id.
var ErrUnreadable = errors.New("unreadable retry state")

// ValidTicketID reports whether id matches TicketIDPattern.
func ValidTicketID(id string) bool { return ticketIDRe.MatchString(id) }

// TicketDir is the folder of ticket id: <knowledgeDir>/tickets/<id>.
func TicketDir(knowledgeDir, id string) string {
	return filepath.Join(knowledgeDir, "tickets", id)
}

func checkTicketID(id string) error {
	if !ValidTicketID(id) {
		return fmt.Errorf("%w %q: it must match %s", ErrInvalidTicketID, id, TicketIDPattern)
	}
	return nil
}

// stamp formats a time the way tf writes it: UTC, whole seconds, a Z suffix.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// RetryState is the content of retry-state.json. Timestamps stay strings so
// that whatever tf wrote is written back unchanged.
type RetryState struct {
	Version       int       `json:"version"`
	TicketID      string    `json:"ticketId"`
	Attempts      []Attempt `json:"attempts"`
	LastAttemptAt string    `json:"lastAttemptAt"`
	Status        string    `json:"status"`
	RetryCount    int       `json:"retryCount"`

	extra extras // members a newer tf may write; kept so saving does not drop them
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

	extra extras
}

// QualityGate is the gate's configuration and the counts it saw.
type QualityGate struct {
	FailOn []string `json:"failOn"`
	Counts Counts   `json:"counts"`

	extra extras
}

// Escalation names the model each role uses on an attempt; nil (JSON null)
// means the role keeps its base model.
type Escalation struct {
	Fixer                 *string `json:"fixer"`
	ReviewerSecondOpinion *string `json:"reviewerSecondOpinion"`
	Worker                *string `json:"worker"`

	extra extras
}

// severities are the names tf counts, in the order it writes them.
var severities = []string{"Critical", "Major", "Minor", "Warnings", "Suggestions"}

// Counts are the severity counts recorded with a quality gate. All five are
// written, as tf does. Members tf may add under other names (its review.md
// detection keys counts by the failOn spelling, e.g. "critical") are kept
// for the round trip. A count that is not an integer fitting an int makes
// the file unreadable; tf's counts are small, and the detection, which can
// meet any number, reports SeverityCounts instead.
type Counts struct {
	Critical    int `json:"Critical"`
	Major       int `json:"Major"`
	Minor       int `json:"Minor"`
	Warnings    int `json:"Warnings"`
	Suggestions int `json:"Suggestions"`

	extra extras
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

// LoadRetryState reads the retry state of ticket id without locking it, for
// read-only use such as showing it. A missing file gives an error wrapping
// fs.ErrNotExist; an unreadable one an error wrapping ErrUnreadable.
func LoadRetryState(knowledgeDir, id string) (RetryState, error) {
	if err := checkTicketID(id); err != nil {
		return RetryState{}, err
	}
	path := filepath.Join(TicketDir(knowledgeDir, id), RetryStateFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return RetryState{}, fmt.Errorf("retry state of %s: %w", id, err)
	}
	st, err := decodeRetryState(data, id)
	if err != nil {
		return RetryState{}, fmt.Errorf("retry state %s: %w (%v)", path, ErrUnreadable, err)
	}
	return st, nil
}

// requiredMembers are the members the schema requires at the top level.
var requiredMembers = []string{"version", "ticketId", "attempts", "lastAttemptAt", "status"}

// decodeRetryState parses a retry-state file for ticket id. Its errors say
// why in plain words; callers wrap them with ErrUnreadable.
func decodeRetryState(data []byte, id string) (RetryState, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return RetryState{}, err
	}
	if top == nil {
		return RetryState{}, errors.New("it is null, not an object")
	}
	for _, k := range requiredMembers {
		if v, ok := top[k]; !ok || string(v) == "null" {
			return RetryState{}, fmt.Errorf("it has no %s", k)
		}
	}
	var st RetryState
	if err := json.Unmarshal(data, &st); err != nil {
		return RetryState{}, err
	}
	if st.Version != RetryStateVersion {
		return RetryState{}, fmt.Errorf("it has schema version %d, and only version %d is understood", st.Version, RetryStateVersion)
	}
	if st.TicketID != id {
		return RetryState{}, fmt.Errorf("it belongs to ticket %q, not %q", st.TicketID, id)
	}
	return st, nil
}

// extras holds the members of a JSON object that schema v1 does not name,
// as one compact JSON object ("" when there are none). Keeping them as a
// string keeps Counts and Escalation comparable and copies cheap.
type extras string

// The JSON methods below decode and encode through a method-less view of
// each type (so they do not call themselves) and carry the extras along.

func (s *RetryState) UnmarshalJSON(data []byte) error {
	type plain RetryState
	*s = RetryState{}
	var err error
	s.extra, err = decodeObject(data, (*plain)(s))
	return err
}

func (s RetryState) MarshalJSON() ([]byte, error) {
	type plain RetryState
	if s.Attempts == nil {
		s.Attempts = []Attempt{} // the schema wants an array, never null
	}
	return encodeObject(plain(s), s.extra)
}

func (a *Attempt) UnmarshalJSON(data []byte) error {
	type plain Attempt
	*a = Attempt{}
	var err error
	a.extra, err = decodeObject(data, (*plain)(a))
	return err
}

func (a Attempt) MarshalJSON() ([]byte, error) {
	type plain Attempt
	return encodeObject(plain(a), a.extra)
}

func (g *QualityGate) UnmarshalJSON(data []byte) error {
	type plain QualityGate
	*g = QualityGate{}
	var err error
	g.extra, err = decodeObject(data, (*plain)(g))
	return err
}

func (g QualityGate) MarshalJSON() ([]byte, error) {
	type plain QualityGate
	if g.FailOn == nil {
		g.FailOn = []string{}
	}
	return encodeObject(plain(g), g.extra)
}

func (c *Counts) UnmarshalJSON(data []byte) error {
	type plain Counts
	*c = Counts{}
	var err error
	c.extra, err = decodeObject(data, (*plain)(c))
	return err
}

func (c Counts) MarshalJSON() ([]byte, error) {
	type plain Counts
	return encodeObject(plain(c), c.extra)
}

func (e *Escalation) UnmarshalJSON(data []byte) error {
	type plain Escalation
	*e = Escalation{}
	var err error
	e.extra, err = decodeObject(data, (*plain)(e))
	return err
}

func (e Escalation) MarshalJSON() ([]byte, error) {
	type plain Escalation
	return encodeObject(plain(e), e.extra)
}

// decodeObject fills into (a pointer to a struct) from the members whose
// names match its json tags exactly, and returns the other members.
// encoding/json alone would also accept "TicketID" for "ticketId"; matching
// exactly keeps such a member as an extra instead of letting it overwrite.
func decodeObject(data []byte, into any) (extras, error) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return "", err
	}
	known := jsonNames(reflect.TypeOf(into).Elem())
	mine := map[string]json.RawMessage{}
	others := map[string]json.RawMessage{}
	for k, v := range all {
		if slices.Contains(known, k) {
			mine[k] = v
		} else {
			others[k] = v
		}
	}
	b, err := json.Marshal(mine)
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(b, into); err != nil {
		return "", err
	}
	if len(others) == 0 {
		return "", nil
	}
	x, err := json.Marshal(others) // sorted by name, compact
	return extras(x), err
}

// encodeObject marshals v (a struct) and appends the extra members.
func encodeObject(v any, x extras) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil || x == "" {
		return b, err
	}
	if string(b) == "{}" {
		return []byte(x), nil
	}
	// Both are objects: drop b's closing brace and x's opening one.
	return append(append(b[:len(b)-1], ','), x[1:]...), nil
}

// jsonNames lists the member names of a struct type's json tags.
func jsonNames(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "" || tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		names = append(names, name)
	}
	return names
}

// clone returns a deep copy, so that a State() snapshot shares nothing with
// the handle that keeps changing.
func (s RetryState) clone() RetryState {
	c := s
	c.Attempts = make([]Attempt, len(s.Attempts))
	for i, a := range s.Attempts {
		c.Attempts[i] = a.clone()
	}
	return c
}

func (a Attempt) clone() Attempt {
	c := a
	if a.QualityGate != nil {
		g := a.QualityGate.clone()
		c.QualityGate = &g
	}
	if a.Escalation != nil {
		e := a.Escalation.clone()
		c.Escalation = &e
	}
	return c
}

func (g QualityGate) clone() QualityGate {
	c := g
	c.FailOn = slices.Clone(g.FailOn)
	return c
}

func (e Escalation) clone() Escalation {
	c := e
	c.Fixer = clonePtr(e.Fixer)
	c.ReviewerSecondOpinion = clonePtr(e.ReviewerSecondOpinion)
	c.Worker = clonePtr(e.Worker)
	return c
}

func clonePtr(p *string) *string {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Exhausted reports whether the ticket has used its retries: its last attempt
// was blocked and retryCount reached maxRetries. A run with escalation on
// skips such a ticket.
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
