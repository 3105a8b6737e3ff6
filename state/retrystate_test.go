package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestValidTicketID(t *testing.T) {
	for id, want := range map[string]bool{
		"pt-te9b": true, "abc-1": true, "a-b": true,
		"": false, "pt": false, "pt-": false, "-x": false, "PT-te9b": false, "pt-te9b-2": false,
		"pt_te9b": false, "1pt-x": false, "../x": false, "pt-x/..": false, "pt-x\n": false, "pt-té": false,
	} {
		if got := ValidTicketID(id); got != want {
			t.Errorf("ValidTicketID(%q) = %v", id, got)
		}
	}
	if got := TicketDir("/k", "pt-1"); got != filepath.Join("/k", "tickets", "pt-1") {
		t.Errorf("TicketDir = %s", got)
	}
}

func TestModelsFor(t *testing.T) {
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

// TestSpecExampleRoundTrip reads the example of the spec (section 2.3) and
// writes it back: every member must come back with the same value.
func TestSpecExampleRoundTrip(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "spec_example.json"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := decodeRetryState(data, "pt-te9b")
	if err != nil {
		t.Fatal(err)
	}
	if st.Version != 1 || st.TicketID != "pt-te9b" || st.Status != TicketActive || st.RetryCount != 1 ||
		st.LastAttemptAt != "2026-02-10T13:00:00Z" || len(st.Attempts) != 2 {
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
	out, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(jsonValue(t, out), jsonValue(t, data)) {
		t.Errorf("round trip changed the file:\n%s", out)
	}
}

// TestUnknownMembersSurvive writes a file as a newer tf might, with members
// schema v1 does not name at every level, and checks a load and save by peal
// keeps them all.
func TestUnknownMembersSurvive(t *testing.T) {
	const file = `{
  "version": 1, "ticketId": "pt-x", "lastAttemptAt": "2026-02-10T12:00:00Z", "status": "active",
  "retryCount": 0, "owner": {"name": "ralph"}, "TicketID": "case variant, kept apart",
  "attempts": [{
    "attemptNumber": 1, "startedAt": "2026-02-10T12:00:00Z", "completedAt": "2026-02-10T12:10:00Z",
    "status": "error", "trigger": "ralph_retry", "phase": "tf-fix",
    "qualityGate": {"failOn": ["critical"], "counts": {"Critical": 1, "critical": 3, "Blocker": 1e2}, "mode": "strict"},
    "escalation": {"fixer": null, "reviewerSecondOpinion": "m", "worker": null, "planner": "p"}
  }]
}`
	kdir := t.TempDir()
	dir := TicketDir(kdir, "pt-x")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, RetryStateFile), []byte(file), 0o644)
	tk, warnings, err := OpenTicket(kdir, "pt-x", at(0))
	if err != nil || len(warnings) != 0 {
		t.Fatal(err, warnings)
	}
	defer tk.Close()
	if _, _, err := tk.Begin(at(60), nil); err != nil {
		t.Fatal(err)
	}
	saved, _ := os.ReadFile(filepath.Join(dir, RetryStateFile))
	got := jsonValue(t, saved).(map[string]any)
	if got["owner"] == nil || got["TicketID"] != "case variant, kept apart" || got["ticketId"] != "pt-x" {
		t.Errorf("top level lost members: %s", saved)
	}
	a := got["attempts"].([]any)[0].(map[string]any)
	if a["phase"] != "tf-fix" || a["trigger"] != "ralph_retry" {
		t.Errorf("attempt lost members: %v", a)
	}
	g := a["qualityGate"].(map[string]any)
	if g["mode"] != "strict" || !reflect.DeepEqual(g["counts"], map[string]any{
		"Critical": json.Number("1"), "Major": json.Number("0"), "Minor": json.Number("0"), "Warnings": json.Number("0"), "Suggestions": json.Number("0"),
		"critical": json.Number("3"), "Blocker": json.Number("1e2"),
	}) {
		t.Errorf("gate lost members: %v", g)
	}
	if e := a["escalation"].(map[string]any); e["planner"] != "p" || e["reviewerSecondOpinion"] != "m" {
		t.Errorf("escalation lost members: %v", e)
	}
	if len(got["attempts"].([]any)) != 2 {
		t.Errorf("no new attempt: %s", saved)
	}
}

func TestLoadRetryState(t *testing.T) {
	kdir := t.TempDir()
	if _, err := LoadRetryState(kdir, "pt-none"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	if _, err := LoadRetryState(kdir, "../etc"); !errors.Is(err, ErrInvalidTicketID) {
		t.Errorf("invalid id: %v", err)
	}
	dir := TicketDir(kdir, "pt-bad")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, RetryStateFile), []byte("{"), 0o644)
	if _, err := LoadRetryState(kdir, "pt-bad"); !errors.Is(err, ErrUnreadable) {
		t.Errorf("unreadable: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, RetryStateFile)); err != nil {
		t.Error("LoadRetryState moved or removed an unreadable file")
	}
	tk := openTicket(t, kdir, "pt-ok")
	tk.Begin(at(0), nil)
	tk.Close()
	st, err := LoadRetryState(kdir, "pt-ok")
	if err != nil || len(st.Attempts) != 1 {
		t.Errorf("%+v, %v", st, err)
	}
}

func TestDecodeUnreadable(t *testing.T) {
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
	if _, err := decodeRetryState([]byte(with("retryCount", 2)), "pt-x"); err != nil {
		t.Fatalf("valid file refused: %v", err)
	}
	cases := map[string]string{
		"empty":           "",
		"not json":        "retry: 1",
		"array":           "[]",
		"null":            "null",
		"truncated":       with("retryCount", 2)[:40],
		"version 2":       with("version", 2),
		"version string":  with("version", "1"),
		"version null":    with("version", nil),
		"ticket mismatch": with("ticketId", "pt-y"),
		"attempts null":   with("attempts", nil),
		"attempts object": with("attempts", map[string]any{}),
		"status number":   with("status", 3),
	}
	for _, k := range requiredMembers {
		cases["without "+k] = without(k)
	}
	for name, data := range cases {
		if _, err := decodeRetryState([]byte(data), "pt-x"); err == nil {
			t.Errorf("%s: accepted %s", name, data)
		}
	}
}

var timestampRe = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)

// checkSchema validates a retry-state file written by peal against schema v1
// (spec section 2.2): required members, types, enums, and tf's timestamps.
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
	if id, _ := top["ticketId"].(string); !ValidTicketID(id) {
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
