package tickets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"peal/internal/jsonobj"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestValidTicketID(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]bool{
		"pt-te9b": true, "abc-1": true, "a-b": true,
		"": false, "pt": false, "pt-": false, "-x": false, "PT-te9b": false, "pt-te9b-2": false,
		"pt_te9b": false, "1pt-x": false, "../x": false, "pt-x/..": false, "pt-x\n": false, "pt-té": false,
	} {
		if got := ValidID(id); got != want {
			t.Errorf("ValidID(%q) = %v", id, got)
		}
	}
	if got := ticketDir("/k", "pt-1"); got != filepath.Join("/k", "tickets", "pt-1") {
		t.Errorf("TicketDir = %s", got)
	}
}

func TestModelsFor(t *testing.T) {
	t.Parallel()
	str := func(p *string) string {
		if p == nil {
			return "null"
		}
		return *p
	}
	for _, tc := range []struct {
		n                      int
		fixer, second, worker  string
		wantF, wantS, wantWork string
	}{
		{1, "f", "s", "w", "null", "null", "null"},
		{2, "f", "s", "w", "f", "null", "null"},
		{3, "f", "s", "w", "f", "s", "w"},
		{7, "f", "s", "w", "f", "s", "w"},
		{3, "f", "", "", "f", "null", "null"},
		{2, "", "s", "w", "null", "null", "null"},
		{0, "f", "s", "w", "null", "null", "null"},
	} {
		e := ModelsFor(tc.n, tc.fixer, tc.second, tc.worker)
		if str(e.Fixer) != tc.wantF || str(e.ReviewerSecondOpinion) != tc.wantS || str(e.Worker) != tc.wantWork {
			t.Errorf("ModelsFor(%d) = %s %s %s", tc.n, str(e.Fixer), str(e.ReviewerSecondOpinion), str(e.Worker))
		}
	}
	b, _ := json.Marshal(ModelsFor(2, "zai/glm-4.7", "", ""))
	if string(b) != `{"fixer":"zai/glm-4.7","reviewerSecondOpinion":null,"worker":null}` {
		t.Errorf("JSON %s", b)
	}
}

// TestSpecExampleRoundTrip reads the example of ticketflow's retry-state
// spec, resumes its attempt in progress and completes it: attempt 1 comes
// back exactly as written.
func TestSpecExampleRoundTrip(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("testdata", "spec_example.json"))
	if err != nil {
		t.Fatal(err)
	}
	st, _, err := decodeRetryState(data, "pt-te9b")
	if err != nil {
		t.Fatal(err)
	}
	if st.Version != 1 || st.TicketID != "pt-te9b" || st.Status != TicketActive || st.RetryCount != 1 ||
		st.LastAttemptAt != "2026-02-10T13:00:00Z" || len(st.Attempts) != 2 || len(st.Warnings) != 0 {
		t.Fatalf("top level %+v", st)
	}
	a1, a2 := st.Attempts[0], st.Attempts[1]
	if a1.AttemptNumber != 1 || a1.Status != AttemptBlocked || a1.Trigger != TriggerInitial ||
		a1.StartedAt != "2026-02-10T12:30:00Z" || a1.CompletedAt != "2026-02-10T12:45:00Z" ||
		a1.CloseSummaryRef != ".tf/knowledge/tickets/pt-te9b/close-summary.md" {
		t.Errorf("attempt 1 %+v", a1)
	}
	if !slices.Equal(a1.QualityGate.FailOn, []string{"Critical", "Major"}) ||
		!reflect.DeepEqual(a1.QualityGate.Counts, Counts{Major: 2, Minor: 3, Warnings: 1}) {
		t.Errorf("gate %+v", a1.QualityGate)
	}
	if a1.Escalation.Fixer != nil || a1.Escalation.Worker != nil || a1.Escalation.ReviewerSecondOpinion != nil {
		t.Errorf("attempt 1 escalation %+v", a1.Escalation)
	}
	if a2.Status != AttemptInProgress || a2.Trigger != TriggerQualityGate || a2.CompletedAt != "" ||
		a2.CloseSummaryRef != "" || a2.Escalation.Fixer == nil || *a2.Escalation.Fixer != "zai/glm-4.7" {
		t.Errorf("attempt 2 %+v", a2)
	}
	var compact bytes.Buffer
	json.Compact(&compact, data)
	if out, err := json.Marshal(st); err != nil || string(out) != compact.String() {
		t.Errorf("marshaling the view does not give the file (%v):\n%s", err, out)
	}

	kdir := t.TempDir()
	os.MkdirAll(ticketDir(kdir, "pt-te9b"), 0o755)
	os.WriteFile(filepath.Join(ticketDir(kdir, "pt-te9b"), RetryStateFile), data, 0o644)
	tk := openTicket(t, kdir, "pt-te9b")
	if a, resumed, err := tk.Begin(at(0), escalateWith("zai/glm-4.7", "", "")); err != nil || !resumed || a.AttemptNumber != 2 {
		t.Fatalf("resume: %+v %v %v", a, resumed, err)
	}
	if err := tk.Complete(at(60), AttemptClosed, nil); err != nil {
		t.Fatal(err)
	}
	saved, _ := os.ReadFile(filepath.Join(tk.Dir(), RetryStateFile))
	before, after := attemptsOf(t, data), attemptsOf(t, saved)
	if string(before[0]) != string(after[0]) {
		t.Errorf("attempt 1 changed:\n%s\n%s", before[0], after[0])
	}
	if got := jsonValue(t, saved).(map[string]any); got["retryCount"] != json.Number("0") || got["status"] != TicketClosed {
		t.Errorf("aggregate after the close: %s", saved)
	}
}

// attemptsOf is the attempts of a file, each compacted.
func attemptsOf(t *testing.T, data []byte) []string {
	t.Helper()
	var doc struct{ Attempts []json.RawMessage }
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range doc.Attempts {
		var b bytes.Buffer
		json.Compact(&b, a)
		out = append(out, b.String())
	}
	return out
}

// TestUnknownMembersSurvive writes a file as a newer tf might, with members
// schema v1 does not name at every level, and checks that a rewrite by peal
// keeps every one of them, as written.
func TestUnknownMembersSurvive(t *testing.T) {
	t.Parallel()
	const file = `{
  "version": 1, "ticketId": "pt-x", "lastAttemptAt": "2026-02-10T12:00:00Z", "status": "active",
  "retryCount": 0, "owner": {"name": "ralph"}, "TicketID": "case variant, kept apart",
  "attempts": [{
    "attemptNumber": 1, "startedAt": "2026-02-10T12:00:00Z", "completedAt": "2026-02-10T12:10:00Z",
    "status": "error", "trigger": "ralph_retry", "phase": "tf-fix",
    "qualityGate": {"failOn": ["critical"], "counts": {"Critical": 1, "critical": 3, "Blocker": 1e2}, "mode": "strict"},
    "escalation": {"fixer": null, "reviewerSecondOpinion": "m", "worker": null, "planner": "p"}
  }, {
    "attemptNumber": 2, "startedAt": "2026-02-10T12:20:00Z", "status": "in_progress", "trigger": "manual_retry",
    "escalation": {"fixer": null, "reviewerSecondOpinion": null, "worker": null, "planner": "q"}
  }]
}`
	kdir := t.TempDir()
	dir := ticketDir(kdir, "pt-x")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, RetryStateFile), []byte(file), 0o644)
	tk := openTicket(t, kdir, "pt-x")
	if _, _, err := tk.Begin(at(60), escalateWith("f", "", "")); err != nil {
		t.Fatal(err)
	}
	if err := tk.Complete(at(120), AttemptBlocked, &QualityGate{FailOn: []string{"Major"}, Counts: Counts{Major: 1}}); err != nil {
		t.Fatal(err)
	}
	saved, _ := os.ReadFile(filepath.Join(dir, RetryStateFile))
	got := jsonValue(t, saved).(map[string]any)
	if !reflect.DeepEqual(got["owner"], map[string]any{"name": "ralph"}) || got["TicketID"] != "case variant, kept apart" || got["ticketId"] != "pt-x" {
		t.Errorf("top level lost members: %s", saved)
	}
	if before, after := attemptsOf(t, []byte(file)), attemptsOf(t, saved); before[0] != after[0] {
		t.Errorf("attempt 1, which peal did not touch, changed:\n%s\n%s", before[0], after[0])
	}
	a := got["attempts"].([]any)[1].(map[string]any)
	if e := a["escalation"].(map[string]any); e["planner"] != "q" || e["fixer"] != "f" {
		t.Errorf("escalation of the resumed attempt: %v", e)
	}
	if a["status"] != AttemptBlocked || a["trigger"] != TriggerManualRetry || got["retryCount"] != json.Number("1") {
		t.Errorf("the resumed attempt: %s", saved)
	}
}

// TestTicketflowFilesAccepted: what ticketflow's reader accepts, peal
// accepts too, with a warning where it is odd, instead of setting it aside
// and starting again at attempt 1; a rewrite keeps every member as written.
func TestTicketflowFilesAccepted(t *testing.T) {
	t.Parallel()
	const file = `{
  "version": 1.0,
  "ticketId": "pt-old",
  "attempts": [
    {"attemptNumber": 1.0, "startedAt": "2026-02-10T12:00:00Z", "completedAt": null, "status": "blocked",
     "trigger": "initial", "qualityGate": null, "escalation": null, "closeSummaryRef": null},
    {"attemptNumber": 2, "startedAt": "2026-02-10T12:30:00Z", "status": "blocked", "trigger": "quality_gate",
     "qualityGate": {"failOn": ["Major"], "counts": {"Major": 2}}}
  ],
  "lastAttemptAt": null,
  "status": "active",
  "retryCount": 2.0
}`
	kdir := t.TempDir()
	dir := ticketDir(kdir, "pt-new")
	os.MkdirAll(dir, 0o755)
	path := filepath.Join(dir, RetryStateFile)
	os.WriteFile(path, []byte(file), 0o644)
	tk, warnings, err := open(kdir, "pt-new", at(0))
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	if len(*warnings) != 1 || !strings.Contains((*warnings)[0], `it names ticket "pt-old", but it is the file of ticket pt-new`) {
		t.Errorf("warnings %q", *warnings)
	}
	if aside, _ := filepath.Glob(path + ".corrupt-*"); len(aside) != 0 {
		t.Fatalf("kept aside: %v", aside)
	}
	st := tk.State()
	if st.RetryCount != 2 || len(st.Attempts) != 2 || st.Attempts[0].AttemptNumber != 1 || !tk.Exhausted(2) {
		t.Errorf("read as %+v", st)
	}
	a, resumed, err := tk.Begin(at(60), nil)
	if err != nil || resumed || a.AttemptNumber != 3 || a.Trigger != TriggerQualityGate {
		t.Fatalf("attempt %+v %v %v", a, resumed, err)
	}
	if err := tk.Complete(at(120), AttemptError, nil); err != nil {
		t.Fatal(err)
	}
	saved, _ := os.ReadFile(path)
	before, after := attemptsOf(t, []byte(file)), attemptsOf(t, saved)
	if len(after) != 3 || before[0] != after[0] || before[1] != after[1] {
		t.Errorf("attempts 1 and 2 changed:\n%s", saved)
	}
	for _, kept := range []string{`"version": 1.0`, `"ticketId": "pt-old"`, `"retryCount": 2.0`, `"completedAt": null`} {
		if !strings.Contains(string(saved), kept) {
			t.Errorf("%s not kept:\n%s", kept, saved)
		}
	}
	if len(*warnings) != 1 {
		t.Errorf("the same oddity warned again: %q", *warnings)
	}
}

// TestConcurrentWriterKeepsItsWork plays ticketflow, which writes without a
// lock, between peal's start and end of an attempt: what it wrote stays.
func TestConcurrentWriterKeepsItsWork(t *testing.T) {
	t.Parallel()
	kdir := t.TempDir()
	tk, warnings, err := open(kdir, "pt-race", at(0))
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	if _, _, err := tk.Begin(at(0), nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(tk.Dir(), RetryStateFile)
	// tf, as its start_attempt and complete_attempt do: it takes over the
	// attempt in progress, ends it, and runs two more of its own.
	data, _ := os.ReadFile(path)
	doc, err := jsonobj.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	items, _ := jsonobj.ArrayOf(doc, "attempts")
	first, _ := jsonobj.Parse(items[0])
	first.Set("trigger", "ralph_retry")
	items[0] = first.Compact()
	items = append(items,
		json.RawMessage(`{"attemptNumber": 2, "startedAt": "2026-02-10T12:05:00Z", "completedAt": "2026-02-10T12:06:00Z", "status": "blocked", "trigger": "ralph_retry", "note": "tf"}`),
		json.RawMessage(`{"attemptNumber": 3, "startedAt": "2026-02-10T12:07:00Z", "status": "in_progress", "trigger": "ralph_retry"}`))
	doc.SetRaw("attempts", jsonobj.Array(items))
	doc.Set("retryCount", 1)
	doc.Set("extra", "tf's")
	os.WriteFile(path, doc.File(), 0o644)

	if err := tk.Complete(at(600), AttemptBlocked, nil); err != nil {
		t.Fatal(err)
	}
	st := onDisk(t, tk)
	if len(st.Attempts) != 3 || st.Attempts[1].Status != AttemptBlocked || st.Attempts[2].Status != AttemptInProgress {
		t.Fatalf("tf's attempts lost: %+v", st.Attempts)
	}
	if a := st.Attempts[0]; a.Status != AttemptBlocked || a.Trigger != "ralph_retry" || a.CompletedAt != stamp(at(600)) {
		t.Errorf("peal's attempt %+v", a)
	}
	// One more block is counted; the status is that of tf's attempt 3, which
	// is still running.
	if st.RetryCount != 2 || st.Status != TicketActive {
		t.Errorf("aggregate %+v", st)
	}
	if got := jsonValue(t, st.raw).(map[string]any); got["extra"] != "tf's" {
		t.Errorf("tf's member lost")
	}
	if len(*warnings) != 0 {
		t.Errorf("warnings %q", *warnings)
	}

	// A writer that starts the file over: peal's result is recorded again.
	tk.Begin(at(700), nil) // resumes tf's attempt 3, which is in progress
	os.WriteFile(path, freshDoc("pt-race", at(0)).File(), 0o644)
	if err := tk.Complete(at(800), AttemptClosed, nil); err != nil {
		t.Fatal(err)
	}
	st = onDisk(t, tk)
	if len(st.Attempts) != 1 || st.Attempts[0].AttemptNumber != 1 || st.Attempts[0].Status != AttemptClosed || st.Status != TicketClosed {
		t.Errorf("after a reset by another writer: %+v", st)
	}
	if len(*warnings) != 1 || !strings.Contains((*warnings)[0], "no longer holds attempt 3 of this run") {
		t.Errorf("warnings %q", *warnings)
	}
}

func TestLoadRetryState(t *testing.T) {
	t.Parallel()
	kdir := t.TempDir()
	if _, err := Load(kdir, "pt-none"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	if _, err := Load(kdir, "../etc"); !errors.Is(err, ErrInvalidID) {
		t.Errorf("invalid id: %v", err)
	}
	dir := ticketDir(kdir, "pt-bad")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, RetryStateFile), []byte("{"), 0o644)
	if _, err := Load(kdir, "pt-bad"); !errors.Is(err, ErrUnreadable) {
		t.Errorf("unreadable: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, RetryStateFile)); err != nil {
		t.Error("Load moved or removed an unreadable file")
	}
	tk := openTicket(t, kdir, "pt-ok")
	tk.Begin(at(0), nil)
	tk.Close()
	st, err := Load(kdir, "pt-ok")
	if err != nil || len(st.Attempts) != 1 {
		t.Errorf("%+v, %v", st, err)
	}
}

// TestDecode sorts files into those tf would not load (unreadable), those
// it loads and peal reads too (warnings where odd), and those it loads but
// peal cannot use; every message is one plain line, without Go's words.
func TestDecode(t *testing.T) {
	t.Parallel()
	valid := map[string]any{
		"version": 1, "ticketId": "pt-x", "attempts": []any{}, "lastAttemptAt": "2026-02-10T12:00:00Z", "status": "active",
	}
	without := func(k string) string {
		m := map[string]any{}
		for key, v := range valid {
			if key != k {
				m[key] = v
			}
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	with := func(k string, v any) string {
		m := map[string]any{}
		for key, v := range valid {
			m[key] = v
		}
		m[k] = v
		b, _ := json.Marshal(m)
		return string(b)
	}
	type want struct {
		kind     error // nil: read
		warnings int
	}
	cases := map[string]struct {
		data string
		want want
	}{
		"valid":              {with("retryCount", 2), want{nil, 0}},
		"empty":              {"", want{ErrUnreadable, 0}},
		"not json":           {"retry: 1", want{ErrUnreadable, 0}},
		"array":              {"[]", want{ErrUnreadable, 0}},
		"null":               {"null", want{ErrUnreadable, 0}},
		"trailing data":      {with("retryCount", 2) + "{}", want{ErrUnreadable, 0}},
		"truncated":          {with("retryCount", 2)[:40], want{ErrUnreadable, 0}},
		"version 2":          {with("version", 2), want{ErrUnusable, 0}},
		"version string":     {with("version", "1"), want{ErrUnusable, 0}},
		"version null":       {with("version", nil), want{nil, 1}},
		"version 1.0":        {strings.Replace(with("retryCount", 0), `"version":1`, `"version":1.0`, 1), want{nil, 0}},
		"ticket mismatch":    {with("ticketId", "pt-y"), want{nil, 1}},
		"ticket null":        {with("ticketId", nil), want{nil, 1}},
		"attempts null":      {with("attempts", nil), want{nil, 1}},
		"attempts object":    {with("attempts", map[string]any{}), want{ErrUnusable, 0}},
		"attempt no number":  {with("attempts", []any{map[string]any{"status": "closed"}}), want{nil, 1}},
		"attempt number 0":   {with("attempts", []any{map[string]any{"attemptNumber": 0}}), want{ErrUnusable, 0}},
		"status number":      {with("status", 3), want{nil, 0}},
		"retryCount null":    {with("retryCount", nil), want{nil, 0}},
		"retryCount -1":      {with("retryCount", -1), want{ErrUnusable, 0}},
		"retryCount 1e400":   {strings.Replace(with("retryCount", 0), `"retryCount":0`, `"retryCount":1e400`, 1), want{ErrUnusable, 0}},
		"lastAttemptAt null": {with("lastAttemptAt", nil), want{nil, 0}},
		"control characters": {with("ticketId", "\x1b]0;owned\x07\n"+strings.Repeat("x", 500)), want{nil, 1}},
	}
	for _, k := range requiredMembers {
		cases["without "+k] = struct {
			data string
			want want
		}{without(k), want{ErrUnreadable, 0}}
	}
	for name, tc := range cases {
		st, _, err := decodeRetryState([]byte(tc.data), "pt-x")
		switch {
		case tc.want.kind == nil && err != nil:
			t.Errorf("%s: refused: %v", name, err)
		case tc.want.kind != nil && !errors.Is(err, tc.want.kind):
			t.Errorf("%s: error %v, want %v", name, err, tc.want.kind)
		case err == nil && len(st.Warnings) != tc.want.warnings:
			t.Errorf("%s: warnings %q, want %d", name, st.Warnings, tc.want.warnings)
		}
		for _, msg := range append(st.Warnings, fmt.Sprint(err)) {
			plainLine(t, name, msg)
		}
	}
}

// goWords are what Go's own errors say where a user needs plain words.
var goWords = regexp.MustCompile(`(^|[ (])json: |Go (struct|value)|unmarshal|invalid character|float64|map\[|interface \{|RawMessage`)

// plainLine fails when a message could break a terminal or a log: more than
// one line, control characters, a flood of text, or Go's own vocabulary.
// Paths in the scratch folder count as short as they would be under /tmp:
// the bound is on what peal writes, not on where the machine keeps its
// temporary files.
func plainLine(t *testing.T, name, msg string) {
	t.Helper()
	short := strings.ReplaceAll(msg, os.TempDir(), "/tmp")
	if len(short) > 300 || strings.ContainsFunc(msg, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		t.Errorf("%s: not one bounded, clean line: %q", name, msg)
	}
	if goWords.MatchString(msg) {
		t.Errorf("%s: message speaks Go (%q): %q", name, goWords.FindString(msg), msg)
	}
}

var timestampRe = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)

// checkSchema validates a retry-state file written by peal against schema v1
// (the schema): required members, types, enums, and tf's timestamps.
func checkSchema(t *testing.T, data []byte) {
	t.Helper()
	if !strings.HasPrefix(string(data), "{\n  \"version\": 1,\n  \"ticketId\": ") || !strings.HasSuffix(string(data), "}\n") {
		t.Errorf("not indented with two spaces like tf:\n%s", data)
	}
	top, ok := jsonValue(t, data).(map[string]any)
	if !ok {
		t.Fatalf("not an object: %s", data)
	}
	need := func(obj map[string]any, where string, keys ...string) {
		for _, k := range keys {
			if _, ok := obj[k]; !ok {
				t.Errorf("%s has no %s", where, k)
			}
		}
	}
	oneOf := func(v any, where string, values ...string) {
		s, ok := v.(string)
		if !ok || !slices.Contains(values, s) {
			t.Errorf("%s = %v, want one of %v", where, v, values)
		}
	}
	integer := func(v any, where string, min int64) {
		n, ok := v.(json.Number)
		i, err := n.Int64()
		if !ok || err != nil || i < min {
			t.Errorf("%s = %v, want an integer >= %d", where, v, min)
		}
	}
	stampOK := func(v any, where string) {
		if s, ok := v.(string); !ok || !timestampRe.MatchString(s) {
			t.Errorf("%s = %v, want a UTC timestamp like 2026-02-10T12:00:00Z", where, v)
		}
	}
	need(top, "file", requiredMembers...)
	if top["version"] != json.Number("1") {
		t.Errorf("version %v", top["version"])
	}
	if id, _ := top["ticketId"].(string); !ValidID(id) {
		t.Errorf("ticketId %v", top["ticketId"])
	}
	stampOK(top["lastAttemptAt"], "lastAttemptAt")
	oneOf(top["status"], "status", TicketActive, TicketBlocked, TicketClosed)
	integer(top["retryCount"], "retryCount", 0)
	attempts, ok := top["attempts"].([]any)
	if !ok {
		t.Fatalf("attempts %v", top["attempts"])
	}
	for i, v := range attempts {
		where := fmt.Sprintf("attempts[%d]", i)
		a := v.(map[string]any)
		need(a, where, "attemptNumber", "startedAt", "status", "trigger")
		integer(a["attemptNumber"], where+".attemptNumber", 1)
		stampOK(a["startedAt"], where+".startedAt")
		oneOf(a["status"], where+".status", AttemptInProgress, AttemptBlocked, AttemptClosed, AttemptError)
		oneOf(a["trigger"], where+".trigger", TriggerInitial, TriggerQualityGate, TriggerManualRetry, TriggerRalphRetry)
		if c, ok := a["completedAt"]; ok {
			stampOK(c, where+".completedAt")
		}
		if _, ok := a["completedAt"]; ok == (a["status"] == AttemptInProgress) {
			t.Errorf("%s: completedAt present = %v with status %v", where, ok, a["status"])
		}
		if g, ok := a["qualityGate"]; ok {
			gate := g.(map[string]any)
			need(gate, where+".qualityGate", "failOn", "counts")
			if _, ok := gate["failOn"].([]any); !ok {
				t.Errorf("%s.failOn = %v", where, gate["failOn"])
			}
			for k, n := range gate["counts"].(map[string]any) {
				integer(n, where+".counts."+k, 0)
			}
		}
		if e, ok := a["escalation"]; ok {
			for k, m := range e.(map[string]any) {
				if _, isString := m.(string); m != nil && !isString {
					t.Errorf("%s.escalation.%s = %v", where, k, m)
				}
			}
		}
		if r, ok := a["closeSummaryRef"]; ok && r != CloseSummaryFile {
			t.Errorf("%s.closeSummaryRef = %v", where, r)
		}
	}
}

func TestRetryStateNextAttemptAndLastStatus(t *testing.T) {
	t.Parallel()
	cases := []struct {
		attempts []Attempt
		next     int
		last     string
	}{
		{nil, 1, ""},
		{[]Attempt{{AttemptNumber: 1, Status: AttemptBlocked}}, 2, AttemptBlocked},
		{[]Attempt{{AttemptNumber: 1, Status: AttemptBlocked}, {AttemptNumber: 2, Status: AttemptInProgress}}, 2, AttemptInProgress},
	}
	for _, tc := range cases {
		st := RetryState{Attempts: tc.attempts}
		if st.NextAttempt() != tc.next || st.LastStatus() != tc.last {
			t.Errorf("%+v: next %d last %q, want %d %q", tc.attempts, st.NextAttempt(), st.LastStatus(), tc.next, tc.last)
		}
	}
}
