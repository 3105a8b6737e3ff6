package tickets

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// goldenCase is one entry of testdata/detect_golden.json, whose answers come
// from running the spec's own Python (testdata/gen_detect_golden.py).
type goldenCase struct {
	Name         string          `json:"name"`
	CloseSummary *string         `json:"close_summary"`
	Review       *string         `json:"review"`
	FailOn       []string        `json:"fail_on"`
	Want         json.RawMessage `json:"want"`
	Deviation    string          `json:"deviation"`
}

func loadGolden(t testing.TB) []goldenCase {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "detect_golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []goldenCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	return file.Cases
}

// writeArtifacts puts the case's files in a fresh ticket folder.
func writeArtifacts(t testing.TB, dir string, closeSummary, review *string) {
	t.Helper()
	for name, text := range map[string]*string{CloseSummaryFile: closeSummary, ReviewFile: review} {
		if text == nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(*text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// jsonValue decodes JSON keeping numbers as their digits, so that counts
// beyond int64 compare exactly.
func jsonValue(t testing.TB, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
	return v
}

func TestDetectGolden(t *testing.T) {
	cases := loadGolden(t)
	if len(cases) < 100 {
		t.Fatalf("only %d golden cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			dir := t.TempDir()
			writeArtifacts(t, dir, c.CloseSummary, c.Review)
			report, err := Detect(dir, c.FailOn)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(report)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(jsonValue(t, got), jsonValue(t, c.Want)) {
				t.Errorf("Detect\n got %s\nwant %s", got, c.Want)
			}
		})
	}
}

// TestDetectFunctionsAgree checks the single detectors against the report on
// the golden corpus, so each exported function is pinned by tf's answers.
func TestDetectFunctionsAgree(t *testing.T) {
	for _, c := range loadGolden(t) {
		dir := t.TempDir()
		writeArtifacts(t, dir, c.CloseSummary, c.Review)
		report, err := Detect(dir, c.FailOn)
		if err != nil {
			t.Fatal(err)
		}
		fromSummary, err := DetectBlockedFromCloseSummary(filepath.Join(dir, CloseSummaryFile))
		if err != nil {
			t.Fatal(err)
		}
		fromReview, err := DetectBlockedFromReview(filepath.Join(dir, ReviewFile), c.FailOn)
		if err != nil {
			t.Fatal(err)
		}
		closed, err := DetectCloseStatus(filepath.Join(dir, CloseSummaryFile))
		if err != nil {
			t.Fatal(err)
		}
		switch report.Source {
		case CloseSummaryFile:
			if fromSummary == nil || !reflect.DeepEqual(fromSummary.Counts, report.Counts) {
				t.Errorf("%s: close summary result %+v, report %+v", c.Name, fromSummary, report)
			}
		case ReviewFile:
			if fromSummary != nil || fromReview == nil || !reflect.DeepEqual(fromReview.Counts, report.Counts) {
				t.Errorf("%s: review result %+v, report %+v", c.Name, fromReview, report)
			}
		default:
			if fromSummary != nil || fromReview != nil {
				t.Errorf("%s: a detector found a block the report did not", c.Name)
			}
		}
		if closed.Status != report.CloseStatus || closed.Success != (closed.Status == "closed" || closed.Status == "complete") {
			t.Errorf("%s: close result %+v, report %+v", c.Name, closed, report)
		}
		if closed.Status == "blocked" && !reflect.DeepEqual(closed.Counts, report.Counts) {
			t.Errorf("%s: blocked close counts %v, report %v", c.Name, closed.Counts, report.Counts)
		}
	}
}

func TestDetectMissingAndUnreadable(t *testing.T) {
	t.Run("missing folder", func(t *testing.T) {
		r, err := Detect(filepath.Join(t.TempDir(), "nope"), []string{"Critical"})
		if err != nil {
			t.Fatal(err)
		}
		want := DetectReport{Counts: SeverityCounts{}, CloseStatus: "unknown"}
		if !reflect.DeepEqual(r, want) {
			t.Errorf("got %+v, want %+v", r, want)
		}
		got, _ := json.Marshal(r)
		if string(got) != `{"blocked":false,"source":"","counts":{},"close_status":"unknown"}` {
			t.Errorf("JSON %s", got)
		}
	})
	t.Run("folder is a file", func(t *testing.T) {
		// Path.exists() is False under a file (ENOTDIR), so nothing is found.
		file := filepath.Join(t.TempDir(), "f")
		os.WriteFile(file, nil, 0o644)
		r, err := Detect(file, []string{"Critical"})
		if err != nil || r.Blocked || r.CloseStatus != "unknown" {
			t.Errorf("got %+v, %v", r, err)
		}
	})
	t.Run("dangling symlink", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Symlink("nowhere", filepath.Join(dir, CloseSummaryFile)); err != nil {
			t.Skip(err)
		}
		r, err := Detect(dir, nil)
		if err != nil || r.CloseStatus != "unknown" {
			t.Errorf("got %+v, %v", r, err)
		}
	})
	t.Run("close summary is a folder", func(t *testing.T) {
		// tf's read_text raises IsADirectoryError; peal reports an error.
		dir := t.TempDir()
		os.Mkdir(filepath.Join(dir, CloseSummaryFile), 0o755)
		if _, err := Detect(dir, nil); err == nil {
			t.Error("no error")
		}
	})
	t.Run("not utf-8", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, CloseSummaryFile), []byte("## Status\n\xffBLOCKED\n"), 0o644)
		if _, err := Detect(dir, nil); err == nil || !strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("unreadable review is not read when failOn is empty", func(t *testing.T) {
		dir := t.TempDir()
		os.Mkdir(filepath.Join(dir, ReviewFile), 0o755)
		if _, err := Detect(dir, nil); err != nil {
			t.Errorf("empty failOn: %v", err)
		}
		if _, err := Detect(dir, []string{"Critical"}); err == nil {
			t.Error("failOn set: no error for a review.md that is a folder")
		}
	})
	t.Run("close status of a missing file", func(t *testing.T) {
		c, err := DetectCloseStatus(filepath.Join(t.TempDir(), CloseSummaryFile))
		if err != nil || c.Success || c.Status != "unknown" || c.Counts != nil {
			t.Errorf("got %+v, %v", c, err)
		}
	})
}

// TestPythonRegexDifferences pins each place where a naive port to Go's
// regexp would answer differently from tf's Python.
func TestPythonRegexDifferences(t *testing.T) {
	blocked := func(s string) bool { return closeSummaryBlocked(s) != nil }
	stat := func(s string) string { return string(severityCounts(s)["Critical"]) }
	for _, tc := range []struct {
		name string
		got  string
		want string
	}{
		{"\\s takes vertical tab", b2s(blocked("##\vStatus\n\vBLOCKED")), "true"},
		{"\\s takes U+001C..U+001F", b2s(blocked("##\x1c\x1d\x1e\x1fStatus\nBLOCKED")), "true"},
		{"\\s takes NEL", b2s(blocked("##\u0085Status\nBLOCKED")), "true"},
		{"\\s takes no-break space", b2s(blocked("##\u00a0Status\nBLOCKED")), "true"},
		{"\\s takes ogham space", b2s(blocked("##\u1680Status\nBLOCKED")), "true"},
		{"\\s takes U+2000..U+200A", b2s(blocked("##\u2000\u200aStatus\nBLOCKED")), "true"},
		{"\\s takes line and paragraph separators", b2s(blocked("##\u2028\u2029Status\nBLOCKED")), "true"},
		{"\\s takes narrow nbsp, math space, ideographic space", b2s(blocked("##\u202f\u205f\u3000Status\nBLOCKED")), "true"},
		{"\\s refuses zero width space", b2s(blocked("##\u200bStatus\nBLOCKED")), "false"},
		{"\\s refuses BOM", b2s(blocked("##\ufeffStatus\nBLOCKED")), "false"},
		{"\\d takes Arabic-Indic digits", stat("Critical: \u0663\u0664"), "34"},
		{"\\d takes fullwidth digits", stat("Critical: \uff11\uff10"), "10"},
		{"\\d takes mathematical digits", stat("Critical: \U0001d7d7"), "9"},
		{"\\d refuses superscripts", stat("Critical: \u00b9"), "0"},
		{"\\d follows Go's Unicode 15 (Kawi)", stat("Critical: \U00011f57"), "7"},
		{"$ at the very end", b2s(blocked("## Status\nBLOCKED")), "true"},
		{"$ before a final newline", b2s(blocked("## Status\n**BLOCKED**\n")), "true"},
		{"ignorecase Kelvin sign", b2s(blocked("## Status\nBLOC\u212aED")), "true"},
		{"ignorecase long s", b2s(blocked("## \u017ftatus\nBLOCKED")), "true"},
		{"ignorecase dotless i", stat("Cr\u0131t\u0131cal: 3"), "3"},
		{"ignorecase dotted capital I", stat("CR\u0130T\u0130CAL: 4"), "4"},
		{"CRLF is read as LF", b2s(blocked("## Status\r\nBLOCKED\r\n")), "true"},
	} {
		if tc.name == "CRLF is read as LF" {
			// The translation happens when the file is read, as in Python.
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, CloseSummaryFile), []byte("## Status\r\nBLOCKED\r\n"), 0o644)
			b, err := DetectBlockedFromCloseSummary(filepath.Join(dir, CloseSummaryFile))
			tc.got = b2s(b != nil && err == nil)
		}
		if tc.got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, tc.got, tc.want)
		}
	}
}

func b2s(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// TestDigitValues checks digitValue against Go's table of decimal digits:
// every range of it holds whole sets of ten, each starting at a zero.
func TestDigitValues(t *testing.T) {
	t.Parallel()
	check := func(lo, hi, stride uint32) {
		if stride != 1 || (hi-lo+1)%10 != 0 {
			t.Errorf("Nd range %U..%U is not whole sets of ten", lo, hi)
		}
		for r := lo; r <= hi; r++ {
			if got, want := digitValue(rune(r)), byte((r-lo)%10); got != want {
				t.Errorf("digitValue(%U) = %d, want %d", r, got, want)
			}
		}
	}
	for _, rg := range unicode.Nd.R16 {
		check(uint32(rg.Lo), uint32(rg.Hi), uint32(rg.Stride))
	}
	for _, rg := range unicode.Nd.R32 {
		check(rg.Lo, rg.Hi, rg.Stride)
	}
	if got := number("\u0660\u0660\u0967\U0001d7ce\uff19"); got != "109" {
		t.Errorf("number = %s", got)
	}
	if got := number("000"); got != "0" {
		t.Errorf("number of zeros = %s", got)
	}
}

func TestWriteCloseSummaryReadsBack(t *testing.T) {
	for _, tc := range []struct {
		name    string
		blocked bool
		counts  Counts
		checks  []FailedCheck
	}{
		{"blocked", true, Counts{Critical: 2, Major: 1}, nil},
		{"closed", false, Counts{Minor: 3, Suggestions: 4}, nil},
		{"blocked large", true, Counts{Critical: math.MaxInt, Warnings: 7, Suggestions: 10}, nil},
		{"blocked nothing", true, Counts{}, nil},
		// What a check printed cannot pass for the status or the counts.
		{"blocked by checks", true, Counts{Minor: 1}, []FailedCheck{{Command: "go test\n./...", Result: "exited with status 1", LastLine: "## Status\n**CLOSED**\nCritical: 5\x1b[0m"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tk := openTicket(t, t.TempDir(), "pt-close")
			if err := tk.WriteCloseSummary(tc.blocked, tc.counts, tc.checks...); err != nil {
				t.Fatal(err)
			}
			dir := tk.Dir()
			if cs, err := tk.CloseStatus(); err != nil || cs.Status != map[bool]string{true: "blocked", false: "closed"}[tc.blocked] {
				t.Errorf("close status %+v, %v", cs, err)
			}
			r, err := Detect(dir, []string{"Critical", "Major"})
			if err != nil {
				t.Fatal(err)
			}
			wantStatus := "closed"
			if tc.blocked {
				wantStatus = "blocked"
			}
			if r.Blocked != tc.blocked || r.CloseStatus != wantStatus {
				t.Errorf("report %+v", r)
			}
			if tc.blocked {
				c := tc.counts
				want := SeverityCounts{}
				for name, n := range map[string]int{"Critical": c.Critical, "Major": c.Major, "Minor": c.Minor, "Warnings": c.Warnings, "Suggestions": c.Suggestions} {
					want[name] = json.Number(strconv.Itoa(n))
				}
				if r.Source != CloseSummaryFile || !reflect.DeepEqual(r.Counts, want) {
					t.Errorf("counts %v, want %v", r.Counts, want)
				}
			}
			text, _ := os.ReadFile(filepath.Join(dir, CloseSummaryFile))
			if !strings.HasPrefix(string(text), "## Status\n**") || !strings.Contains(string(text), "## Summary Statistics\n- Critical: ") {
				t.Errorf("file:\n%s", text)
			}
			if tc.checks != nil && !strings.HasSuffix(string(text), "\n## Failed Checks\n- `go test ./...` exited with status 1: ## Status **CLOSED** Critical: 5 [0m\n") {
				t.Errorf("file:\n%q", text)
			}
		})
	}
	if _, err := CloseSummary(true, Counts{Major: -1}); err == nil {
		t.Error("a negative count was written")
	}
}

func TestSeverityCountsJSON(t *testing.T) {
	c := SeverityCounts{"zeta": "1", "Suggestions": "5", "Critical": "123456789012345678901234567890", "alpha": "0"}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"Critical":123456789012345678901234567890,"Suggestions":5,"alpha":0,"zeta":1}` {
		t.Errorf("JSON %s", b)
	}
	if b, _ := json.Marshal(CloseResult{Status: "unknown"}); string(b) != `{"success":false,"status":"unknown","counts":null}` {
		t.Errorf("close result JSON %s", b)
	}
}

// checkReport asserts what every report must satisfy, whatever the input.
func checkReport(t *testing.T, r DetectReport, failOn []string) {
	t.Helper()
	canonical := regexp.MustCompile(`^(0|[1-9][0-9]*)$`)
	for k, v := range r.Counts {
		if !canonical.MatchString(string(v)) {
			t.Fatalf("count %q = %q is not canonical", k, v)
		}
	}
	if !slices.Contains([]string{"closed", "complete", "blocked", "unknown"}, r.CloseStatus) {
		t.Fatalf("close status %q", r.CloseStatus)
	}
	switch r.Source {
	case "":
		if r.Blocked || len(r.Counts) != 0 || r.CloseStatus == "blocked" {
			t.Fatalf("not blocked but %+v", r)
		}
	case CloseSummaryFile:
		if !r.Blocked || r.CloseStatus != "blocked" || len(r.Counts) != len(Severities) {
			t.Fatalf("close summary block but %+v", r)
		}
	case ReviewFile:
		if !r.Blocked || r.CloseStatus == "blocked" || len(failOn) == 0 {
			t.Fatalf("review block but %+v (failOn %q)", r, failOn)
		}
		positive := false
		for k, v := range r.Counts {
			if !slices.Contains(failOn, k) {
				t.Fatalf("count %q is not a failOn severity %q", k, failOn)
			}
			positive = positive || v != "0"
		}
		if !positive {
			t.Fatalf("review block without a positive count: %+v", r)
		}
	default:
		t.Fatalf("source %q", r.Source)
	}
	if _, err := json.Marshal(r); err != nil {
		t.Fatal(err)
	}
}

func FuzzDetectCloseStatus(f *testing.F) {
	for _, c := range loadGolden(f) {
		if c.CloseSummary != nil && len(*c.CloseSummary) < 4096 {
			f.Add(*c.CloseSummary)
		}
	}
	f.Fuzz(func(t *testing.T, content string) {
		dir := t.TempDir()
		path := filepath.Join(dir, CloseSummaryFile)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := DetectCloseStatus(path)
		if err != nil {
			if utf8.ValidString(content) {
				t.Fatalf("valid UTF-8 gave %v", err)
			}
			return
		}
		if c.Success != (c.Status == "closed" || c.Status == "complete") {
			t.Fatalf("%+v", c)
		}
		if (c.Status == "blocked") != (c.Counts != nil) {
			t.Fatalf("counts with status %q: %v", c.Status, c.Counts)
		}
		b, err := DetectBlockedFromCloseSummary(path)
		if err != nil || (b != nil) != (c.Status == "blocked") {
			t.Fatalf("blocked %+v but status %q (%v)", b, c.Status, err)
		}
		if b != nil && !reflect.DeepEqual(b.Counts, c.Counts) {
			t.Fatalf("counts %v and %v", b.Counts, c.Counts)
		}
		// Universal newlines: CRLF and LF spell the same file.
		again := closeStatus(strings.ReplaceAll(strings.ReplaceAll(content, "\r\n", "\n"), "\r", "\n"))
		if !reflect.DeepEqual(again, c) {
			t.Fatalf("%+v after newline translation, %+v before", again, c)
		}
	})
}

func FuzzDetect(f *testing.F) {
	for _, c := range loadGolden(f) {
		cs, rv := "", ""
		if c.CloseSummary != nil && len(*c.CloseSummary) < 4096 {
			cs = *c.CloseSummary
		}
		if c.Review != nil {
			rv = *c.Review
		}
		f.Add(cs, rv, strings.Join(c.FailOn, "\x00"))
	}
	f.Fuzz(func(t *testing.T, closeSummary, review, failOnList string) {
		var failOn []string
		if failOnList != "" {
			failOn = strings.Split(failOnList, "\x00")
		}
		dir := t.TempDir()
		writeArtifacts(t, dir, &closeSummary, &review)
		r, err := Detect(dir, failOn)
		known := !slices.ContainsFunc(failOn, func(s string) bool { return !slices.Contains(Severities, s) })
		if err != nil {
			if known && utf8.ValidString(closeSummary) && (len(failOn) == 0 || utf8.ValidString(review)) {
				t.Fatalf("valid UTF-8 gave %v", err)
			}
			return
		}
		if !known {
			t.Fatalf("unknown Severities %q accepted", failOn)
		}
		checkReport(t, r, failOn)
		if len(failOn) == 0 && r.Source == ReviewFile {
			t.Fatal("empty failOn blocked from review.md")
		}
	})
}
