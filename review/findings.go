package review

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode"

	"peal/config"
	"peal/tickets"
)

// LineRange is a span of lines, both ends included.
type LineRange struct {
	Start int `json:"start"`
	End   int `json:"end"`
}

// Finding is one finding of a review: the fields of `stet run --output=json`
// (and "path", which other review tools use for the file). The tags serve
// encoding only (for a review with findings left out); decoding matches
// keys exactly, see decodeReview.
type Finding struct {
	ID            string     `json:"id,omitempty"`
	File          string     `json:"file,omitempty"`
	Path          string     `json:"path,omitempty"`
	Line          int        `json:"line,omitempty"`
	Range         *LineRange `json:"range,omitempty"`
	Severity      string     `json:"severity,omitempty"`
	Category      string     `json:"category,omitempty"`
	Confidence    float64    `json:"confidence,omitempty"`
	Message       string     `json:"message,omitempty"`
	Suggestion    string     `json:"suggestion,omitempty"`
	CursorURI     string     `json:"cursor_uri,omitempty"`
	EvidenceLines []int      `json:"evidence_lines,omitempty"`
}

// location is the finding's path, whichever field carries it.
func (f Finding) location() string {
	if f.File != "" {
		return f.File
	}
	return f.Path
}

// Review is the result of one review, as the address loop sees it.
type Review struct {
	Output   string // stdout of the review (the findings JSON in built-in mode)
	Stderr   string
	ExitCode int
	// Present: the review reports findings.
	Present bool
	// Structured: stdout was JSON with a findings list, so findings can be
	// triaged and dismissed by id; Findings holds them.
	Structured bool
	Findings   []Finding
}

// GateCounts counts the findings reviews left by the severities of
// ticketflow's quality gate: stet's error → Critical, warning → Major,
// info → Minor, nitpick → Suggestions, anything else → Warnings; a review
// that is not JSON counts as one Major.
func GateCounts(reviews ...Review) tickets.Counts {
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

// Count is the number of findings left: the structured count, or 1 for an
// unstructured review that reports findings.
func (rv Review) Count() int {
	if rv.Structured {
		return len(rv.Findings)
	}
	if rv.Present {
		return 1
	}
	return 0
}

// Suggestions are the findings' non-empty suggestions, in order.
func (rv Review) Suggestions() []string {
	var out []string
	for _, f := range rv.Findings {
		if s := strings.TrimSpace(f.Suggestion); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// ParseReview applies the findings heuristic to a review's stdout and exit code.
//
// JSON: an object whose findings array (or, without one, issues array) is
// not empty, or without either array a count above 0, or a non-empty
// top-level array, reports findings; other JSON reports none. Not
// JSON: exit 0 with a last line "0 finding(s)." / "0 finding(s)" / "0
// finding(s) at …" reports none; a non-zero exit reports findings; exit 0 with
// non-blank output reports findings.
func ParseReview(stdout string, exitCode int) Review {
	rv := Review{Output: stdout, ExitCode: exitCode}
	trimmed := strings.TrimSpace(stdout)
	if trimmed != "" && json.Valid([]byte(trimmed)) {
		rv.Present, rv.Structured, rv.Findings = decodeReview([]byte(trimmed))
		return rv
	}
	if exitCode == 0 && trimmed != "" {
		last := trimmed[strings.LastIndexByte(trimmed, '\n')+1:]
		last = strings.TrimSpace(last)
		if last == "0 finding(s)." || last == "0 finding(s)" || strings.HasPrefix(last, "0 finding(s) at ") {
			return rv
		}
	}
	rv.Present = exitCode != 0 || trimmed != ""
	return rv
}

// decodeReview reads a review that is valid JSON: {"findings": [...],
// "issues": [...], "count": n} or a top-level array of findings. The document
// is decoded once into generic values (numbers kept as text) and walked by
// exact keys, as stet writes them (a struct decode would match keys
// case-insensitively); a finding whose known fields do not have their types
// (null counts as unset) makes the review unstructured.
func decodeReview(data []byte) (present, structured bool, findings []Finding) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil {
		return false, false, nil
	}
	return readReview(doc)
}

// readReview reads a review decoded into generic values (see decodeReview).
func readReview(doc any) (present, structured bool, findings []Finding) {
	switch v := doc.(type) {
	case []any:
		list, typed := findingList(v)
		if !typed {
			list = nil
		}
		return len(v) > 0, typed, list
	case map[string]any:
		// The first of findings and issues that is an array decides, even
		// an empty one; count speaks only when neither is an array.
		for _, key := range []string{"findings", "issues"} {
			if items, ok := v[key].([]any); ok {
				list, typed := findingList(items)
				if !typed {
					list = nil
				}
				return len(items) > 0, typed, list
			}
		}
		n, ok := v["count"].(json.Number)
		return ok && positiveWhole(string(n)), false, nil
	}
	return false, false, nil
}

// findingList reads an array of findings; typed when every element is a
// finding with its fields' types.
func findingList(items []any) ([]Finding, bool) {
	list := make([]Finding, 0, len(items))
	typed := true
	for _, item := range items {
		f, ok := findingOf(item)
		typed = typed && ok
		list = append(list, f)
	}
	return list, typed
}

// findingOf reads one finding; ok is false when it is not an object or a
// known field has another type.
func findingOf(v any) (f Finding, ok bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return f, false
	}
	for key, dst := range map[string]*string{"id": &f.ID, "file": &f.File, "path": &f.Path, "severity": &f.Severity,
		"category": &f.Category, "message": &f.Message, "suggestion": &f.Suggestion, "cursor_uri": &f.CursorURI} {
		switch x := m[key].(type) {
		case nil:
		case string:
			*dst = x
		default:
			ok = false
		}
	}
	ok = intOf(m["line"], &f.Line) && ok
	switch c := m["confidence"].(type) {
	case nil:
	case json.Number:
		x, err := strconv.ParseFloat(string(c), 64)
		f.Confidence, ok = x, ok && err == nil
	default:
		ok = false
	}
	switch r := m["range"].(type) {
	case nil:
	case map[string]any:
		f.Range = &LineRange{}
		ok = intOf(r["start"], &f.Range.Start) && intOf(r["end"], &f.Range.End) && ok
	default:
		ok = false
	}
	switch e := m["evidence_lines"].(type) {
	case nil:
	case []any:
		f.EvidenceLines = make([]int, len(e))
		for i, x := range e {
			ok = intOf(x, &f.EvidenceLines[i]) && ok
		}
	default:
		ok = false
	}
	return f, ok
}

// intOf reads an integer (or null, left unset) as encoding/json reads one
// into an int: a fraction or an exponent is another type.
func intOf(v any, dst *int) bool {
	switch n := v.(type) {
	case nil:
		return true
	case json.Number:
		i, err := strconv.ParseInt(string(n), 10, 0)
		*dst = int(i)
		return err == nil
	}
	return false
}

// positiveWhole reports whether a JSON number is a count above 0: a whole
// number written without a fraction or exponent, within 64 bits, as Peal
// read one ("2.5", "1e2", "-1" and 2^64 are not counts).
func positiveWhole(n string) bool {
	c, err := strconv.ParseUint(n, 10, 64)
	return err == nil && c > 0
}

// dismissal is one `stet dismiss ID REASON`.
type dismissal struct {
	ID, Reason string
}

// triageByPatterns dismisses each finding whose message or path contains a
// pattern, with the first matching pattern's reason.
func triageByPatterns(findings []Finding, patterns []config.DismissPattern) []dismissal {
	var out []dismissal
	for _, f := range findings {
		if f.ID == "" {
			continue
		}
		for _, p := range patterns {
			if strings.Contains(f.Message, p.Pattern) || strings.Contains(f.location(), p.Pattern) {
				out = append(out, dismissal{f.ID, p.Reason})
				break
			}
		}
	}
	return out
}

// Phrases of a triage answer that mean "dismiss everything".
var nothingPhrases = []string{
	"nothing to address", "nothing to fix", "all false positive", "no findings to address",
	"no issues to address", "no, nothing", "no nothing",
}

// Words that, in the sentence of a finding id, mean the finding should be fixed.
var fixWords = []string{"fix", "address", "need"}

// splitSentences cuts text at sentence ends (". ", "! ", "? ", ";", line
// breaks) so that a fix word only claims the ids of its own sentence.
func splitSentences(text string) []string {
	var out []string
	start := 0
	for i := 0; i < len(text); i++ {
		c := text[i]
		end := c == '\n' || c == ';'
		if (c == '.' || c == '!' || c == '?') && (i+1 == len(text) || text[i+1] == ' ' || text[i+1] == '\n') {
			end = true
		}
		if end {
			out = append(out, text[start:i])
			start = i + 1
		}
	}
	return append(out, text[start:])
}

// parseTriage turns the agent's triage answer into dismissals: an answer that
// says there is nothing to address dismisses every finding; an answer that
// names some (not all) findings in a sentence with "fix", "address" or "need"
// dismisses the others; anything else dismisses nothing. Every dismissal here
// has the reason false_positive. It runs in time linear in the answer and
// findings.
func parseTriage(answer string, findings []Finding) []dismissal {
	lower := strings.ToLower(strings.TrimSpace(answer))
	if lower == "" {
		return nil
	}
	all := func() []dismissal {
		var out []dismissal
		for _, f := range findings {
			if f.ID != "" {
				out = append(out, dismissal{f.ID, "false_positive"})
			}
		}
		return out
	}
	for _, p := range nothingPhrases {
		if strings.Contains(lower, p) {
			return all()
		}
	}
	if bare := strings.TrimRight(lower, ".! "); len(lower) < 20 && (bare == "no" || bare == "nope") {
		return all()
	}

	// Ids mentioned in a sentence that asks for a fix are kept.
	mentioned := map[string]bool{}
	for _, sentence := range splitSentences(lower) {
		words := strings.FieldsFunc(sentence, func(r rune) bool {
			return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' || r == '.' || r == '/' || r == ':' || r == '#')
		})
		asks := false
		for _, w := range words {
			for _, k := range fixWords {
				asks = asks || strings.Contains(w, k)
			}
		}
		if !asks {
			continue
		}
		for _, w := range words {
			mentioned[strings.Trim(w, ".:-#")] = true
		}
	}
	keep := map[string]bool{}
	withID := 0
	for _, f := range findings {
		if f.ID == "" {
			continue
		}
		withID++
		if mentioned[strings.ToLower(f.ID)] {
			keep[f.ID] = true
		}
	}
	if len(keep) == 0 || len(keep) >= withID {
		return nil
	}
	var out []dismissal
	for _, f := range findings {
		if f.ID != "" && !keep[f.ID] {
			out = append(out, dismissal{f.ID, "false_positive"})
		}
	}
	return out
}
