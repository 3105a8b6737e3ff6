package state

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzDecodeRetryState: whatever the file, reading it never panics, sorts it
// into read, unreadable or unusable with one plain line, and a document that
// is read comes back the same after peal's rewrite of it.
func FuzzDecodeRetryState(f *testing.F) {
	spec, _ := os.ReadFile(filepath.Join("testdata", "spec_example.json"))
	f.Add(string(spec))
	f.Add(`{"version":1.0,"ticketId":"pt-x","attempts":[{"attemptNumber":1.0,"completedAt":null}],"lastAttemptAt":null,"status":"active"}`)
	f.Add(`{"version":1,"ticketId":"pt-x","attempts":null,"lastAttemptAt":"","status":"","retryCount":"2"}`)
	f.Add(`[1,2]`)
	f.Fuzz(func(t *testing.T, data string) {
		st, doc, err := decodeRetryState([]byte(data), "pt-te9b")
		if err != nil {
			if !errors.Is(err, ErrUnreadable) && !errors.Is(err, ErrUnusable) {
				t.Fatalf("error of no kind: %v", err)
			}
			plainLine(t, "error", err.Error())
			return
		}
		for _, w := range st.Warnings {
			plainLine(t, "warning", w)
		}
		again, _, err := decodeRetryState(doc.file(), "pt-te9b")
		if err != nil {
			t.Fatalf("rewritten file refused: %v\n%s", err, doc.file())
		}
		st.raw, again.raw = nil, nil
		if !reflect.DeepEqual(st, again) {
			t.Fatalf("read %+v\nthen %+v", st, again)
		}
	})
}

// FuzzStateFile: any state.json either resumes or is set aside with a plain
// reason; none makes a run fail or panic.
func FuzzStateFile(f *testing.F) {
	f.Add(`{"plan_path":"p.md","repo_path":".","completed_task_indices":[1,2],"other_plans":[{"plan_path":"/a","repo_path":"/r","completed_task_indices":[]}]}`)
	f.Add(`{"plan_path":"/p","repo_path":"/r","completed_task_indices":[0],"last_plan_by_task":{"0":"x"}}`)
	f.Add(`{"plan_path":"/p","repo_path":"/r","completed_task_indices":[],"other_plans":[1,{}]}`)
	f.Fuzz(func(t *testing.T, data string) {
		base := t.TempDir()
		p := Plan{Path: filepath.Join(base, "p.md"), Repo: base, Base: base}
		dir := filepath.Join(base, "state")
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, FileName), []byte(data), 0o644)
		s, warnings, err := Open(dir, p, at(0))
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer s.Close()
		for _, w := range warnings {
			plainLine(t, "warning", w)
		}
		if err := s.Complete(7); err != nil {
			t.Fatal(err)
		}
		s.Close()
		s2, warnings, err := Open(dir, p, at(0))
		if err != nil || len(warnings) > 0 && len(warnings) != countOddEntries(warnings) {
			t.Fatalf("reopen: %v %q", err, warnings)
		}
		defer s2.Close()
		if !s2.Completed(7) {
			t.Fatalf("progress lost: %+v", s2.Snapshot())
		}
	})
}

// countOddEntries counts the warnings about other_plans entries that are kept
// as they are: the only warnings a file peal wrote may give again.
func countOddEntries(warnings []string) int {
	n := 0
	for _, w := range warnings {
		if strings.Contains(w, "of other_plans is not understood") {
			n++
		}
	}
	return n
}

// FuzzSplitMatchesDecoder: for any valid JSON text, the splitters give the
// parts json.Decoder and json.Unmarshal give: the same keys in the same
// order, each value and item byte for byte; and the same refusal of a value
// of another kind.
func FuzzSplitMatchesDecoder(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { } `, `[]`, `[ ]`, `{"a":1}`, "{\n \"a\" : [1, {\"b\": \"}]\\\"\"}] ,\"a\":null}\n",
		`{"k\u00e9y":"v","\"q\"":true,"é":-1.5e3,"":{}}`, `["x", [ ], {"y": [1,2]}, "\\", false]`,
		`"text"`, `12`, `null`, `{"a":"\ud800"}`, "{\"\xff\":1}", `{"a":{"b":{"c":[[[]]]}}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		if !json.Valid([]byte(data)) {
			return
		}
		got, gerr := splitObject([]byte(data))
		want, werr := decodeObject([]byte(data))
		if (gerr == nil) != (werr == nil) || (gerr != nil && !errors.Is(gerr, errNotObject)) {
			t.Fatalf("split: %v, decoder: %v", gerr, werr)
		}
		if gerr == nil && !reflect.DeepEqual(got.members, want.members) {
			t.Fatalf("split %q\ndecoder %q", got.members, want.members)
		}
		items, ok := splitArray([]byte(data))
		var wantItems []json.RawMessage
		wantOK := json.Unmarshal([]byte(data), &wantItems) == nil && !isNull([]byte(data))
		if ok != wantOK || (ok && !reflect.DeepEqual(items, wantItems)) {
			t.Fatalf("split %v %q\nunmarshal %v %q", ok, items, wantOK, wantItems)
		}
	})
}

// FuzzAppendKey: a key is written as marshal writes it.
func FuzzAppendKey(f *testing.F) {
	for _, s := range []string{"", "attempts", "a<b>&c", "quote\"d", `back\slash`, "tab\t", "\x7f", "é", "\u2028", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		want, err := marshal(key)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendKey([]byte("x"), key); string(got) != "x"+string(want) {
			t.Fatalf("appendKey(%q) = %s, marshal: %s", key, got[1:], want)
		}
	})
}
