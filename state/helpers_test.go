package state

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

func at(sec int) time.Time {
	return time.Date(2026, 2, 10, 12, 0, 0, 0, time.UTC).Add(time.Duration(sec) * time.Second)
}

// jsonValue decodes a file's JSON with its numbers as written.
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
