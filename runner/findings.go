package runner

import (
	"strings"
	"unicode"

	"peal/config"
)

// Finding is one finding of a stet review (the fields of `stet run --output=json`).
type Finding struct {
	ID         string  `json:"id"`
	File       string  `json:"file"`
	Path       string  `json:"path"`
	Line       int     `json:"line"`
	Severity   string  `json:"severity"`
	Category   string  `json:"category"`
	Confidence float64 `json:"confidence"`
	Message    string  `json:"message"`
	Suggestion string  `json:"suggestion"`
}

// location is the finding's path, whichever field carries it.
func (f Finding) location() string {
	if f.File != "" {
		return f.File
	}
	return f.Path
}

// Review is the result of one review command, as the address loop sees it.
type Review struct {
	Output   string // stdout of the review
	Stderr   string
	ExitCode int
	// Present: the review reports findings (the heuristic of SPEC A7).
	Present bool
	// Structured: stdout was JSON with a findings list, so findings can be
	// triaged and dismissed by id; Findings holds them.
	Structured bool
	Findings   []Finding
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
// JSON: an object with a non-empty findings (or issues) array or count > 0, or
// a non-empty top-level array, reports findings; other JSON reports none. Not
// JSON: exit 0 with a last line "0 finding(s)." / "0 finding(s)" / "0
// finding(s) at …" reports none; a non-zero exit reports findings; exit 0 with
// non-blank output reports findings.
func ParseReview(stdout string, exitCode int) Review {
	rv := Review{Output: stdout, ExitCode: exitCode}
	trimmed := strings.TrimSpace(stdout)
	if trimmed != "" {
		if parsed, ok := parseReviewJSON(trimmed); ok {
			rv.Structured = parsed.structured
			rv.Findings = parsed.findings
			rv.Present = parsed.present
			return rv
		}
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

type parsedJSON struct {
	structured, present bool
	findings            []Finding
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

// ParseTriage turns the agent's triage answer into dismissals: an answer that
// says there is nothing to address dismisses every finding; an answer that
// names some (not all) findings in a sentence with "fix", "address" or "need"
// dismisses the others; anything else dismisses nothing. Every dismissal here has the
// reason false_positive. It runs in time linear in the answer and findings.
func ParseTriage(answer string, findings []Finding) []dismissal {
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
