package state

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
)

// This file ports tf's quality-gate detection (retry-state spec, sections
// 3.1 to 3.4) from Python: whether close-summary.md says BLOCKED, else
// whether review.md has findings of a failOn severity, and whether the
// ticket closed. The patterns are tf's, in Python spelling; pyre.go says how
// they are translated.

// The patterns of tf's detection, as tf writes them.
const (
	// Status line saying BLOCKED (IGNORECASE).
	pyBlockedStatus = `##\s*Status\s*\n\s*(?:[-*]?\s*)?(?:\*\*)?(BLOCKED)(?:\*\*)?(?:\s|$)`
	// Status line saying CLOSED or COMPLETE (IGNORECASE).
	pySuccessStatus = `##\s*Status\s*\n\s*(?:[-*]?\s*)?(?:\*\*)?(CLOSED|COMPLETE)(?:\*\*)?(?:\s|$)`
	// A "Severity: n" statistic anywhere (IGNORECASE, MULTILINE).
	pySeverityStat = `(?:^|\s|[-*]\s*)(?:\*\*)?{literal}(?:\*\*)?\s*:\s*(\d+)`
	// A review.md section heading for a severity (IGNORECASE, MULTILINE).
	pyReviewSection = `^##\s*(?:\*\*)?{literal}(?:\*\*)?(?:\s*\([^)]+\))?(?:\s*:\s*\d+.*)?$`
	// The next level-2 heading, which ends a section (MULTILINE).
	pyNextHeading = `\n^##\s`
	// A list item inside a section.
	pyListItem = `\n-\s`
)

var (
	blockedStatusRe = pyCompile(pyBlockedStatus, "", false)
	successStatusRe = pyCompile(pySuccessStatus, "", false)
	nextHeadingRe   = pyCompile(pyNextHeading, "", true)
	listItemRe      = pyCompile(pyListItem, "", false)
)

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
	names := slices.DeleteFunc(slices.Sorted(maps.Keys(c)), func(k string) bool { return slices.Contains(severities, k) })
	for _, k := range slices.Concat(severities, names) {
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
// severities that have a section, keyed as failOn spells them. An empty
// failOn disables the check, and the file is then not read.
func DetectBlockedFromReview(path string, failOn []string) (*BlockedResult, error) {
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
	counts := make(SeverityCounts, len(severities))
	for _, sev := range severities {
		counts[sev] = "0"
		if m := severityRes[sev].stat.FindStringSubmatch(content); m != nil {
			counts[sev] = pyInt(m[1])
		}
	}
	return counts
}

// severityRes are compiled once for the five names tf always counts.
var severityRes = func() map[string]severityPatterns {
	m := make(map[string]severityPatterns, len(severities))
	for _, sev := range severities {
		m[sev] = compileSeverity(sev)
	}
	return m
}()

func reviewBlocked(content string, failOn []string) *BlockedResult {
	counts := SeverityCounts{}
	blocked := false
	for _, sev := range failOn {
		re, ok := severityRes[sev]
		if !ok {
			re = compileSeverity(sev)
		}
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
			count = pyInt(m[1])
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

// severityPatterns are the two patterns that name one severity.
type severityPatterns struct {
	stat    *regexp.Regexp // "Severity: n" anywhere
	section *regexp.Regexp // a review.md heading
}

func compileSeverity(sev string) severityPatterns {
	return severityPatterns{
		stat:    pyCompile(pySeverityStat, sev, true),
		section: pyCompile(pyReviewSection, sev, true),
	}
}

// pyInt is Python's int() of a run of Unicode decimal digits, as canonical
// ASCII digits: each digit becomes its value and leading zeros go. Counts
// stay digit strings so that any size is exact (see Counts).
func pyInt(digits string) json.Number {
	var b strings.Builder
	for _, r := range digits {
		d := digitValue(r)
		if b.Len() == 0 && d == 0 {
			continue
		}
		b.WriteByte(byte('0' + d))
	}
	if b.Len() == 0 {
		return "0"
	}
	return json.Number(b.String())
}

// digitValue is the value of a decimal digit. Unicode places every set of
// decimal digits as ten consecutive code points from 0 to 9, and Go's Nd
// table keeps each range starting at a zero, so the offset in the range,
// modulo ten, is the value.
func digitValue(r rune) int {
	if r >= '0' && r <= '9' {
		return int(r - '0')
	}
	for _, rg := range unicode.Nd.R16 {
		if r >= rune(rg.Lo) && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10
		}
	}
	for _, rg := range unicode.Nd.R32 {
		if r >= rune(rg.Lo) && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10
		}
	}
	panic(fmt.Sprintf("digitValue: %U is not a decimal digit", r))
}

// readArtifact reads a ticket artifact as Python's Path.read_text does: UTF-8
// (tf's Python fails on anything else, so peal reports an error), with
// universal newlines, so CRLF and lone CR become LF before any pattern sees
// them. found is false when Path.exists() would be false.
func readArtifact(path string) (content string, found bool, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if missing(err) {
			return "", false, nil
		}
		return "", false, err
	}
	if !utf8.Valid(data) {
		return "", false, fmt.Errorf("%s is not UTF-8 text", path)
	}
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	return strings.ReplaceAll(s, "\r", "\n"), true, nil
}

// missing reports the errors for which Python's Path.exists() answers False
// instead of raising.
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP)
}
