package fakes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"peal/internal/procs"
)

// The fake stet follows the contract of the real stet CLI where peal depends
// on it: a session per repository (STET_STATE_DIR, default <repo>/.review),
// reviews of committed changes only (baseline..HEAD, incrementally since the
// last review), every active finding of the session in each `run`, hunks
// holding a dismissed finding skipped, exit 0 with or without findings, 1 on
// an error, 2 when the review model is unreachable.
//
// Findings come from the code under review: an added line that contains
// FindingMarker followed by a JSON object is reported as that finding, at
// that line of that file. The fake agent plants such lines (Outcome.Plant)
// and removes them again (Outcome.StetFix), so a finding is seen only once
// its line is committed and goes away once its removal is committed.

// LineRange is the range of a finding, as stet reports it.
type LineRange struct {
	Start int `json:"start"`
	End   int `json:"end"`
}

// Finding is one review finding as the stet CLI reports it.
type Finding struct {
	ID         string     `json:"id"`
	File       string     `json:"file"`
	Line       int        `json:"line,omitempty"`
	Range      *LineRange `json:"range,omitempty"`
	Severity   string     `json:"severity"`
	Category   string     `json:"category"`
	Confidence float64    `json:"confidence"`
	Message    string     `json:"message"`
	Suggestion string     `json:"suggestion,omitempty"`
}

// FindingMarker starts the JSON of a planted finding in a line of code.
const FindingMarker = "stet:finding "

// plantedTrailer ends a file the fake agent planted findings in, so that
// removing a finding's line leaves a hunk that still covers its old line.
const plantedTrailer = "// end of planted findings"

// MarkerLine is the line of code that makes the fake stet report f (its File
// and Line come from where the line is).
func MarkerLine(f Finding) string {
	f.File, f.Line, f.Range = "", 0, nil
	data, err := json.Marshal(f)
	if err != nil {
		panic(err) // a Finding always marshals
	}
	return "// " + FindingMarker + string(data)
}

// ParseMarker reads the finding of a marker line.
func ParseMarker(line string) (Finding, bool) {
	i := strings.Index(line, FindingMarker)
	if i < 0 {
		return Finding{}, false
	}
	var f Finding
	if json.Unmarshal([]byte(line[i+len(FindingMarker):]), &f) != nil {
		return Finding{}, false
	}
	return f, true
}

// FindingID is the id the fake stet gives a planted finding without one:
// like stet's, a hash of its place and message (64 hex characters).
func FindingID(file string, line int, message string) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s:%d:%s", file, line, message)))
	return hex.EncodeToString(sum[:])
}

// Plant appends the marker lines of findings to their files under root,
// creating files as needed; every planted file ends with a trailer line. A
// finding whose id is planted in its file already is not planted again.
func Plant(root string, findings []Finding) error {
	byFile := map[string][]Finding{}
	for _, f := range findings {
		byFile[f.File] = append(byFile[f.File], f)
	}
	for _, name := range slicesSorted(byFile) {
		path := filepath.Join(root, name)
		var lines []string
		if data, err := os.ReadFile(path); err == nil {
			lines = strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		} else {
			lines = []string{"// " + name}
		}
		if n := len(lines); n > 0 && lines[n-1] == plantedTrailer {
			lines = lines[:n-1]
		}
		for _, f := range byFile[name] {
			// Planting a finding twice changes nothing: an agent that redoes
			// a task leaves the same code.
			if !slices.ContainsFunc(lines, func(l string) bool { p, ok := ParseMarker(l); return ok && p.ID == f.ID && f.ID != "" }) {
				lines = append(lines, MarkerLine(f))
			}
		}
		lines = append(lines, plantedTrailer)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Fix replaces the marker lines of n planted findings under root with a
// line saying they were fixed, lowest ids first in natural order (F2 before
// F10); n < 0 fixes all. It returns the ids fixed. Folders named .git,
// .review and .peal are not searched. The line is changed rather than
// removed, as a fix usually does: the fix's hunk still covers the line
// stet reported, so stet sees the finding addressed.
func Fix(root string, n int) ([]string, error) {
	type mark struct {
		path string
		id   string
	}
	var marks []mark
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".review", ".peal":
				return filepath.SkipDir
			}
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(data), "\n") {
			if f, ok := ParseMarker(line); ok {
				marks = append(marks, mark{path, f.ID})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(marks, func(a, b mark) int { return compareIDs(a.id, b.id) })
	if n >= 0 && n < len(marks) {
		marks = marks[:n]
	}
	var ids []string
	for _, m := range marks {
		data, err := os.ReadFile(m.path)
		if err != nil {
			return nil, err
		}
		lines := strings.Split(string(data), "\n")
		i := slices.IndexFunc(lines, func(l string) bool { f, ok := ParseMarker(l); return ok && f.ID == m.id })
		if i < 0 {
			continue
		}
		lines[i] = "// fixed " + m.id
		if err := os.WriteFile(m.path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			return nil, err
		}
		ids = append(ids, m.id)
	}
	return ids, nil
}

func slicesSorted[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// StetScenario drives the fake stet. Rules are keyed by sub-command (start,
// run, dismiss, finish, status, cleanup) and picked by the per-sub-command
// call count; an outcome with an exit code or stdout replaces the command,
// one without runs it after its sleep and stderr.
type StetScenario struct {
	Rules map[string][]Outcome `json:"rules"`
	// HunkMS is how long the review of one hunk takes; with --stream a
	// progress event follows each hunk.
	HunkMS int `json:"hunk_ms"`
	// ModelDown makes every review that has a hunk to review fail as the
	// real stet does when its model server is unreachable (exit 2).
	ModelDown bool `json:"model_down"`
	// ModelRefused makes every such review fail as the real stet does when
	// the model server refuses the request, here a model it does not serve
	// (exit 2 too, with "LLM bad request").
	ModelRefused bool `json:"model_refused"`
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

// Session is the fake stet's review session, in <state dir>/session.json.
type Session struct {
	Baseline     string    `json:"baseline_ref"`
	LastReviewed string    `json:"last_reviewed_at"`
	Findings     []Finding `json:"findings"`
	Dismissed    []string  `json:"dismissed_ids"`
	Worktree     string    `json:"worktree,omitempty"`
}

// Active is the findings not dismissed, in order.
func (s Session) Active() []Finding {
	out := []Finding{}
	for _, f := range s.Findings {
		if !slices.Contains(s.Dismissed, f.ID) {
			out = append(out, f)
		}
	}
	return out
}

// Resolve finds the finding of an id or of a unique prefix of at least 4
// characters (case-insensitive), as stet dismiss does.
func (s Session) Resolve(id string) (string, error) {
	if len(id) < 4 {
		return "", errors.New("finding id must be at least 4 characters")
	}
	var hits []string
	for _, f := range s.Findings {
		if f.ID != "" && strings.HasPrefix(strings.ToLower(f.ID), strings.ToLower(id)) && !slices.Contains(hits, f.ID) {
			hits = append(hits, f.ID)
		}
	}
	switch len(hits) {
	case 0:
		return "", fmt.Errorf("no finding with id %q", id)
	case 1:
		return hits[0], nil
	}
	return "", fmt.Errorf("ambiguous id %q; use more characters", id)
}

// ReadSession reads the session in stateDir; ok is false when there is none.
func ReadSession(stateDir string) (s Session, ok bool, err error) {
	data, err := os.ReadFile(filepath.Join(stateDir, SessionFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Session{}, false, nil
	}
	if err != nil {
		return Session{}, false, err
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return Session{}, false, fmt.Errorf("%s: %w", SessionFile, err)
	}
	return s, true, nil
}

// WriteSession saves s in stateDir.
func WriteSession(stateDir string, s Session) error {
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return err
	}
	return writeJSON(filepath.Join(stateDir, SessionFile), s)
}

// WriteStetScenario writes s to <dir>/stet-scenario.json.
func WriteStetScenario(dir string, s StetScenario) error {
	return writeJSON(filepath.Join(dir, StetScenarioFile), s)
}

// ReadStetScenario reads <dir>/stet-scenario.json; a missing file is the
// zero scenario: no rules, instant reviews, the model up.
func ReadStetScenario(dir string) (StetScenario, error) {
	var s StetScenario
	err := readJSON(filepath.Join(dir, StetScenarioFile), &s)
	return s, err
}

// StetCall is one line of stet-calls.jsonl written by the fake stet.
type StetCall struct {
	Event    string            `json:"event"`
	Cmd      string            `json:"cmd"`
	Args     []string          `json:"args"`
	N        int               `json:"n"`
	Cwd      string            `json:"cwd"`
	PID      int               `json:"pid"`
	PIDNS    string            `json:"pidns,omitempty"`     // the PID namespace PID is an id in
	PIDStart uint64            `json:"pid_start,omitempty"` // when the process started (procs.ID)
	Time     time.Time         `json:"time"`
	Exit     int               `json:"exit"`
	Env      map[string]string `json:"env,omitempty"` // STET_* and PEAL_* variables
	// Reviewed lists the hunks a review sent to the model, as file:start.
	Reviewed []string `json:"reviewed,omitempty"`
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
// joined by spaces, e.g. "dismiss F2 false_positive", in order; a 40-hex
// commit argument shows as "SHA".
func StetCmds(calls []StetCall) []string {
	var out []string
	for _, c := range calls {
		if c.Event == EventStart {
			words := []string{c.Cmd}
			for _, a := range c.Args {
				if isSHA(a) {
					a = "SHA"
				}
				words = append(words, a)
			}
			out = append(out, strings.Join(words, " "))
		}
	}
	return out
}

// StetEnds are the end records, in order.
func StetEnds(calls []StetCall) []StetCall {
	var out []StetCall
	for _, c := range calls {
		if c.Event == EventEnd {
			out = append(out, c)
		}
	}
	return out
}

func isSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
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

// StetRecorder is a shell script that runs stetBin with its arguments and
// appends to the file calls, when each command starts and ends, the task
// it ran for (PEAL_TASK_INDEX), the command, the time, STET_STATE_DIR and
// the folder it ran in: what the real stet cannot tell of itself.
func StetRecorder(stetBin, calls string) string {
	return fmt.Sprintf("#!/bin/sh\necho \"start $PEAL_TASK_INDEX $1 $(date +%%s.%%N) $STET_STATE_DIR $PWD\" >> %s\n%s \"$@\"\nrc=$?\n"+
		"echo \"end $PEAL_TASK_INDEX $1 $(date +%%s.%%N)\" >> %s\nexit $rc\n", calls, stetBin, calls)
}

// StetSpan is one stet command as StetRecorder noted it.
type StetSpan struct {
	Task, Cmd, State, Dir string
	Start, End            float64 // seconds since the epoch
}

// ReadStetSpans reads the notes of StetRecorder, in the order the commands
// started; commands of no task (the run's own) are left out.
func ReadStetSpans(calls string) ([]*StetSpan, error) {
	data, err := os.ReadFile(calls)
	if err != nil {
		return nil, err
	}
	var spans []*StetSpan
	open := map[string]*StetSpan{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // no task: the run's own check for a session left open
		}
		at, _ := strconv.ParseFloat(f[3], 64)
		key := f[1] + " " + f[2]
		switch f[0] {
		case "start":
			sp := &StetSpan{Task: f[1], Cmd: f[2], Start: at}
			if len(f) == 6 {
				sp.State, sp.Dir = f[4], f[5]
			}
			spans, open[key] = append(spans, sp), sp
		case "end":
			if sp := open[key]; sp != nil {
				sp.End = at
			}
		}
	}
	return spans, nil
}

// OverlappingPairs counts, by "cmd/cmd", the pairs of commands of different
// tasks that ran at the same time.
func OverlappingPairs(spans []*StetSpan) map[string]int {
	out := map[string]int{}
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.Task != b.Task && a.Start < b.End && b.Start < a.End {
				out[a.Cmd+"/"+b.Cmd]++
			}
		}
	}
	return out
}

// ID names the process that made the call, wherever it ran.
func (c StetCall) ID() procs.ID { return procs.ID{PID: c.PID, NS: c.PIDNS, Start: c.PIDStart} }
