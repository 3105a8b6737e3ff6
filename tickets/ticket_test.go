package tickets

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// at is a fixed clock: 2026-02-10T12:00:00Z plus sec seconds.
func at(sec int) time.Time {
	return time.Date(2026, 2, 10, 12, 0, 0, 0, time.UTC).Add(time.Duration(sec) * time.Second)
}

// open opens a ticket and collects what it warns about, then and later.
func open(kdir, id string, now time.Time) (*Ticket, *[]string, error) {
	warnings := &[]string{}
	var mu sync.Mutex
	tk, err := openTicketIn(kdir, id, now, func(w string) {
		mu.Lock()
		defer mu.Unlock()
		*warnings = append(*warnings, w)
	})
	return tk, warnings, err
}

func openTicket(t *testing.T, kdir, id string) *Ticket {
	t.Helper()
	tk, warnings, err := open(kdir, id, at(0))
	if err != nil {
		t.Fatal(err)
	}
	if len(*warnings) > 0 {
		t.Fatalf("warnings: %v", *warnings)
	}
	t.Cleanup(func() { tk.Close() })
	return tk
}

// onDisk is the state as saved, which must always equal the handle's.
func onDisk(t *testing.T, tk *Ticket) RetryState {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(tk.Dir(), RetryStateFile))
	if err != nil {
		t.Fatal(err)
	}
	checkSchema(t, data)
	st, _, err := decodeRetryState(data, tk.ID())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(st, tk.State()) {
		t.Errorf("file and handle differ:\n file %+v\nhandle %+v", st, tk.State())
	}
	return st
}

func escalateWith(fixer, second, worker string) func(int) Escalation {
	return func(n int) Escalation { return ModelsFor(n, fixer, second, worker) }
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	kdir := t.TempDir()
	tk := openTicket(t, kdir, "pt-te9b")
	if tk.Dir() != ticketDir(kdir, "pt-te9b") {
		t.Errorf("Dir %s", tk.Dir())
	}
	if st := tk.State(); st.Version != 1 || st.TicketID != "pt-te9b" || len(st.Attempts) != 0 || st.Status != TicketActive {
		t.Errorf("fresh state %+v", st)
	}
	if _, err := os.Stat(filepath.Join(tk.Dir(), RetryStateFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Error("Open wrote the state before any attempt")
	}
	esc := escalateWith("zai/glm-4.7", "openai/gpt", "")
	gate := &QualityGate{FailOn: []string{"Critical", "Major"}, Counts: Counts{Major: 2, Minor: 3, Warnings: 1}}

	type step struct {
		name        string
		do          func() (Attempt, bool, error)
		wantNumber  int
		wantTrigger string
		wantFixer   string
		complete    string
		wantCount   int
		wantStatus  string
	}
	begin := func(sec int) func() (Attempt, bool, error) {
		return func() (Attempt, bool, error) { return tk.Begin(at(sec), esc) }
	}
	for i, s := range []step{
		{"first attempt", begin(0), 1, TriggerInitial, "", AttemptBlocked, 1, TicketActive},
		{"retry after a block", begin(600), 2, TriggerQualityGate, "zai/glm-4.7", AttemptBlocked, 2, TicketActive},
		{"third attempt errors", begin(1200), 3, TriggerQualityGate, "zai/glm-4.7", AttemptError, 2, TicketActive},
		{"re-run after an error", begin(1800), 4, TriggerManualRetry, "zai/glm-4.7", AttemptClosed, 0, TicketClosed},
		{"re-run after a close", begin(2400), 5, TriggerManualRetry, "zai/glm-4.7", AttemptBlocked, 1, TicketActive},
	} {
		a, resumed, err := s.do()
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if resumed || a.AttemptNumber != s.wantNumber || a.Trigger != s.wantTrigger || a.Status != AttemptInProgress {
			t.Errorf("%s: attempt %+v resumed=%v", s.name, a, resumed)
		}
		if a.Escalation == nil {
			t.Fatalf("%s: no escalation", s.name)
		}
		if got := a.Escalation.Fixer; (got == nil) != (s.wantFixer == "") || got != nil && *got != s.wantFixer {
			t.Errorf("%s: fixer %v, want %q", s.name, got, s.wantFixer)
		}
		st := onDisk(t, tk)
		if st.Status != TicketActive || st.LastAttemptAt != stamp(at(i*600)) {
			t.Errorf("%s: after Begin %+v", s.name, st)
		}
		var g *QualityGate
		if s.complete == AttemptBlocked {
			g = gate
		}
		if err := tk.Complete(at(i*600+300), s.complete, g); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		st = onDisk(t, tk)
		last := st.Attempts[len(st.Attempts)-1]
		if st.RetryCount != s.wantCount || st.Status != s.wantStatus || last.Status != s.complete ||
			last.CompletedAt != stamp(at(i*600+300)) || len(st.Attempts) != s.wantNumber {
			t.Errorf("%s: after Complete(%s) %+v", s.name, s.complete, st)
		}
		if (last.QualityGate != nil) != (g != nil) {
			t.Errorf("%s: quality gate %+v", s.name, last.QualityGate)
		}
	}
	st := tk.State()
	if ref := st.Attempts[0].CloseSummaryRef; ref != CloseSummaryFile {
		t.Errorf("closeSummaryRef of a blocked attempt = %q", ref)
	}
	if ref := st.Attempts[2].CloseSummaryRef; ref != "" {
		t.Errorf("closeSummaryRef of an errored attempt without a summary = %q", ref)
	}
	if w := st.Attempts[4].Escalation; w.Worker != nil || w.ReviewerSecondOpinion == nil || *w.ReviewerSecondOpinion != "openai/gpt" {
		t.Errorf("attempt 5 escalation %+v", w)
	}
}

func TestCompleteErrorRecordsSummaryWhenPresent(t *testing.T) {
	t.Parallel()
	tk := openTicket(t, t.TempDir(), "pt-err")
	tk.Begin(at(0), nil)
	tk.WriteCloseSummary(true, Counts{})
	if err := tk.Complete(at(1), AttemptError, nil); err != nil {
		t.Fatal(err)
	}
	if ref := tk.State().Attempts[0].CloseSummaryRef; ref != CloseSummaryFile {
		t.Errorf("closeSummaryRef = %q", ref)
	}
}

// A failed attempt that wrote no close summary does not point at the one an
// earlier attempt left: that verdict is not its own.
func TestCompleteErrorIgnoresAnEarlierSummary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tk := openTicket(t, dir, "pt-err")
	tk.Begin(at(0), nil)
	tk.WriteCloseSummary(false, Counts{})
	if err := tk.Complete(at(1), AttemptClosed, nil); err != nil {
		t.Fatal(err)
	}
	tk.Close()
	tk = openTicket(t, dir, "pt-err")
	tk.Begin(at(2), nil)
	if err := tk.Complete(at(3), AttemptError, nil); err != nil {
		t.Fatal(err)
	}
	if ref := tk.State().Attempts[1].CloseSummaryRef; ref != "" {
		t.Errorf("the failed attempt refers to %q, the closed attempt's summary", ref)
	}
}

func TestBeginWithoutEscalationWritesNulls(t *testing.T) {
	t.Parallel()
	tk := openTicket(t, t.TempDir(), "pt-null")
	tk.Begin(at(0), nil)
	data, _ := os.ReadFile(filepath.Join(tk.Dir(), RetryStateFile))
	want := "\"escalation\": {\n        \"fixer\": null,\n        \"reviewerSecondOpinion\": null,\n        \"worker\": null\n      }"
	if !strings.Contains(string(data), want) {
		t.Errorf("file:\n%s", data)
	}
	if strings.Contains(string(data), "completedAt") || strings.Contains(string(data), "qualityGate") || strings.Contains(string(data), "closeSummaryRef") {
		t.Errorf("a running attempt has members it should not:\n%s", data)
	}
}

// TestBeginResumesAfterCrash leaves an attempt in progress, as a killed run
// would, and checks the next run continues it instead of counting a new one.
func TestBeginResumesAfterCrash(t *testing.T) {
	t.Parallel()
	kdir := t.TempDir()
	first, _, err := open(kdir, "pt-crash", at(0))
	if err != nil {
		t.Fatal(err)
	}
	first.Begin(at(0), nil)
	first.Complete(at(10), AttemptBlocked, nil)
	a2, _, _ := first.Begin(at(20), escalateWith("old", "", ""))
	first.Close() // the run dies without completing attempt 2

	tk := openTicket(t, kdir, "pt-crash")
	a, resumed, err := tk.Begin(at(500), escalateWith("new", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	if !resumed || a.AttemptNumber != 2 || a.StartedAt != a2.StartedAt || a.Trigger != TriggerQualityGate {
		t.Errorf("resumed=%v attempt %+v, was %+v", resumed, a, a2)
	}
	if a.Escalation.Fixer == nil || *a.Escalation.Fixer != "new" {
		t.Errorf("escalation not refreshed: %+v", a.Escalation)
	}
	st := onDisk(t, tk)
	if len(st.Attempts) != 2 || st.LastAttemptAt != stamp(at(500)) || st.RetryCount != 1 {
		t.Errorf("state %+v", st)
	}
	// Resuming twice is still the same attempt.
	if a, resumed, _ := tk.Begin(at(900), nil); !resumed || a.AttemptNumber != 2 {
		t.Errorf("second resume %+v", a)
	}
}

func TestExhausted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		statuses []string // completed attempts in order; "" leaves one running
		max      int
		want     bool
	}{
		{"no attempts", nil, 0, false},
		{"one block of three", []string{"blocked"}, 3, false},
		{"three blocks of three", []string{"blocked", "blocked", "blocked"}, 3, true},
		{"four blocks of three", []string{"blocked", "blocked", "blocked", "blocked"}, 3, true},
		{"three blocks then running", []string{"blocked", "blocked", "blocked", ""}, 3, false},
		{"blocks then error", []string{"blocked", "blocked", "blocked", "error"}, 3, false},
		{"closed resets", []string{"blocked", "blocked", "closed"}, 2, false},
		{"max zero after a block", []string{"blocked"}, 0, true},
		{"max zero after a close", []string{"closed"}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tk := openTicket(t, t.TempDir(), "pt-ex")
			for i, s := range tc.statuses {
				tk.Begin(at(i), nil)
				if s != "" {
					if err := tk.Complete(at(i), s, nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			if got := tk.Exhausted(tc.max); got != tc.want {
				t.Errorf("Exhausted(%d) = %v with %+v", tc.max, got, tk.State())
			}
		})
	}
}

func TestCompleteRefusals(t *testing.T) {
	t.Parallel()
	tk := openTicket(t, t.TempDir(), "pt-no")
	if err := tk.Complete(at(0), AttemptClosed, nil); err == nil {
		t.Error("completed with no attempt")
	}
	tk.Begin(at(0), nil)
	for _, s := range []string{AttemptInProgress, "done", ""} {
		if err := tk.Complete(at(1), s, nil); err == nil {
			t.Errorf("completed with status %q", s)
		}
	}
	tk.Complete(at(1), AttemptClosed, nil)
	if err := tk.Complete(at(2), AttemptClosed, nil); err == nil {
		t.Error("completed an attempt twice")
	}
	tk.Close()
	if _, _, err := tk.Begin(at(3), nil); err == nil {
		t.Error("Begin after Close")
	}
	if err := tk.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestStateIsACopy(t *testing.T) {
	t.Parallel()
	tk := openTicket(t, t.TempDir(), "pt-copy")
	tk.Begin(at(0), escalateWith("f", "", ""))
	tk.Complete(at(1), AttemptBlocked, &QualityGate{FailOn: []string{"Major"}, Counts: Counts{Major: 1}})
	st := tk.State()
	st.Attempts[0].QualityGate.Counts.Major = 99
	st.Attempts[0].QualityGate.FailOn[0] = "x"
	st.Attempts[0].Status = "x"
	st.Attempts = append(st.Attempts, Attempt{})
	if again := tk.State(); again.Attempts[0].QualityGate.Counts.Major != 1 || again.Attempts[0].QualityGate.FailOn[0] != "Major" ||
		again.Attempts[0].Status != AttemptBlocked || len(again.Attempts) != 1 {
		t.Errorf("State shares memory with the handle: %+v", again)
	}
}

// TestOpenTicketKeepsUnreadableAside: a file tf would not load either is
// kept aside under a name never used before, and a fresh state starts.
func TestOpenTicketKeepsUnreadableAside(t *testing.T) {
	t.Parallel()
	for name, content := range map[string]string{
		"not json":  "{\"version\": 1,",
		"empty":     "",
		"no status": `{"version":1,"ticketId":"pt-bad","attempts":[],"lastAttemptAt":"2026-02-10T12:00:00Z"}`,
		"a list":    `[1]`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			kdir := t.TempDir()
			dir := ticketDir(kdir, "pt-bad")
			os.MkdirAll(dir, 0o755)
			path := filepath.Join(dir, RetryStateFile)
			os.WriteFile(path, []byte(content), 0o644)
			tk, warnings, err := open(kdir, "pt-bad", at(5))
			if err != nil {
				t.Fatal(err)
			}
			defer tk.Close()
			aside := path + ".corrupt-20260210T120005Z"
			if len(*warnings) != 1 || !strings.Contains((*warnings)[0], aside) || !strings.Contains((*warnings)[0], "unreadable") {
				t.Errorf("warnings %q", *warnings)
			}
			if kept, err := os.ReadFile(aside); err != nil || string(kept) != content {
				t.Errorf("kept %q, %v", kept, err)
			}
			if st := tk.State(); len(st.Attempts) != 0 || st.TicketID != "pt-bad" {
				t.Errorf("not fresh: %+v", st)
			}
			if a, _, err := tk.Begin(at(6), nil); err != nil || a.AttemptNumber != 1 || a.Trigger != TriggerInitial {
				t.Errorf("first attempt %+v, %v", a, err)
			}
		})
	}
}

// TestCorruptFilesInOneSecond: three unreadable files kept aside within the
// same second stay three files.
func TestCorruptFilesInOneSecond(t *testing.T) {
	t.Parallel()
	kdir := t.TempDir()
	dir := ticketDir(kdir, "pt-bad")
	os.MkdirAll(dir, 0o755)
	path := filepath.Join(dir, RetryStateFile)
	for i := range 3 {
		os.WriteFile(path, []byte(fmt.Sprintf("broken %d", i)), 0o644)
		tk, _, err := open(kdir, "pt-bad", at(5))
		if err != nil {
			t.Fatal(err)
		}
		tk.Close()
	}
	for i, suffix := range []string{"", ".1", ".2"} {
		if kept, err := os.ReadFile(path + ".corrupt-20260210T120005Z" + suffix); err != nil || string(kept) != fmt.Sprintf("broken %d", i) {
			t.Errorf("copy %d: %q, %v", i, kept, err)
		}
	}
}

// TestOpenTicketRefusesWhatItCannotUse: a file tf loads but whose values
// peal would have to guess is left as it is, and the ticket is refused with
// one line saying why and what to do.
func TestOpenTicketRefusesWhatItCannotUse(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ content, why string }{
		"version 2":         {`{"version":2,"ticketId":"pt-bad","attempts":[],"lastAttemptAt":"x","status":"active"}`, `schema version "2"`},
		"attempts a string": {`{"version":1,"ticketId":"pt-bad","attempts":"1","lastAttemptAt":"x","status":"active"}`, "attempts are not a list"},
		"attempt a number":  {`{"version":1,"ticketId":"pt-bad","attempts":[1],"lastAttemptAt":"x","status":"active"}`, "attempt 1 of its list is not an object"},
		"attempt 1.5":       {`{"version":1,"ticketId":"pt-bad","attempts":[{"attemptNumber":1.5}],"lastAttemptAt":"x","status":"active"}`, `attemptNumber "1.5"`},
		"retryCount text":   {`{"version":1,"ticketId":"pt-bad","attempts":[],"lastAttemptAt":"x","status":"active","retryCount":"two"}`, `retryCount "\"two\""`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			kdir := t.TempDir()
			dir := ticketDir(kdir, "pt-bad")
			os.MkdirAll(dir, 0o755)
			path := filepath.Join(dir, RetryStateFile)
			os.WriteFile(path, []byte(tc.content), 0o644)
			_, _, err := open(kdir, "pt-bad", at(5))
			if !errors.Is(err, ErrUnusable) || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), "peal retry-state reset pt-bad") {
				t.Errorf("error %v", err)
			}
			if kept, _ := os.ReadFile(path); string(kept) != tc.content {
				t.Errorf("the file changed: %q", kept)
			}
			if _, err := Load(kdir, "pt-bad"); !errors.Is(err, ErrUnusable) {
				t.Errorf("Load: %v", err)
			}
			// The lock was let go.
			if tk, _, err := open(kdir, "pt-bad", at(6)); !errors.Is(err, ErrUnusable) {
				t.Errorf("second open: %v", err)
				if tk != nil {
					tk.Close()
				}
			}
		})
	}
}

func TestOpenTicketRefusesInvalidID(t *testing.T) {
	t.Parallel()
	kdir := t.TempDir()
	for _, id := range []string{"../../etc", "", "PT-1", "pt-1/x"} {
		if _, _, err := open(kdir, id, at(0)); !errors.Is(err, ErrInvalidID) {
			t.Errorf("Open(%q): %v", id, err)
		}
		if _, err := Reset(kdir, id, at(0)); !errors.Is(err, ErrInvalidID) {
			t.Errorf("Reset(%q): %v", id, err)
		}
	}
	if entries, _ := os.ReadDir(kdir); len(entries) != 0 {
		t.Errorf("invalid ids created %v", entries)
	}
}

func TestTicketLockInProcess(t *testing.T) {
	t.Parallel()
	kdir := t.TempDir()
	tk := openTicket(t, kdir, "pt-lock")
	_, _, err := open(kdir, "pt-lock", at(0))
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pt-lock") {
		t.Fatalf("second open: %v", err)
	}
	tk.Begin(at(0), nil)
	if _, err := Reset(kdir, "pt-lock", at(0)); !errors.Is(err, ErrLocked) {
		t.Errorf("reset while locked: %v", err)
	}
	other := openTicket(t, kdir, "pt-other") // other tickets are independent
	other.Close()
	tk.Close()
	again := openTicket(t, kdir, "pt-lock")
	if n := len(again.State().Attempts); n != 1 {
		t.Errorf("reopened with %d attempts", n)
	}
}

// lockHolderEnv makes the test binary, started by TestTicketLockAcrossProcesses,
// hold a ticket's lock until it is killed.
const lockHolderEnv = "PEAL_STATE_TEST_LOCK_HOLDER"

func TestLockHolderProcess(t *testing.T) {
	kdir := os.Getenv(lockHolderEnv)
	if kdir == "" {
		t.Skip("helper process of TestTicketLockAcrossProcesses")
	}
	tk, err := openTicketIn(kdir, "pt-proc", time.Now(), nil)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin) // hold the lock until killed
	tk.Close()
}

// TestTicketLockAcrossProcesses: while another process holds the ticket,
// Open fails at once; when that process is killed (no chance to clean
// up, as in a crash) the lock is free again.
func TestTicketLockAcrossProcesses(t *testing.T) {
	t.Parallel()
	kdir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHolderProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockHolderEnv+"="+kdir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	t.Cleanup(func() {
		if !waited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	var seen []string
	lines := bufio.NewScanner(stdout)
	for lines.Scan() && lines.Text() != "locked" {
		seen = append(seen, lines.Text())
	}
	if lines.Text() != "locked" {
		t.Fatalf("the holder never locked; it said %q", seen)
	}

	_, _, err = open(kdir, "pt-proc", at(0))
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("open while another process holds the lock: %v", err)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	waited = true
	tk, _, err := open(kdir, "pt-proc", at(0))
	if err != nil {
		t.Fatalf("lock not released by the killed holder: %v", err)
	}
	tk.Close()
	if _, err := os.Stat(filepath.Join(ticketDir(kdir, "pt-proc"), LockFile)); err != nil {
		t.Errorf("lock file: %v", err)
	}
}

func TestResetTicket(t *testing.T) {
	t.Parallel()
	kdir := t.TempDir()
	if _, err := Reset(kdir, "pt-reset", at(0)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("reset of a missing state: %v", err)
	}
	if _, err := os.Stat(ticketDir(kdir, "pt-reset")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("reset of a missing state created the ticket folder")
	}
	run := func(sec int) {
		tk := openTicket(t, kdir, "pt-reset")
		tk.Begin(at(sec), nil)
		tk.Complete(at(sec+1), AttemptBlocked, nil)
		tk.Close()
	}
	run(0)
	before, _ := os.ReadFile(filepath.Join(ticketDir(kdir, "pt-reset"), RetryStateFile))
	backup, err := Reset(kdir, "pt-reset", time.Date(2026, 2, 10, 13, 4, 5, 999, time.FixedZone("X", 3600)))
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(ticketDir(kdir, "pt-reset"), "retry-state.json.bak.20260210T120405Z")
	if backup != want {
		t.Errorf("backup %s, want %s", backup, want)
	}
	if kept, _ := os.ReadFile(backup); string(kept) != string(before) {
		t.Error("backup differs from the reset file")
	}
	if _, err := Load(kdir, "pt-reset"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("state still there: %v", err)
	}
	tk := openTicket(t, kdir, "pt-reset")
	if a, _, _ := tk.Begin(at(100), nil); a.AttemptNumber != 1 || a.Trigger != TriggerInitial {
		t.Errorf("after reset %+v", a)
	}
	tk.Close()
	// A second reset in the same second keeps the first backup.
	second, err := Reset(kdir, "pt-reset", at(4*60+5))
	if err != nil || second != want+".1" {
		t.Errorf("second backup %s, %v", second, err)
	}
	if kept, _ := os.ReadFile(backup); string(kept) != string(before) {
		t.Error("the first backup was overwritten")
	}
}

// TestNoRewriteOfTheSameSummary: a close summary that says what the file
// already says is not written again.
func TestNoRewriteOfTheSameSummary(t *testing.T) {
	t.Parallel()
	tk := openTicket(t, t.TempDir(), "pt-same")
	tk.WriteCloseSummary(false, Counts{Minor: 1})
	path := filepath.Join(tk.Dir(), CloseSummaryFile)
	before, _ := os.Stat(path)
	tk.WriteCloseSummary(false, Counts{Minor: 1})
	if after, _ := os.Stat(path); !os.SameFile(before, after) {
		t.Error("the same close summary was written again")
	}
	tk.WriteCloseSummary(true, Counts{Minor: 1})
	if after, _ := os.Stat(path); os.SameFile(before, after) {
		t.Error("a changed close summary was not written")
	}
}

// TestSaveStartsOverFromAnotherWriter: a save starts from the file as the
// handle last saw it and checks the file just before its rename; what
// another program wrote between the handle's reads and writes is kept.
func TestSaveStartsOverFromAnotherWriter(t *testing.T) {
	t.Parallel()
	kdir := t.TempDir()
	tk := openTicket(t, kdir, "pt-other")
	path := filepath.Join(tk.Dir(), RetryStateFile)
	// After the open, ticketflow records a closed attempt of its own.
	other := `{"version": 1, "ticketId": "pt-other", "status": "closed", "retryCount": 0,
 "lastAttemptAt": "2026-02-10T11:00:00Z", "by": "tf",
 "attempts": [{"attemptNumber": 1, "startedAt": "2026-02-10T10:00:00Z", "completedAt": "2026-02-10T11:00:00Z",
   "status": "closed", "trigger": "initial", "by": "tf"}]}`
	if err := os.WriteFile(path, []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	a, resumed, err := tk.Begin(at(1), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resumed || a.AttemptNumber != 2 || a.Trigger != TriggerManualRetry {
		t.Fatalf("began %+v (resumed %v), want attempt 2 after ticketflow's, as a manual retry", a, resumed)
	}
	// Between Begin and Complete, ticketflow adds a member of its own.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), `"ticketId": "pt-other",`, `"ticketId": "pt-other", "note": "tf was here",`, 1)
	if edited == string(data) {
		t.Fatalf("no ticketId member in %s", data)
	}
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tk.Complete(at(2), AttemptClosed, nil); err != nil {
		t.Fatal(err)
	}
	final, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"note": "tf was here"`, `"by": "tf"`} {
		if !strings.Contains(string(final), want) {
			t.Errorf("ticketflow's %s was lost:\n%s", want, final)
		}
	}
	st := onDisk(t, tk)
	if len(st.Attempts) != 2 || st.Attempts[0].Status != AttemptClosed || st.Attempts[1].Status != AttemptClosed || st.Attempts[1].AttemptNumber != 2 {
		t.Errorf("attempts %+v, want ticketflow's closed attempt 1 and this run's closed attempt 2", st.Attempts)
	}
}

// A store keeps its tickets folder open between tickets; a folder removed
// meanwhile is made again, and the ticket lands in the new one.
func TestTicketStoreReopensARemovedFolder(t *testing.T) {
	t.Parallel()
	kdir := t.TempDir()
	s := NewStore(kdir)
	defer s.Close()
	for i, id := range []string{"pt-1", "pt-2"} {
		if i == 1 {
			if err := os.RemoveAll(filepath.Join(kdir, "tickets")); err != nil {
				t.Fatal(err)
			}
		}
		tk, err := s.Open(id, at(0), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := tk.Begin(at(1), nil); err != nil {
			t.Fatal(err)
		}
		tk.Close()
		if _, err := os.Stat(filepath.Join(kdir, "tickets", id, RetryStateFile)); err != nil {
			t.Fatalf("ticket %s: %v", id, err)
		}
	}
}

// openTicketIn opens ticket id in the store of knowledgeDir, as a run opens
// it (Store.Open), with a store of its own.
func openTicketIn(knowledgeDir, id string, now time.Time, warn func(string)) (*Ticket, error) {
	s := NewStore(knowledgeDir)
	defer s.Close()
	return s.Open(id, now, warn)
}
