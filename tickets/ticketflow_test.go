package tickets

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// ticketflowEnv names a checkout of ticketflow (the folder holding its tf
// package); the tests below run its own Python code against peal's files
// and are skipped without it.
const ticketflowEnv = "PEAL_TICKETFLOW_SRC"

// ticketflow runs a Python program with ticketflow's tf.retry_state
// imported as rs; args reach it as sys.argv[1:]. It returns what the
// program prints, as JSON.
func ticketflow(t *testing.T, program string, args ...string) any {
	t.Helper()
	v, err := runTicketflow(needTicketflow(t), program, args...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// needTicketflow skips the test unless a ticketflow checkout and python3
// are at hand, and returns the checkout.
func needTicketflow(t *testing.T) string {
	t.Helper()
	src := os.Getenv(ticketflowEnv)
	if src == "" {
		t.Skipf("set %s to a ticketflow checkout to check peal's files with ticketflow's own code", ticketflowEnv)
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	return src
}

func runTicketflow(src, program string, args ...string) (any, error) {
	cmd := exec.Command("python3", append([]string{"-c", "import json, sys\nfrom pathlib import Path\nimport tf.retry_state as rs\n" + program}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+src)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("python: %v\n%s", err, stderr.Bytes())
	}
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		return nil, fmt.Errorf("python printed %q: %v", out, err)
	}
	return v, nil
}

// TestTicketflowReadsPealsFiles: ticketflow loads every state peal writes,
// sees the same attempts, counts and verdicts, and reads peal's close
// summaries as peal means them.
func TestTicketflowReadsPealsFiles(t *testing.T) {
	t.Parallel()
	kdir := t.TempDir()
	tk := openTicket(t, kdir, "pt-peal")
	gate := &QualityGate{FailOn: []string{"Critical", "Major"}, Counts: Counts{Critical: 1, Minor: 2}}
	tk.Begin(at(0), escalateWith("fix-m", "second-m", "work-m"))
	tk.WriteCloseSummary(true, gate.Counts)
	tk.Complete(at(60), AttemptBlocked, gate)
	tk.Begin(at(120), escalateWith("fix-m", "second-m", "work-m"))
	tk.Complete(at(180), AttemptError, nil)
	tk.Begin(at(240), escalateWith("fix-m", "second-m", "work-m")) // left in progress
	got := ticketflow(t, `
s = rs.RetryState.load(sys.argv[1])
d = s.to_dict()
print(json.dumps({
    "loaded": s is not None,
    "ticket": s.ticket_id,
    "attempts": [[a["attemptNumber"], a["status"], a["trigger"], a.get("escalation", {}).get("fixer")] for a in d["attempts"]],
    "retry_count": s.get_retry_count(),
    "attempt_number": s.get_attempt_number(),
    "blocked": s.is_blocked(),
    "skip_at_1": s.should_skip(1),
    "close": rs.detect_close_status(Path(sys.argv[1]) / "close-summary.md").status,
    "gate": rs.detect_quality_gate_blocked(Path(sys.argv[1]), ["Critical"]).counts,
}))`, tk.Dir())
	want := map[string]any{
		"loaded": true, "ticket": "pt-peal",
		"attempts": []any{
			[]any{1.0, "blocked", "initial", nil},
			[]any{2.0, "error", "quality_gate", "fix-m"},
			[]any{3.0, "in_progress", "manual_retry", "fix-m"},
		},
		"retry_count": 1.0, "attempt_number": 3.0, "blocked": false, "skip_at_1": true,
		"close": "blocked",
		"gate":  map[string]any{"Critical": 1.0, "Major": 0.0, "Minor": 2.0, "Warnings": 0.0, "Suggestions": 0.0},
	}
	if !jsonEqual(got, want) {
		t.Errorf("ticketflow read\n%v\nwant\n%v", got, want)
	}
}

// TestTicketflowReadsFailedChecks: a close summary that lists failed checks
// reads as blocked to ticketflow, with peal's counts, whatever the checks
// printed (here lines that look like a status and like counts).
func TestTicketflowReadsFailedChecks(t *testing.T) {
	t.Parallel()
	kdir := t.TempDir()
	tk := openTicket(t, kdir, "pt-checks")
	tk.Begin(at(0), nil)
	checks := []FailedCheck{
		{Command: "go test ./...", Result: "exited with status 1", LastLine: "--- FAIL: TestAdd (0.00s)"},
		{Command: "make lint", Result: "exited with status 2", LastLine: "## Status CLOSED Critical: 7 Major: 9"},
	}
	if err := tk.WriteCloseSummary(true, Counts{Minor: 1}, checks...); err != nil {
		t.Fatal(err)
	}
	if cs, err := tk.CloseStatus(); err != nil || cs.Status != "blocked" {
		t.Fatalf("peal reads %+v, %v", cs, err)
	}
	tk.Complete(at(60), AttemptBlocked, &QualityGate{FailOn: []string{"Critical", "Major"}, Counts: Counts{Minor: 1}})
	got := ticketflow(t, `
p = Path(sys.argv[1])
print(json.dumps({
    "close": rs.detect_close_status(p / "close-summary.md").status,
    "gate": rs.detect_blocked_from_close_summary(p / "close-summary.md").counts,
    "blocked": rs.RetryState.load(sys.argv[1]).is_blocked(),
}))`, tk.Dir())
	want := map[string]any{"close": "blocked", "gate": map[string]any{"Critical": 0.0, "Major": 0.0, "Minor": 1.0, "Warnings": 0.0, "Suggestions": 0.0}, "blocked": true}
	if !jsonEqual(got, want) {
		t.Errorf("ticketflow read\n%v\nwant\n%v", got, want)
	}
}

// TestPealReadsTicketflowsFiles: files ticketflow writes, including the odd
// ones its reader accepts, are read by peal and continued where ticketflow
// stopped; ticketflow then reads peal's continuation.
func TestPealReadsTicketflowsFiles(t *testing.T) {
	t.Parallel()
	kdir := t.TempDir()
	dir := ticketDir(kdir, "pt-tf")
	mkdir(t, dir)
	ticketflow(t, `
s = rs.RetryState(sys.argv[1], ticket_id="pt-tf")
s.start_attempt("initial", {"failOn": ["Major"], "counts": {"Major": 2}}, {"fixer": None, "reviewerSecondOpinion": None, "worker": None})
s.complete_attempt("blocked")
s.start_attempt("quality_gate")
s.complete_attempt("blocked")
s.save()
# what a hand edit or an older writer leaves: numbers written as floats, nulls
d = s.to_dict()
d["attempts"][0]["attemptNumber"] = 1.0
d["attempts"][1]["completedAt"] = None
d["lastAttemptAt"] = None
Path(sys.argv[1], "retry-state.json").write_text(json.dumps(d, indent=2))
print("{}")`, dir)
	tk, warnings, err := open(kdir, "pt-tf", at(0))
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	if len(*warnings) != 0 {
		t.Errorf("warnings %q", *warnings)
	}
	if st := tk.State(); len(st.Attempts) != 2 || st.RetryCount != 2 || !tk.Exhausted(2) {
		t.Fatalf("read %+v", st)
	}
	a, _, err := tk.Begin(at(0), nil)
	if err != nil || a.AttemptNumber != 3 || a.Trigger != TriggerQualityGate {
		t.Fatalf("attempt %+v, %v", a, err)
	}
	tk.WriteCloseSummary(false, Counts{})
	if err := tk.Complete(at(60), AttemptClosed, &QualityGate{FailOn: []string{"Major"}}); err != nil {
		t.Fatal(err)
	}
	got := ticketflow(t, `
s = rs.RetryState.load(sys.argv[1])
d = s.to_dict()
print(json.dumps({"attempts": [[a["attemptNumber"], a["status"], a.get("completedAt")] for a in d["attempts"]],
    "retry_count": s.get_retry_count(), "status": d["status"],
    "close": rs.detect_close_status(Path(sys.argv[1]) / "close-summary.md").status}))`, dir)
	want := map[string]any{
		"attempts":    []any{[]any{1.0, "blocked", stampOf(t, dir, 0)}, []any{2.0, "blocked", nil}, []any{3.0, "closed", stamp(at(60))}},
		"retry_count": 0.0, "status": "closed", "close": "closed",
	}
	if !jsonEqual(got, want) {
		t.Errorf("ticketflow read\n%v\nwant\n%v", got, want)
	}
}

// stampOf is the completedAt ticketflow wrote for attempt i.
func stampOf(t *testing.T, dir string, i int) any {
	t.Helper()
	data, _ := os.ReadFile(filepath.Join(dir, RetryStateFile))
	var doc struct{ Attempts []map[string]any }
	json.Unmarshal(data, &doc)
	return doc.Attempts[i]["completedAt"]
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestConcurrentTicketflowWriter runs ticketflow's own writer, which takes
// no lock, in a loop on the ticket peal is working on, and counts what each
// side's attempts became. peal reads the file again before every write and
// changes only its own attempt, so next to nothing of ticketflow's is lost;
// what can still be lost is a ticketflow save that lands between peal's read
// and its rename, or a peal write that lands inside ticketflow's own
// load-and-save, which peal cannot prevent.
func TestConcurrentTicketflowWriter(t *testing.T) {
	t.Parallel()
	src := needTicketflow(t)
	kdir := t.TempDir()
	tk := openTicket(t, kdir, "pt-both")
	const rounds = 200
	done := make(chan error, 1)
	go func() {
		_, err := runTicketflow(src, `
d = sys.argv[1]
for i in range(int(sys.argv[2])):
    s = rs.RetryState.load(d) or rs.RetryState(d, ticket_id="pt-both")
    s.start_attempt("ralph_retry")
    s._data["attempts"][-1]["by"] = "tf-%d" % i
    s.complete_attempt("closed")
    s.save()
print("{}")`, tk.Dir(), fmt.Sprint(rounds))
		done <- err
	}()
	mine := 0
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			running = false
		default:
			if _, _, err := tk.Begin(at(mine), nil); err != nil {
				t.Fatal(err)
			}
			if err := tk.Complete(at(mine), AttemptBlocked, nil); err != nil {
				t.Fatal(err)
			}
			mine++
		}
	}
	st, err := Load(kdir, "pt-both")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Attempts []map[string]any }
	json.Unmarshal(st.raw, &doc)
	tf := map[any]bool{}
	for _, a := range doc.Attempts {
		if by, ok := a["by"]; ok {
			tf[by] = true
		}
	}
	t.Logf("%d of %d ticketflow attempts kept, next to %d peal attempts (%d attempts in the file)", len(tf), rounds, mine, len(doc.Attempts))
	// Without the second reading, about half of them were lost.
	if lost := rounds - len(tf); lost > rounds/4 {
		t.Errorf("%d of %d ticketflow attempts lost", lost, rounds)
	}
}
