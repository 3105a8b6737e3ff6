package review

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"peal/config"
)

func TestParseReview(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		stdout     string
		exit       int
		present    bool
		structured bool
		count      int
	}{
		{"json findings", `{"findings":[{"id":"F1","message":"m"}]}`, 0, true, true, 1},
		{"json findings, non-zero exit", `{"findings":[{"id":"F1"},{"id":"F2"}]}`, 1, true, true, 2},
		{"json empty findings", `{"findings":[]}`, 0, false, true, 0},
		{"json empty findings, exit 1", `{"findings":[]}`, 1, false, true, 0},
		{"json issues", `{"issues":[{"id":"I1"}]}`, 0, true, true, 1},
		{"json count", `{"count":3}`, 0, true, false, 1},
		{"json count zero", `{"count":0}`, 0, false, false, 0},
		{"json top-level array", `[{"id":"F1"}]`, 0, true, true, 1},
		{"json empty array", `[]`, 1, false, true, 0},
		{"json other object", `{"status":"ok"}`, 1, false, false, 0},
		{"json odd field types", `{"findings":[{"id":7}], "count":"x"}`, 0, true, false, 1},
		{"json null findings", `{"findings":null}`, 1, false, false, 0},
		{"json number", `5`, 1, false, false, 0},
		{"json escapes", `{"findings":[{"id":"F\u00e91","message":"say \"hi\"\n","line":null}]}`, 0, true, true, 1},
		{"json array of strings", `["a","b"]`, 0, true, false, 1},
		{"human zero", "reviewing...\n0 finding(s).\n", 0, false, false, 0},
		{"human zero no dot", "0 finding(s)", 0, false, false, 0},
		{"human zero with rate", "0 finding(s) at 1200 tokens/sec.", 0, false, false, 0},
		{"human zero but non-zero exit", "0 finding(s).", 1, true, false, 1},
		{"human findings", "a.go:3 [warning] unused (F1)\n1 finding(s).", 0, true, false, 1},
		{"text, non-zero exit", "something odd", 2, true, false, 1},
		{"blank, exit 0", "  \n", 0, false, false, 0},
		{"blank, non-zero exit", "", 1, true, false, 1},
		{"broken json", `{"findings":[`, 0, true, false, 1},
		// As Peal: the first of findings and issues that is an array
		// decides, even empty; count speaks only without either array and
		// only as a whole number.
		{"empty findings outweigh count", `{"findings":[],"count":3}`, 0, false, true, 0},
		{"empty findings outweigh issues", `{"findings":[],"issues":[{"id":"I1"}]}`, 0, false, true, 0},
		{"findings outweigh issues", `{"findings":[{"id":"F1"}],"issues":[{"id":"I1"},{"id":"I2"}]}`, 0, true, true, 1},
		{"findings not an array, issues", `{"findings":"none","issues":[{"id":"I1"}]}`, 0, true, true, 1},
		{"count with a fraction", `{"count":2.5}`, 0, false, false, 0},
		{"count with an exponent", `{"count":1e2}`, 0, false, false, 0},
		{"negative count", `{"count":-1}`, 0, false, false, 0},
		{"count as text", `{"count":"3"}`, 0, false, false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rv := ParseReview(tc.stdout, tc.exit)
			if rv.Present != tc.present || rv.Structured != tc.structured || rv.Count() != tc.count {
				t.Fatalf("present %v structured %v count %d, want %v %v %d", rv.Present, rv.Structured, rv.Count(), tc.present, tc.structured, tc.count)
			}
		})
	}
}

func TestReviewSuggestions(t *testing.T) {
	t.Parallel()
	rv := ParseReview(`{"findings":[{"id":"A","suggestion":"use x"},{"id":"B"},{"id":"C","suggestion":" use y "}]}`, 0)
	if got := rv.Suggestions(); !slices.Equal(got, []string{"use x", "use y"}) {
		t.Fatalf("%q", got)
	}
}

func ids(ds []dismissal) string {
	var out []string
	for _, d := range ds {
		out = append(out, d.ID+"="+d.Reason)
	}
	return strings.Join(out, " ")
}

func TestParseTriage(t *testing.T) {
	t.Parallel()
	findings := []Finding{{ID: "F1"}, {ID: "F2"}, {ID: "F10"}}
	all := "F1=false_positive F2=false_positive F10=false_positive"
	cases := []struct {
		answer, want string
	}{
		{"Nothing to address.", all},
		{"I checked: nothing to fix here", all},
		{"These are all false positives", all},
		{"All false positive.", all},
		{"There are no findings to address.", all},
		{"no issues to address", all},
		{"No, nothing.", all},
		{"no", all},
		{"Nope!", all},
		{"No. F1 needs a fix because the variable leaks into the public API.", "F2=false_positive F10=false_positive"},
		{"We should fix F2.", "F1=false_positive F10=false_positive"},
		{"F1 is noise. F2 and F10 need attention.", "F1=false_positive"},
		{"Please address f10; F1 is fine", "F1=false_positive F2=false_positive"},
		{"Fix F1, F2 and F10.", ""},
		{"F1 looks wrong to me.", ""},
		{"Let me think about it", ""},
		{"", ""},
		{"fix F100", ""},
	}
	for _, tc := range cases {
		if got := ids(parseTriage(tc.answer, findings)); got != tc.want {
			t.Errorf("%q: dismiss %q, want %q", tc.answer, got, tc.want)
		}
	}
}

func TestTriageByPatterns(t *testing.T) {
	t.Parallel()
	findings := []Finding{
		{ID: "A", File: "vendor/x.go", Message: "style"},
		{ID: "B", Path: "gen/y.go", Message: "long line"},
		{ID: "C", File: "main.go", Message: "TODO left in code"},
		{ID: "", File: "vendor/z.go"},
	}
	patterns := []config.DismissPattern{{Pattern: "vendor/", Reason: "out_of_scope"}, {Pattern: "gen/", Reason: "already_correct"}, {Pattern: "line", Reason: "wrong_suggestion"}}
	if got := ids(triageByPatterns(findings, patterns)); got != "A=out_of_scope B=already_correct" {
		t.Fatalf("%q", got)
	}
}

func TestParseReviewFields(t *testing.T) {
	t.Parallel()
	rv := ParseReview(`{"findings":[{"id":"F\u00e9","file":"a.go","line":12,"range":{"start":12,"end":14},"severity":"error","category":"bug","confidence":0.75,"message":"tab\there \ud83d\ude00","suggestion":"x","cursor_uri":"cursor://file/a.go:12","evidence_lines":[12,13],"extra":{"nested":[1,2,{"a":null}]}}],"issues":[{"id":"I1","path":"p/q.go"}],"count":2}`, 1)
	want := []Finding{
		{ID: "Fé", File: "a.go", Line: 12, Range: &LineRange{12, 14}, Severity: "error", Category: "bug", Confidence: 0.75, Message: "tab\there 😀",
			Suggestion: "x", CursorURI: "cursor://file/a.go:12", EvidenceLines: []int{12, 13}},
	}
	if !rv.Structured || !reflect.DeepEqual(rv.Findings, want) {
		t.Fatalf("findings %+v\nwant     %+v", rv.Findings, want)
	}
	rv = ParseReview(`{"issues":[{"id":"I1","path":"p/q.go","message":"m"}]}`, 0)
	if want := []Finding{{ID: "I1", Path: "p/q.go", Message: "m"}}; !rv.Structured || !reflect.DeepEqual(rv.Findings, want) {
		t.Fatalf("issues %+v", rv.Findings)
	}
}

// TestParseReviewDecisions pins what differs from a plain struct decode:
// keys match exactly, as stet writes them; invalid UTF-8 becomes U+FFFD; a
// wrongly typed field makes the review unstructured.
func TestParseReviewDecisions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		stdout     string
		structured bool
		want       []Finding
	}{
		{"keys are case-sensitive", `{"findings":[{"ID":"x","Message":"m","id":"F1"}]}`, true, []Finding{{ID: "F1"}}},
		{"a repeated key keeps its last value", `{"findings":[{"id":"a","id":"b"}]}`, true, []Finding{{ID: "b"}}},
		{"invalid UTF-8", "{\"findings\":[{\"id\":\"F1\",\"message\":\"bad \xff byte\"}]}", true, []Finding{{ID: "F1", Message: "bad \ufffd byte"}}},
		{"a fractional line", `{"findings":[{"id":"F1","line":3.5}]}`, false, nil},
		{"a range with a string", `{"findings":[{"id":"F1","range":{"start":"1"}}]}`, false, nil},
		{"a range key in capitals is not the range's", `{"findings":[{"id":"F1","range":{"Start":4,"end":5}}]}`, true, []Finding{{ID: "F1", Range: &LineRange{0, 5}}}},
		{"nulls are unset", `{"findings":[{"id":null,"line":null,"range":null,"evidence_lines":null}]}`, true, []Finding{{}}},
		{"evidence lines as text", `{"findings":[{"id":"F1","evidence_lines":"1,2"}]}`, false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rv := ParseReview(tc.stdout, 0)
			if rv.Structured != tc.structured || !rv.Present || !reflect.DeepEqual(rv.Findings, tc.want) {
				t.Fatalf("structured %v present %v findings %+v, want %v %+v", rv.Structured, rv.Present, rv.Findings, tc.structured, tc.want)
			}
		})
	}
}

// referenceReview decodes a review independently of decodeReview: with
// json.RawMessage at every level, each known field decoded by encoding/json
// into its Go type, objects read by exact key. isJSON is false when the
// text is not one JSON value.
func referenceReview(stdout string) (present, structured, isJSON bool, findings []Finding) {
	if !json.Valid([]byte(stdout)) {
		return false, false, false, nil
	}
	list := func(raw json.RawMessage) ([]Finding, int, bool) {
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil, 0, false
		}
		var out []Finding
		typed := true
		for _, item := range items {
			f, ok := referenceFinding(item)
			typed = typed && ok
			out = append(out, f)
		}
		return out, len(items), typed
	}
	data := []byte(stdout)
	switch data[0] {
	case '[':
		fs, n, typed := list(data)
		if !typed {
			fs = nil
		}
		return n > 0, typed, true, fs
	case '{':
	default:
		return false, false, true, nil
	}
	var doc map[string]json.RawMessage
	if json.Unmarshal(data, &doc) != nil {
		return false, false, true, nil
	}
	// The first of findings and issues that is an array decides; count
	// speaks only without either, as an integer that fits 64 bits.
	for _, key := range []string{"findings", "issues"} {
		raw, ok := doc[key]
		if !ok || raw[0] != '[' {
			continue
		}
		fs, items, typed := list(raw)
		if !typed {
			fs = nil
		}
		return items > 0, typed, true, fs
	}
	var count uint64
	if raw, ok := doc["count"]; ok && json.Unmarshal(raw, &count) == nil && !strings.ContainsAny(string(raw), ".eE") {
		return count > 0, false, true, nil
	}
	return false, false, true, nil
}

// referenceFinding reads one finding: exact keys through a map of raw
// values, each field through encoding/json; ok is false when it is not an
// object or a known field has another type.
func referenceFinding(raw json.RawMessage) (f Finding, ok bool) {
	var fields map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &fields) != nil {
		return f, false
	}
	ok = true
	set := func(key string, dst any) {
		if v, present := fields[key]; present && string(v) != "null" && json.Unmarshal(v, dst) != nil {
			ok = false
		}
	}
	for key, dst := range map[string]any{"id": &f.ID, "file": &f.File, "path": &f.Path, "line": &f.Line, "severity": &f.Severity,
		"category": &f.Category, "confidence": &f.Confidence, "message": &f.Message, "suggestion": &f.Suggestion,
		"cursor_uri": &f.CursorURI, "evidence_lines": &f.EvidenceLines} {
		set(key, dst)
	}
	if v, present := fields["range"]; present && string(v) != "null" {
		var r map[string]json.RawMessage
		if v[0] != '{' || json.Unmarshal(v, &r) != nil {
			return f, false
		}
		f.Range = &LineRange{}
		for key, dst := range map[string]*int{"start": &f.Range.Start, "end": &f.Range.End} {
			if x, present := r[key]; present && string(x) != "null" && json.Unmarshal(x, dst) != nil {
				ok = false
			}
		}
	}
	return f, ok
}

// FuzzParseReview compares ParseReview with the reference decode, finding by
// finding and field by field, and checks the heuristic for text.
func FuzzParseReview(f *testing.F) {
	f.Add(`{"findings":[{"id":"F1","file":"a.go","line":3,"severity":"error"}]}`, 0)
	f.Add(`[{"id":"x"}]`, 1)
	f.Add("0 finding(s).", 0)
	f.Add(`{"count": 2.5}`, 0)
	f.Add("garbage", 3)
	f.Add(`{"findings":[{"id":"a\ud800"}],"issues":{}}`, 0)
	f.Add(`[1, "x", {"id": "F"}]`, 0)
	f.Add(`{"findings":[{"ID":"x","id":"y","range":{"start":1,"END":2},"evidence_lines":[1,2]}]}`, 0)
	f.Add("{\"findings\":[{\"message\":\"\xff\xfe\"}]}", 0)
	f.Add(`{"count":1e999,"findings":[{"line":1e2,"confidence":1e999}]}`, 0)
	f.Add(`{"findings":[],"issues":[{"id":"I"}],"count":18446744073709551616}`, 0)
	f.Fuzz(func(t *testing.T, stdout string, exit int) {
		rv := ParseReview(stdout, exit)
		trimmed := strings.TrimSpace(stdout)
		present, structured, isJSON, findings := referenceReview(trimmed)
		if isJSON {
			if rv.Present != present || rv.Structured != structured {
				t.Fatalf("%q: present %v structured %v, reference %v %v", stdout, rv.Present, rv.Structured, present, structured)
			}
			if len(rv.Findings) != len(findings) {
				t.Fatalf("%q: %d findings, reference %d", stdout, len(rv.Findings), len(findings))
			}
			for i := range findings {
				if got, want := rv.Findings[i], findings[i]; !reflect.DeepEqual(normalize(got), normalize(want)) {
					t.Fatalf("%q: finding %d\n%+v\nreference\n%+v", stdout, i, got, want)
				}
			}
		}
		if rv.Count() < 0 || (rv.Present && rv.Count() == 0 && !rv.Structured) {
			t.Fatalf("inconsistent review %+v", rv)
		}
		if !rv.Structured && len(rv.Findings) != 0 {
			t.Fatal("findings without structure")
		}
		if trimmed == "" && rv.Present != (exit != 0) {
			t.Fatalf("blank output, exit %d: present %v", exit, rv.Present)
		}
	})
}

// normalize makes an empty evidence list and a missing one compare equal.
func normalize(f Finding) Finding {
	if len(f.EvidenceLines) == 0 {
		f.EvidenceLines = nil
	}
	return f
}

func FuzzParseTriage(f *testing.F) {
	f.Add("Nothing to address.", "F1,F2")
	f.Add("We need to fix F2. F1 is fine", "F1,F2,F3")
	f.Add("no", "x")
	f.Add("fix a; address b", "a,b,c")
	f.Fuzz(func(t *testing.T, answer, idList string) {
		var findings []Finding
		seen := map[string]bool{}
		for _, id := range strings.Split(idList, ",") {
			if !seen[id] {
				seen[id] = true
				findings = append(findings, Finding{ID: id})
			}
		}
		ds := parseTriage(answer, findings)
		got := map[string]bool{}
		for _, d := range ds {
			if d.ID == "" || !seen[d.ID] || got[d.ID] || d.Reason != "false_positive" {
				t.Fatalf("bad dismissal %+v of %q", d, idList)
			}
			got[d.ID] = true
		}
	})
}

// BenchmarkReviewAndTriage10k parses a review of 10 000 findings and decides
// its triage (LLM answer and patterns): the whole must stay linear.
func BenchmarkReviewAndTriage10k(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		findings := make([]Finding, n)
		var answer strings.Builder
		answer.WriteString("Most of these are noise. ")
		for i := range findings {
			findings[i] = Finding{ID: fmt.Sprintf("F%d", i), File: fmt.Sprintf("pkg%d/file.go", i%50), Line: i, Severity: "warning",
				Category: "style", Confidence: 0.5, Message: fmt.Sprintf("finding number %d about naming", i), Suggestion: "rename it"}
			if i%10 == 0 {
				fmt.Fprintf(&answer, "We need to fix F%d. ", i)
			}
		}
		data, _ := json.Marshal(map[string]any{"findings": findings})
		patterns := []config.DismissPattern{{Pattern: "pkg7/", Reason: "out_of_scope"}, {Pattern: "number 99", Reason: "false_positive"}}
		review := string(data)
		b.Run(fmt.Sprintf("findings=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(review)))
			for b.Loop() {
				rv := ParseReview(review, 1)
				if len(parseTriage(answer.String(), rv.Findings)) != n-n/10 {
					b.Fatal("wrong triage")
				}
				triageByPatterns(rv.Findings, patterns)
			}
			// The cost per finding stays flat from 1 000 to 10 000 findings if the work is linear.
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/finding")
		})
	}
}
