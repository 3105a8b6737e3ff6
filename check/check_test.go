package check

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"peal/internal/safefs"
	"peal/internal/testkit/testbin"
	"peal/internal/text"
	"peal/phase"
)

// TestMain gives the tests' scratch folders a memory file system when there
// is one (testbin.UseMemoryTemp).
func TestMain(m *testing.M) { os.Exit(testbin.Main(m, nil)) }

type recorded struct {
	mu   sync.Mutex
	runs []Result
}

func (r *recorded) ran(res Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs = append(r.runs, res)
}

func newChecks(t *testing.T, dir string, timeout time.Duration, rec *recorded, cmds ...string) *Checks {
	t.Helper()
	caller := phase.Caller{Dir: dir, Limits: phase.Limits{Timeout: time.Hour, KillGrace: time.Second}, Env: []string{"PEAL_EXTRA=1"}}
	return New(cmds, timeout, caller, testLog(), Hooks{
		Env: func(task int) []string { return []string{fmt.Sprintf("PEAL_TICKET_ID=t-%d", task)} },
		Ran: rec.ran,
	})
}

// Every check runs, in order, in the tree given, through sh -c (so a
// command keeps its quotes, pipes and &&), with the call's PEAL_*
// variables; a failure does not stop the next; each is heard of once.
func TestRunEveryCheckInOrder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := &recorded{}
	c := newChecks(t, dir, time.Minute, rec,
		`echo "a, b" > first.txt && pwd`,
		`echo "$PEAL_PHASE $PEAL_TASK_INDEX $PEAL_ATTEMPT $PEAL_TICKET_ID $PEAL_EXTRA"; echo broken >&2; exit 3`,
		`test -f first.txt`)
	run, err := c.Run(context.Background(), 2, Execute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(run) != 3 || !run[0].Passed() || run[1].Passed() || !run[2].Passed() {
		t.Fatalf("run = %+v", run)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "first.txt")); string(data) != "a, b\n" {
		t.Fatalf("first.txt = %q", data)
	}
	if got := strings.TrimSpace(run[0].Tail); got != dir {
		t.Errorf("ran in %q, want %q", got, dir)
	}
	if want := "check 2 1 t-2 1\nbroken"; run[1].Tail != want || run[1].ExitCode != 3 || run[1].Cut {
		t.Errorf("second check: tail %q (cut %v), exit %d; want %q", run[1].Tail, run[1].Cut, run[1].ExitCode, want)
	}
	if got := run[1].Outcome(); got != "exited with status 3" {
		t.Errorf("outcome %q", got)
	}
	if got := run[1].Summary(); got != "`"+text.Snippet(c.commands[1], 80)+"` exited with status 3: broken" {
		t.Errorf("summary %q", got)
	}
	if !slices.Equal(run.Failing(), Set{c.commands[1]}) {
		t.Errorf("failing %q", run.Failing())
	}
	if got := run.Charged(Set{c.commands[1]}); len(got) != 0 {
		t.Errorf("a check red before is charged: %v", got)
	}
	if got := run.Charged(nil); len(got) != 1 || got[0].Command != c.commands[1] {
		t.Errorf("charged %v", got)
	}
	if len(rec.runs) != 3 {
		t.Fatalf("heard of %d checks, want 3", len(rec.runs))
	}
	for i, r := range rec.runs {
		if r.Command != c.commands[i] || r.Task != 2 || r.Stage != Execute || r.CallID == "" {
			t.Errorf("heard %+v", r)
		}
	}
}

// A check that outlives its timeout is stopped, with whatever it started,
// and is a failed check named as timed out.
func TestCheckTimesOut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	c := newChecks(t, dir, 300*time.Millisecond, &recorded{}, `echo started; sleep 60 & echo $! > child.pid; wait`)
	run, err := c.Run(context.Background(), 1, Address, 2)
	if err != nil {
		t.Fatal(err)
	}
	r := run[0]
	if r.Passed() || !r.TimedOut || r.Outcome() != "timed out after 300ms" || r.Tail != "started" {
		t.Fatalf("result %+v (%s)", r, r.Outcome())
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	fmt.Sscan(string(data), &pid)
	if pid <= 0 || processAlive(pid) {
		t.Fatalf("the check's child %d outlived the timeout", pid)
	}
}

// A signal to peal (the context's end) stops a running check; the run says
// so and holds the checks that ended before.
func TestCheckInterrupted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "running")
	mkfifo(t, fifo)
	rec := &recorded{}
	c := newChecks(t, dir, time.Minute, rec, "true", `echo > running; sleep 60`, "echo never > never.txt")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		f, err := os.Open(fifo) // returns once the check opened it for writing
		if err == nil {
			f.Close()
		}
		cancel()
	}()
	run, err := c.Run(ctx, 1, Execute, 0)
	var ie *phase.InterruptedError
	if !errors.As(err, &ie) {
		t.Fatalf("err = %v", err)
	}
	if len(run) != 1 || !run[0].Passed() {
		t.Fatalf("run = %+v", run)
	}
	if _, err := os.Stat(filepath.Join(dir, "never.txt")); err == nil {
		t.Fatal("a check after the interruption ran")
	}
	if len(rec.runs) != 2 || !rec.runs[1].Interrupted || rec.runs[1].Passed() {
		t.Fatalf("heard %+v", rec.runs)
	}
}

// The tail is the end of the output, cleaned, and bounded both in lines and
// in bytes, whatever the output's length.
func TestTail(t *testing.T) {
	t.Parallel()
	many := func(n int, f string) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, f+"\n", i)
		}
		return b.String()
	}
	cases := []struct {
		name, out  string
		want       string // the tail, or its last line when wantLines is set
		wantLines  int
		wantCut    bool
		wantPrefix string
	}{
		{"short", "a\nb\n\n", "a\nb", 2, false, ""},
		{"colours and controls", "\x1b[31mFAIL\x1b[0m TestX\x07\r\nprogress 10%\rprogress 90%\rdone\n", "FAIL TestX\\x07\nprogress 10%\nprogress 90%\ndone", 4, false, ""},
		{"invalid utf-8", "ok \xff\xfe end\n", "ok \uFFFD end", 1, false, ""},
		{"many lines", many(1000, "line %d"), "line 1000", maxTailLines, true, "line 801\n"},
		{"many bytes", many(300, strings.Repeat("y", 400)+" %d"), strings.Repeat("y", 400) + " 300", maxTailBytes / 405, true, ""},
		{"huge output", strings.Repeat(many(10000, "l%05d"), 30), "l10000", maxTailLines, true, "l09801\n"},
	}
	for _, tc := range cases {
		w := &tailWriter{}
		for chunk := range slices.Chunk([]byte(tc.out), 4096) {
			w.Write(chunk)
		}
		got, cut := w.text()
		lines := 0
		if got != "" {
			lines = strings.Count(got, "\n") + 1
		}
		if len(got) > maxTailBytes || lines != tc.wantLines || cut != tc.wantCut || !strings.HasPrefix(got, tc.wantPrefix) {
			t.Errorf("%s: %d bytes, %d lines, cut %v; want %d lines, cut %v, starting %q: %q", tc.name, len(got), lines, cut, tc.wantLines, tc.wantCut, tc.wantPrefix, head(got))
			continue
		}
		if tc.wantLines == strings.Count(tc.want, "\n")+1 && got != tc.want {
			t.Errorf("%s: tail %q, want %q", tc.name, got, tc.want)
		}
		if last := got[strings.LastIndexByte(got, '\n')+1:]; !strings.HasSuffix(tc.want, last) {
			t.Errorf("%s: last line %q, want %q", tc.name, last, tc.want)
		}
	}
}

func head(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

func TestSets(t *testing.T) {
	t.Parallel()
	s := Set(nil).With("b").With("a").With("b").With("c")
	if !slices.Equal(s, Set{"a", "b", "c"}) || !s.Has("a") || s.Has("d") {
		t.Fatalf("%q", s)
	}
	if got := s.Intersect(Set{"b", "c", "d"}); !slices.Equal(got, Set{"b", "c"}) {
		t.Errorf("intersect %q", got)
	}
	if got := s.Minus(Set{"b"}); !slices.Equal(got, Set{"a", "c"}) {
		t.Errorf("minus %q", got)
	}
}

func TestWithin(t *testing.T) {
	t.Parallel()
	cases := []struct {
		tail string
		n    int
		want string
	}{
		{"a\nb\nc", 10, "a\nb\nc"},
		{"aaaa\nbb\ncc", 5, "bb\ncc"},
		{"aaaa\nbb\ncc", 3, "cc"},
		{"aaaa\nbbbbbbbb", 4, "…bbbb"},
		{"x\nééé", 4, "…éé"},
	}
	for _, c := range cases {
		if got := Within(c.tail, c.n); got != c.want {
			t.Errorf("Within(%q, %d) = %q, want %q", c.tail, c.n, got, c.want)
		}
	}
}

// TestCheckOnAFullDisk: a check that fails where the disk is full is said
// as a full disk, naming the folder (a run then stops), not as a check to
// charge the task with; one that passes there is a pass.
func TestCheckOnAFullDisk(t *testing.T) {
	t.Parallel()
	dir := testbin.FullDisk(t)
	rec := &recorded{}
	c := newChecks(t, dir, time.Minute, rec, `true`, `echo result > out.txt`)
	results, err := c.Run(context.Background(), 1, Execute, 0)
	var full *safefs.FullError
	if !errors.As(err, &full) || full.Dir != dir || !phase.EndsRun(err) {
		t.Fatalf("err %v", err)
	}
	want := "the disk holding " + dir + " is full (check `echo result > out.txt` exited with status 1 there): free space there, then run peal again"
	if err.Error() != want {
		t.Fatalf("line %q\nwant %q", err, want)
	}
	if len(results) != 1 || !results[0].Passed() {
		t.Fatalf("results %+v", results)
	}
}

// TestSeen: what the checks last said of a tree, stale once it may have
// changed, and back to what it said at the mark once the tree is put back.
func TestSeen(t *testing.T) {
	t.Parallel()
	var s Seen
	same := func(step string, red Set, stale bool) {
		t.Helper()
		if got, st := s.Now(); !slices.Equal(got, red) || st != stale {
			t.Fatalf("%s: %v, stale %v; want %v, stale %v", step, got, st, red, stale)
		}
	}
	same("zero", nil, false)
	s.Ran(Set{"lint"})
	same("ran", Set{"lint"}, false)
	s.Mark()
	s.Ran(Set{"lint", "test"})
	s.Changed()
	same("changed", Set{"lint", "test"}, true)
	s.Back()
	same("put back", Set{"lint"}, false)
}
