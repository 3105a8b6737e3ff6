package tickets

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
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
		again, _, err := decodeRetryState(doc.File(), "pt-te9b")
		if err != nil {
			t.Fatalf("rewritten file refused: %v\n%s", err, doc.File())
		}
		st.raw, again.raw = nil, nil
		if !reflect.DeepEqual(st, again) {
			t.Fatalf("read %+v\nthen %+v", st, again)
		}
	})
}
