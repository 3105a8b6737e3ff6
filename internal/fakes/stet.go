package fakes

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Finding is one review finding as the stet CLI reports it.
type Finding struct {
	ID         string  `json:"id"`
	File       string  `json:"file"`
	Line       int     `json:"line"`
	Severity   string  `json:"severity"`
	Category   string  `json:"category"`
	Confidence float64 `json:"confidence"`
	Message    string  `json:"message"`
	Suggestion string  `json:"suggestion,omitempty"`
}

// Output modes of StetScenario.Output.
const (
	OutputJSON  = "json"  // {"findings":[...]}
	OutputHuman = "human" // one line per finding and a count line
	OutputText  = "text"  // a non-JSON preamble followed by the human lines
)

// StetScenario drives the fake stet. Rules are keyed by sub-command (start,
// run, dismiss, finish) and picked by the per-sub-command call count.
type StetScenario struct {
	Findings          []Finding            `json:"findings"`
	Output            string               `json:"output"`
	RunExitOnFindings int                  `json:"run_exit_on_findings"`
	Rules             map[string][]Outcome `json:"rules"`
}

// Pick returns the rule outcome for the n-th (1-based) call of cmd, with the
// last element repeating; ok is false when cmd has no rules.
func (s StetScenario) Pick(cmd string, n int) (out Outcome, ok bool) {
	list := s.Rules[cmd]
	if len(list) == 0 {
		return Outcome{}, false
	}
	return pickN(list, n), true
}

// DismissReasons are the reasons stet dismiss accepts.
var DismissReasons = []string{"false_positive", "already_correct", "wrong_suggestion", "out_of_scope"}

// ValidDismissReason reports whether reason is one of DismissReasons.
func ValidDismissReason(reason string) bool {
	return slices.Contains(DismissReasons, reason)
}

// Session is the fake stet's persistent review state.
type Session struct {
	Active    []Finding         `json:"active"`
	Dismissed map[string]string `json:"dismissed"` // id → reason
	Fixed     []string          `json:"fixed"`     // ids removed by the agent's stet_fix, in order
	Started   bool              `json:"started"`
}

// Dismiss moves the active finding id to Dismissed with reason.
func (s *Session) Dismiss(id, reason string) error {
	if !ValidDismissReason(reason) {
		return fmt.Errorf("invalid reason %q (want one of %s)", reason, strings.Join(DismissReasons, ", "))
	}
	i := slices.IndexFunc(s.Active, func(f Finding) bool { return f.ID == id })
	if i < 0 {
		return fmt.Errorf("no active finding %q", id)
	}
	s.Active = slices.Delete(s.Active, i, i+1)
	if s.Dismissed == nil {
		s.Dismissed = map[string]string{}
	}
	s.Dismissed[id] = reason
	return nil
}

// Fix removes n active findings, lowest ids first in natural order (F2
// before F10); n < 0 removes all. It returns the removed ids.
func (s *Session) Fix(n int) []string {
	ids := make([]string, 0, len(s.Active))
	for _, f := range s.Active {
		ids = append(ids, f.ID)
	}
	slices.SortStableFunc(ids, compareIDs)
	if n >= 0 && n < len(ids) {
		ids = ids[:n]
	}
	s.Active = slices.DeleteFunc(s.Active, func(f Finding) bool { return slices.Contains(ids, f.ID) })
	s.Fixed = append(s.Fixed, ids...)
	return ids
}

// compareIDs orders ids naturally: digit runs compare by numeric value.
func compareIDs(a, b string) int {
	for a != "" && b != "" {
		ca, ra := leadingRun(a)
		cb, rb := leadingRun(b)
		if ca != cb {
			if isDigit(ca[0]) && isDigit(cb[0]) {
				ta, tb := strings.TrimLeft(ca, "0"), strings.TrimLeft(cb, "0")
				if len(ta) != len(tb) {
					return len(ta) - len(tb)
				}
				if c := strings.Compare(ta, tb); c != 0 {
					return c
				}
			}
			return strings.Compare(ca, cb)
		}
		a, b = ra, rb
	}
	return len(a) - len(b)
}

// leadingRun splits s after its first run of digits or of non-digits.
func leadingRun(s string) (run, rest string) {
	d := isDigit(s[0])
	i := 1
	for i < len(s) && isDigit(s[i]) == d {
		i++
	}
	return s[:i], s[i:]
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// LoadSession reads <dir>/session.json under the session lock; a missing
// file is an empty, not-started session.
func LoadSession(dir string) (Session, error) {
	var s Session
	err := withSessionLock(dir, syscall.LOCK_SH, func() error {
		var err error
		s, err = readSession(dir)
		return err
	})
	return s, err
}

// UpdateSession runs fn on the session under an exclusive lock on
// <dir>/session.lock and saves the result unless fn fails, because the
// agent and stet may change the session at the same time.
func UpdateSession(dir string, fn func(*Session) error) error {
	return withSessionLock(dir, syscall.LOCK_EX, func() error {
		s, err := readSession(dir)
		if err != nil {
			return err
		}
		if err := fn(&s); err != nil {
			return err
		}
		return writeJSON(filepath.Join(dir, SessionFile), s)
	})
}

func readSession(dir string) (Session, error) {
	var s Session
	if err := readJSON(filepath.Join(dir, SessionFile), &s); err != nil {
		return Session{}, err
	}
	if s.Dismissed == nil {
		s.Dismissed = map[string]string{}
	}
	return s, nil
}

func withSessionLock(dir string, how int, fn func() error) error {
	f, err := os.OpenFile(filepath.Join(dir, SessionLockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		return fmt.Errorf("lock session: %w", err)
	}
	return fn()
}

// WriteStetScenario writes s to <dir>/stet-scenario.json.
func WriteStetScenario(dir string, s StetScenario) error {
	return writeJSON(filepath.Join(dir, StetScenarioFile), s)
}

// ReadStetScenario reads <dir>/stet-scenario.json; a missing file is the
// zero scenario: no findings, JSON output, no rules.
func ReadStetScenario(dir string) (StetScenario, error) {
	var s StetScenario
	err := readJSON(filepath.Join(dir, StetScenarioFile), &s)
	return s, err
}

// StetCall is one line of stet-calls.jsonl written by the fake stet.
type StetCall struct {
	Event string    `json:"event"`
	Cmd   string    `json:"cmd"`
	Args  []string  `json:"args"`
	N     int       `json:"n"`
	Cwd   string    `json:"cwd"`
	PID   int       `json:"pid"`
	Time  time.Time `json:"time"`
	Exit  int       `json:"exit"`
}

// RecordStetStart appends c as a start record to <dir>/stet-calls.jsonl and
// returns it with Event and N (start records with c.Cmd so far, this one
// included) filled in.
func RecordStetStart(dir string, c StetCall) (StetCall, error) {
	c.Event = EventStart
	err := appendLocked(filepath.Join(dir, StetCallsFile), func(existing []byte) ([]byte, error) {
		n, err := countStarts(existing, func(line []byte) (string, error) {
			var prev StetCall
			err := json.Unmarshal(line, &prev)
			return prev.Event + "\x00" + prev.Cmd, err
		}, EventStart+"\x00"+c.Cmd)
		if err != nil {
			return nil, err
		}
		c.N = n + 1
		return json.Marshal(c)
	})
	return c, err
}

// RecordStetEnd appends c as an end record to <dir>/stet-calls.jsonl.
func RecordStetEnd(dir string, c StetCall) error {
	c.Event = EventEnd
	return appendLocked(filepath.Join(dir, StetCallsFile), func([]byte) ([]byte, error) {
		return json.Marshal(c)
	})
}

// ReadStetCalls returns every record in <dir>/stet-calls.jsonl; a missing
// file yields no records and no error.
func ReadStetCalls(dir string) ([]StetCall, error) {
	return readJSONL[StetCall](filepath.Join(dir, StetCallsFile))
}

// StetCmds renders each start record as its sub-command and arguments
// joined by spaces, e.g. "dismiss F2 false_positive", in order.
func StetCmds(calls []StetCall) []string {
	var out []string
	for _, c := range calls {
		if c.Event == EventStart {
			out = append(out, strings.Join(append([]string{c.Cmd}, c.Args...), " "))
		}
	}
	return out
}
