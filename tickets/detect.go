package tickets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"peal/internal/jsonobj"
	"peal/internal/safefs"
)

// This file ports tf's quality-gate detection: whether close-summary.md says
// BLOCKED, else whether review.md has findings of a failOn severity, and
// whether the ticket closed. tf matches with Python regular expressions
// (re.IGNORECASE); they are written here in Go's syntax (RE2) with the
// classes spelled out where the two read the same text differently, and
// docs/retry-state.md lists them in Python's spelling.

// sp is Python's \s in a str pattern: every character str.isspace() takes.
// Go's \s is [\t\n\f\r ] only.
const sp = `[\t\n\v\f\r \x{1c}-\x{1f}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]`

// Python's \d is any Unicode decimal digit, which is Go's \p{Nd}.

// Under re.IGNORECASE Python lets i match İ (U+0130) and ı (U+0131) too, s
// the long s ſ (U+017F) and k the Kelvin sign K (U+212A). Go's (?i) folds s
// and k the same way but not i; the classes spell all three out.
const (
	ci = `[i\x{130}\x{131}]`
	cs = `[s\x{17f}]`
	ck = `[k\x{212a}]`
)

// statusHead is tf's "## Status" line and what may stand before the word.
// Python's $ (without MULTILINE) also matches before a final newline; in
// (?:\s|$) that newline is taken by \s, so Go's \z is exact.
const statusHead = `(?i)##` + sp + `*` + cs + `tatu` + cs + sp + `*\n` + sp + `*(?:[-*]?` + sp + `*)?(?:\*\*)?`

var (
	// Status section saying BLOCKED.
	blockedStatusRe = regexp.MustCompile(statusHead + `(BLOC` + ck + `ED)(?:\*\*)?(?:` + sp + `|\z)`)
	// Status section saying CLOSED or COMPLETE.
	successStatusRe = regexp.MustCompile(statusHead + `(CLO` + cs + `ED|COMPLETE)(?:\*\*)?(?:` + sp + `|\z)`)
	// The next level-2 heading, which ends a review section (MULTILINE, not
	// IGNORECASE).
	nextHeadingRe = regexp.MustCompile(`(?m)\n^##` + sp)
	// A list item inside a section.
	listItemRe = regexp.MustCompile(`\n-` + sp)
)

// severityNames are tf's severity names as IGNORECASE matches them.
var severityNames = map[string]string{
	"Critical":    `CR` + ci + `T` + ci + `CAL`,
	"Major":       `MAJOR`,
	"Minor":       `M` + ci + `NOR`,
	"Warnings":    `WARN` + ci + `NG` + cs,
	"Suggestions": cs + `UGGE` + cs + `T` + ci + `ON` + cs,
}

// severityPatterns are the two patterns that name one severity (IGNORECASE
// and MULTILINE both).
type severityPatterns struct {
	stat    *regexp.Regexp // "Severity: n" anywhere
	section *regexp.Regexp // a review.md heading
}

var severityRes = func() map[string]severityPatterns {
	m := make(map[string]severityPatterns, len(severityNames))
	for sev, name := range severityNames {
		m[sev] = severityPatterns{
			stat: regexp.MustCompile(`(?im)(?:^|` + sp + `|[-*]` + sp + `*)(?:\*\*)?` + name + `(?:\*\*)?` + sp + `*:` + sp + `*(\p{Nd}+)`),
			section: regexp.MustCompile(`(?im)^##` + sp + `*(?:\*\*)?` + name + `(?:\*\*)?(?:` + sp + `*\([^)]+\))?(?:` + sp +
				`*:` + sp + `*\p{Nd}+.*)?$`),
		}
	}
	return m
}()

// SeverityCounts are counts found by the detection, keyed by severity name.
// Each count is a json.Number of plain decimal digits without leading zeros:
// tf's Python reads numbers of any size, and keeping the digits reports them
// exactly, where an int64 would overflow. A nil SeverityCounts is JSON null.
type SeverityCounts map[string]json.Number

// MarshalJSON writes the five tf severities first, in tf's order, then any
// other names sorted, so the output reads like tf's.
func (c SeverityCounts) MarshalJSON() ([]byte, error) {
	if c == nil {
		return []byte("null"), nil
	}
	var b bytes.Buffer
	b.WriteByte('{')
	names := slices.DeleteFunc(slices.Sorted(maps.Keys(c)), func(k string) bool { return slices.Contains(Severities, k) })
	for _, k := range slices.Concat(Severities, names) {
		v, ok := c[k]
		if !ok {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		vb, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// BlockedResult says why a ticket is blocked: the file that showed it
// (CloseSummaryFile or ReviewFile), the status (always "blocked") and the
// severity counts found.
type BlockedResult struct {
	Source string         `json:"source"`
	Status string         `json:"status"`
	Counts SeverityCounts `json:"counts"`
}

// CloseResult is what close-summary.md says about the close: Status is
// "closed", "complete", "blocked" or "unknown"; Success is true for the first
// two; Counts is set only for "blocked".
type CloseResult struct {
	Success bool           `json:"success"`
	Status  string         `json:"status"`
	Counts  SeverityCounts `json:"counts"`
}

// DetectReport is the answer of `peal retry-state detect`: whether the
// quality gate blocked the ticket, which file said so, its counts ({} when
// not blocked) and the close status of close-summary.md.
type DetectReport struct {
	Blocked     bool           `json:"blocked"`
	Source      string         `json:"source"`
	Counts      SeverityCounts `json:"counts"`
	CloseStatus string         `json:"close_status"`
}

// Detect runs tf's detection on the ticket folder dir: DetectQualityGateBlocked
// and DetectCloseStatus. An error means an artifact exists but cannot be read
// (where tf's Python would raise).
func Detect(dir string, failOn []string) (DetectReport, error) {
	r := DetectReport{Counts: SeverityCounts{}}
	b, err := DetectQualityGateBlocked(dir, failOn)
	if err != nil {
		return r, err
	}
	if b != nil {
		r.Blocked, r.Source, r.Counts = true, b.Source, b.Counts
	}
	c, err := DetectCloseStatus(filepath.Join(dir, CloseSummaryFile))
	if err != nil {
		return r, err
	}
	r.CloseStatus = c.Status
	return r, nil
}

// DetectQualityGateBlocked looks for a block in close-summary.md first, then
// in review.md; nil means neither shows one.
func DetectQualityGateBlocked(dir string, failOn []string) (*BlockedResult, error) {
	if err := checkFailOn(failOn); err != nil {
		return nil, err
	}
	b, err := DetectBlockedFromCloseSummary(filepath.Join(dir, CloseSummaryFile))
	if b != nil || err != nil {
		return b, err
	}
	return DetectBlockedFromReview(filepath.Join(dir, ReviewFile), failOn)
}

// DetectBlockedFromCloseSummary reports a block when the file's Status
// section says BLOCKED, with the five severity counts of its statistics (0
// when a count is not found). A missing file is not a block.
func DetectBlockedFromCloseSummary(path string) (*BlockedResult, error) {
	content, found, err := readArtifact(path)
	if !found || err != nil {
		return nil, err
	}
	return closeSummaryBlocked(content), nil
}

// DetectBlockedFromReview reports a block when review.md has a section for a
// failOn severity whose count is above zero: the count of its "Severity: n"
// statistic, or else 1 if the section lists an item. Counts holds the failOn
// severities that have a section. failOn names severities as tf and the
// configuration spell them; an empty failOn disables the check, and the file
// is then not read.
func DetectBlockedFromReview(path string, failOn []string) (*BlockedResult, error) {
	if err := checkFailOn(failOn); err != nil {
		return nil, err
	}
	// tf checks that the file exists before it looks at failOn.
	if _, err := os.Stat(path); err != nil {
		if missing(err) {
			return nil, nil
		}
		return nil, err
	}
	if len(failOn) == 0 {
		return nil, nil
	}
	content, found, err := readArtifact(path)
	if !found || err != nil {
		return nil, err
	}
	return reviewBlocked(content, failOn), nil
}

// checkFailOn refuses a severity name that is not one of tf's five, as
// the configuration spells them.
func checkFailOn(failOn []string) error {
	for _, sev := range failOn {
		if _, ok := severityRes[sev]; !ok {
			return fmt.Errorf("unknown severity %s: fail_on takes %s", jsonobj.Quote(sev), strings.Join(Severities, ", "))
		}
	}
	return nil
}

// DetectCloseStatus reads close-summary.md's Status section. BLOCKED wins
// over CLOSED or COMPLETE, and a missing file is "unknown".
func DetectCloseStatus(path string) (CloseResult, error) {
	content, found, err := readArtifact(path)
	if err != nil {
		return CloseResult{}, err
	}
	if !found {
		return CloseResult{Status: "unknown"}, nil
	}
	return closeStatus(content), nil
}

func closeSummaryBlocked(content string) *BlockedResult {
	if !blockedStatusRe.MatchString(content) {
		return nil
	}
	return &BlockedResult{Source: CloseSummaryFile, Status: "blocked", Counts: severityCounts(content)}
}

func closeStatus(content string) CloseResult {
	if blockedStatusRe.MatchString(content) {
		return CloseResult{Status: "blocked", Counts: severityCounts(content)}
	}
	m := successStatusRe.FindStringSubmatch(content)
	if m == nil {
		return CloseResult{Status: "unknown"}
	}
	// tf lower-cases the matched word, which turns "CLOſED" (long s, which
	// IGNORECASE accepts) into "cloſed"; naming the word that matched keeps
	// the status one of the two documented values.
	status := "closed"
	if utf8.RuneCountInString(m[1]) == len("COMPLETE") {
		status = "complete"
	}
	return CloseResult{Success: true, Status: status}
}

// severityCounts reads the five statistics of a close summary.
func severityCounts(content string) SeverityCounts {
	counts := make(SeverityCounts, len(Severities))
	for _, sev := range Severities {
		counts[sev] = "0"
		if m := severityRes[sev].stat.FindStringSubmatch(content); m != nil {
			counts[sev] = number(m[1])
		}
	}
	return counts
}

func reviewBlocked(content string, failOn []string) *BlockedResult {
	counts := SeverityCounts{}
	blocked := false
	for _, sev := range failOn {
		re := severityRes[sev]
		loc := re.section.FindStringIndex(content)
		if loc == nil {
			continue
		}
		start, end := loc[1], len(content)
		if next := nextHeadingRe.FindStringIndex(content[start:]); next != nil {
			end = start + next[0]
		}
		hasItems := listItemRe.MatchString(content[start:end])
		count := json.Number("0")
		if m := re.stat.FindStringSubmatch(content); m != nil {
			count = number(m[1])
		} else if hasItems {
			count = "1"
		}
		counts[sev] = count
		if count != "0" {
			blocked = true
		}
	}
	if !blocked {
		return nil
	}
	return &BlockedResult{Source: ReviewFile, Status: "blocked", Counts: counts}
}

// number is Python's int() of a run of Unicode decimal digits, in plain
// digits without leading zeros, of any length (see SeverityCounts).
func number(digits string) json.Number {
	var b strings.Builder
	for _, r := range digits {
		if d := digitValue(r); b.Len() > 0 || d > 0 {
			b.WriteByte('0' + d)
		}
	}
	if b.Len() == 0 {
		return "0"
	}
	return json.Number(b.String())
}

// digitValue is the value of a decimal digit. Unicode lays out every set of
// decimal digits as ten consecutive code points from 0 to 9, and sets that
// touch follow one another whole, so the number of digits just below r,
// modulo ten, is its value.
func digitValue(r rune) byte {
	n := 0
	for unicode.IsDigit(r - rune(n) - 1) {
		n++
	}
	return byte(n % 10)
}

// maxArtifact caps what is read of close-summary.md and review.md.
const maxArtifact = 64 << 20

// readArtifact reads a ticket artifact as Python's Path.read_text does, but
// refuses a special file (which Python would wait on or read forever) and a
// file over the cap. found is false when Path.exists() would be false.
func readArtifact(path string) (content string, found bool, err error) {
	data, err := safefs.ReadFile(path, maxArtifact)
	if err != nil {
		if missing(err) {
			return "", false, nil
		}
		return "", false, err
	}
	content, err = artifactText(path, data)
	return content, err == nil, err
}

// artifactText decodes an artifact as Python does: UTF-8 (Python fails on
// anything else, so peal reports an error), with universal newlines, so CRLF
// and a lone CR become LF before any pattern sees them.
func artifactText(path string, data []byte) (string, error) {
	if !utf8.Valid(data) {
		return "", fmt.Errorf("%s is not UTF-8 text", path)
	}
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	return strings.ReplaceAll(s, "\r", "\n"), nil
}

// missing reports the errors for which Python's Path.exists() answers False
// instead of raising.
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP)
}
