package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"peal/internal/safefs"
	"peal/internal/testkit/testbin"
)

func startRecord(t *testing.T) (*Recorder, string) {
	t.Helper()
	dir := t.TempDir()
	rec, err := StartRecord(dir, func(err error) { t.Errorf("record failed: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.Close)
	return rec, filepath.Join(dir, RecordName)
}

func kinds(events []Event) []string {
	var out []string
	for _, ev := range events {
		out = append(out, fmt.Sprintf("%s:%s", ev.Ev, ev.Call))
	}
	return out
}

// A call's start is on disk when Add returns, after every event added
// before it: a process the record does not name is never running.
func TestRecordCallStartWrittenAtOnce(t *testing.T) {
	t.Parallel()
	rec, path := startRecord(t)
	rec.Add(Event{Ev: EvTaskStart, Task: TaskOf(1)})
	rec.Add(Event{Ev: EvCallStart, Task: TaskOf(1), Call: "c1"})
	events, skipped, err := ReadRecord(path)
	if err != nil || skipped != 0 {
		t.Fatal(err, skipped)
	}
	if got := fmt.Sprint(kinds(events)); got != "[task_start: call_start:c1]" {
		t.Errorf("on disk right after the call's start: %s", got)
	}
}

// Other events reach the file without a Close, written by the recorder's
// own goroutine: a live reader sees a call end while the run goes on.
func TestRecordWritesWithoutClose(t *testing.T) {
	t.Parallel()
	rec, path := startRecord(t)
	rec.Add(Event{Ev: EvCallEnd, Call: "c1"})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if data, _ := os.ReadFile(path); len(data) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the call's end never reached the record")
		}
	}
	events, _, err := ReadRecord(path)
	if err != nil || fmt.Sprint(kinds(events)) != "[call_end:c1]" {
		t.Errorf("record %v (%v)", kinds(events), err)
	}
}

// Close writes everything still pending; events of one goroutine keep
// their order, and nothing is lost or cut among concurrent writers.
func TestRecordKeepsEveryEventInOrder(t *testing.T) {
	t.Parallel()
	rec, path := startRecord(t)
	const writers, each = 4, 500
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				ev := EvCallEnd
				if i%7 == 0 {
					ev = EvCallStart
				}
				rec.Add(Event{Ev: ev, Task: TaskOf(w), Call: fmt.Sprint(i)})
			}
		}()
	}
	wg.Wait()
	rec.Close()
	rec.Add(Event{Ev: EvRunEnd}) // after Close: dropped, no panic
	rec.Close()                  // twice: harmless
	events, skipped, err := ReadRecord(path)
	if err != nil || skipped != 0 {
		t.Fatal(err, skipped)
	}
	if len(events) != writers*each {
		t.Fatalf("%d events on disk, want %d", len(events), writers*each)
	}
	next := map[int]int{}
	for _, ev := range events {
		w := *ev.Task
		if ev.Call != fmt.Sprint(next[w]) {
			t.Fatalf("writer %d: event %s after %d", w, ev.Call, next[w])
		}
		next[w]++
	}
}

// A record cut in the middle of its last line (a kill or a full disk during
// a write) reads as the lines before it, the cut one skipped and counted.
func TestReadRecordSkipsATornLastLine(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), RecordName)
	data := `{"ev":"run_start","t":"2026-03-01T10:00:00Z","pid":7}` + "\n" +
		`{"ev":"task_start","t":"2026-03-01T10:00:01Z","task":1}` + "\n" + `{"ev":"call_st`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	events, skipped, err := ReadRecord(path)
	if err != nil || skipped != 1 || fmt.Sprint(kinds(events)) != "[run_start: task_start:]" || events[0].PID != 7 || *events[1].Task != 1 {
		t.Fatalf("events %v, %d skipped, %v", kinds(events), skipped, err)
	}
}

// A write that fails is told once and ends the record: nothing is written
// after it, even once writing would work again, and the run is not stopped
// (Add and Close return as usual).
func TestRecordWriteFailureEndsTheRecord(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var failures []error
	rec, err := StartRecord(dir, func(err error) { failures = append(failures, err) })
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, RecordName)
	readOnly, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	writable := rec.f
	rec.f = readOnly // every write fails from here
	rec.mu.Unlock()
	rec.Add(Event{Ev: EvCallStart, Call: "c1"}) // written at once: fails
	rec.Add(Event{Ev: EvCallStart, Call: "c2"})
	rec.mu.Lock()
	rec.f = writable // writing would work again
	rec.mu.Unlock()
	rec.Add(Event{Ev: EvCallEnd, Call: "c2"})
	rec.Close()
	readOnly.Close()
	if len(failures) != 1 {
		t.Fatalf("told of %d failures (%v), want one", len(failures), failures)
	}
	if data, err := os.ReadFile(path); err != nil || len(data) != 0 {
		t.Fatalf("the record holds %q after its write failed (%v)", data, err)
	}
}

// TestTornRecordRepaired: a record whose last line a kill or a full disk
// cut is repaired when the next run reads it to start its own: the torn
// bytes are kept aside, and the previous record ends with its last whole
// line, which every reader takes without a line skipped.
func TestTornRecordRepaired(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, text, torn string }{
		{"torn last line", "{\"ev\":\"run_start\"}\n{\"ev\":\"task_st", "{\"ev\":\"task_st"},
		{"one torn line", "{\"ev\":\"run_st", "{\"ev\":\"run_st"},
		{"whole", "{\"ev\":\"run_start\"}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, RecordName), []byte(tc.text), 0o600)
			rec, err := StartRecord(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			rec.Close()
			prev, _ := os.ReadFile(filepath.Join(dir, RecordPrevName))
			if want := strings.TrimSuffix(tc.text, tc.torn); string(prev) != want {
				t.Fatalf("previous record %q, want %q", prev, want)
			}
			if _, skipped, err := ReadRecord(filepath.Join(dir, RecordPrevName)); err != nil || skipped != 0 {
				t.Fatalf("read: %v, %d skipped", err, skipped)
			}
			if tc.torn == "" {
				if rec.Torn != "" {
					t.Fatalf("a whole record was repaired: %s", rec.Torn)
				}
				return
			}
			kept, err := os.ReadFile(rec.Torn)
			if err != nil || string(kept) != tc.torn || !strings.HasPrefix(filepath.Base(rec.Torn), RecordName+".torn-") {
				t.Fatalf("torn bytes kept as %s: %q, %v", rec.Torn, kept, err)
			}
		})
	}
}

// TestRecordOnAFullDisk: a write the disk refuses ends the record with its
// last whole line and reports a full disk naming the folder.
func TestRecordOnAFullDisk(t *testing.T) {
	t.Parallel()
	dir := testbin.FullDisk(t)
	failed := make(chan error, 1)
	rec, err := StartRecord(dir, func(err error) { failed <- err })
	if err != nil {
		t.Fatal(err)
	}
	rec.Add(Event{Ev: EvCallStart, Task: TaskOf(1), Call: "c1", Detail: strings.Repeat("x", 64<<10)})
	rec.Close()
	var full *safefs.FullError
	if err := <-failed; !errors.As(err, &full) || full.Dir != dir {
		t.Fatalf("failure %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, RecordName)); len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("a torn line is left: %q", data[max(0, len(data)-20):])
	}
}
