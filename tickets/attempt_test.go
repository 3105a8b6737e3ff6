package tickets

import (
	"errors"
	"testing"
)

// TestAttemptStartAndEnd: a run's attempt begins with the models of its
// number, ends as its work ended (an interruption leaves it in progress, a
// failure is an error, findings of a fail_on severity or a failed check
// block it, nothing left closes it), and a ticket that used its retries is
// skipped by Start and by Next alike.
func TestAttemptStartAndEnd(t *testing.T) {
	t.Parallel()
	esc := Escalating{On: true, MaxRetries: 2, Fixer: "fixer"}
	kdir := t.TempDir()
	s := NewStore(kdir)
	defer s.Close()
	for i, tc := range []struct {
		ending      Ending
		status      string // recorded; "" for in progress
		next, retry int
	}{
		{Ending{Interrupted: true}, AttemptInProgress, 1, 0},
		{Ending{Failed: true}, AttemptError, 2, 0},
		{Ending{Counts: Counts{Minor: 2}, FailOn: []string{"Critical", "Major"}}, AttemptClosed, 3, 0},
		{Ending{Counts: Counts{Major: 1}, FailOn: []string{"Critical", "Major"}}, AttemptBlocked, 4, 1},
		{Ending{Checks: []FailedCheck{{Command: "go test ./...", Result: "exit 1", LastLine: "FAIL"}}}, AttemptBlocked, 0, 2},
	} {
		n, why := Next(kdir, "pt-at", esc)
		tk, a, resumed, err := s.Start("pt-at", at(i), esc, nil)
		if err != nil {
			t.Fatalf("attempt %d: %v", i+1, err)
		}
		if a.AttemptNumber != n || why != "" || resumed != (i == 1) {
			t.Errorf("attempt %d: began %d (resumed %v), Next said %d (%q)", i+1, a.AttemptNumber, resumed, n, why)
		}
		if fixer := a.Escalation.Fixer; (a.AttemptNumber >= 2) != (fixer != nil && *fixer == "fixer") {
			t.Errorf("attempt %d: fixer %v", a.AttemptNumber, fixer)
		}
		status, err := tk.End(at(i), tc.ending)
		if err != nil {
			t.Fatal(err)
		}
		st, err := Load(kdir, "pt-at")
		if err != nil {
			t.Fatal(err)
		}
		if want := tc.status; (want == AttemptInProgress) != (status == "") || st.LastStatus() != want || st.RetryCount != tc.retry {
			t.Errorf("attempt %d ended %q: recorded %q, retry count %d; want %q, %d", a.AttemptNumber, status, st.LastStatus(), st.RetryCount, want, tc.retry)
		}
	}
	if n, why := Next(kdir, "pt-at", esc); n != 0 || why != "skipped: 2 blocked attempts reached max_retries 2" {
		t.Errorf("Next after the retries: %d, %q", n, why)
	}
	var ex *ExhaustedError
	if _, _, _, err := s.Start("pt-at", at(9), esc, nil); !errors.As(err, &ex) || ex.RetryCount != 2 || ex.MaxRetries != 2 {
		t.Fatalf("Start after the retries: %v", err)
	}
	tk, _, _, err := s.Start("pt-at", at(9), Escalating{}, nil)
	if err != nil {
		t.Fatalf("without escalation a ticket is never skipped: %v", err)
	}
	tk.Close()
}

// TestBlocks: a gate blocks on a count above zero of one of its
// severities; an empty fail_on is no gate.
func TestBlocks(t *testing.T) {
	t.Parallel()
	c := Counts{Major: 1, Suggestions: 3}
	for _, tc := range []struct {
		failOn []string
		want   bool
	}{{nil, false}, {[]string{"Critical"}, false}, {[]string{"Critical", "Major"}, true}, {[]string{"Suggestions"}, true}, {[]string{"Unknown"}, false}} {
		if got := c.Blocks(tc.failOn); got != tc.want {
			t.Errorf("Blocks(%v) = %v", tc.failOn, got)
		}
	}
}
