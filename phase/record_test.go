package phase

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"peal/internal/testkit/fakes"
)

// recording is a Recorder that notes every call and judgement.
type recording struct {
	mu     sync.Mutex
	events []string
}

func (r *recording) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, s)
}

func (r *recording) CallBegan(info CallInfo) {
	r.note(fmt.Sprintf("start %s %s %d/%d+%d %s %s", info.ID, info.Phase, info.Attempt.N, info.Attempt.Allowed, info.Attempt.Network, strings.Join(info.Argv[1:], " "), strings.Join(slices.DeleteFunc([]string{info.StdoutLog, info.StderrLog}, func(s string) bool { return s == "" }), ",")))
}

// endNoter is an Observer that notes when a call's end reaches it.
type endNoter struct{ r *recording }

func (o endNoter) CallStarted(info CallInfo) func() { return func() { o.r.note("ended " + info.ID) } }

func (r *recording) CallEnded(id string, res Result, err error) {
	r.note(fmt.Sprintf("end %s exit=%d", id, res.ExitCode))
}

func (r *recording) AttemptJudged(id string, v Verdict, retry bool, wait time.Duration) {
	r.note(fmt.Sprintf("judged %s %s retry=%v wait=%s", id, v.Class, retry, wait))
}

type namedBuffer struct {
	bytes.Buffer
	name string
}

func (b *namedBuffer) Name() string { return b.name }

// TestRecorderHearsEveryAttempt: a Recorder hears of each attempt's start
// (its id, attempt, argv with the prompt hidden, log files), its end, and
// how the loop judged it, in that order; the judgement names the class, the
// retry and the wait.
func TestRecorderHearsEveryAttempt(t *testing.T) {
	t.Parallel()
	dir := setup(t, fakes.Outcome{Exit: 1, Stderr: "connection refused"}, fakes.Outcome{Exit: 1, Stderr: "broke"})
	rec := &recording{}
	var logBuf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	classify := func(res Result) Verdict {
		switch {
		case strings.Contains(res.Stderr, "connection refused"):
			return Verdict{Class: Network, Err: errors.New("network down")}
		case res.ExitCode != 0:
			return Verdict{Class: Ordinary, Err: errors.New("broke")}
		}
		return Verdict{Class: Succeeded}
	}
	var sleeps []time.Duration
	p := Retry{Attempts: 2, Classify: classify, Budgets: map[Class]Budget{Network: {Retries: 2, Backoff: Exponential(time.Second, time.Second, 0)}},
		Sleep: func(_ context.Context, d time.Duration) error { sleeps = append(sleeps, d); return nil }}
	_, n, err := Do(context.Background(), log, p, func(a Attempt) Spec {
		s := agentSpec(dir, 30*time.Second, time.Second)
		s.Attempt, s.Recorder, s.Observer, s.Log = a, rec, endNoter{rec}, log
		s.StdoutSink = &namedBuffer{name: fmt.Sprintf("a%d.stdout.log", a.N)}
		return s
	})
	var fe *FailedError
	if n != 3 || !errors.As(err, &fe) {
		t.Fatalf("%d attempts, err %v; want 3: a network failure, then the two ordinary ones the call allows", n, err)
	}
	var got []string
	ids := map[string]string{}
	for _, e := range rec.events {
		f := strings.Fields(e)
		if _, ok := ids[f[1]]; !ok {
			ids[f[1]] = fmt.Sprintf("#%d", len(ids)+1)
		}
		f[1] = ids[f[1]]
		got = append(got, strings.Join(f, " "))
	}
	want := []string{
		"start #1 plan 1/2+2 --print --plan <prompt len=10> a1.stdout.log", "end #1 exit=1", "ended #1", "judged #1 network retry=true wait=1s",
		"start #2 plan 2/2+2 --print --plan <prompt len=10> a2.stdout.log", "end #2 exit=1", "ended #2", "judged #2 ordinary retry=true wait=0s",
		"start #3 plan 3/2+2 --print --plan <prompt len=10> a3.stdout.log", "end #3 exit=1", "ended #3", "judged #3 ordinary retry=false wait=0s",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("recorded\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The log says the attempt in words, once, and gives the retry its
	// class and reason.
	out := logBuf.String()
	for _, s := range []string{`attempt="attempt 1 of 2, +2 on network failures"`, `class=network reason="network down"`,
		`attempt="attempt 2 of 2, +2 on network failures" class=ordinary reason=broke`, `retries_left="0 on ordinary failures"`} {
		if !strings.Contains(out, s) {
			t.Errorf("log lacks %s:\n%s", s, out)
		}
	}
	if strings.Contains(out, "attempt=2/4") {
		t.Errorf("log has the old count:\n%s", out)
	}
}

// TestBookkeepingAtDebug: a git or stet call (no prompt) is logged at
// debug, an agent call at info.
func TestBookkeepingAtDebug(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c := Caller{Log: log, Limits: Limits{Timeout: 30 * time.Second, KillGrace: time.Second}}
	if _, err := Run(context.Background(), c.Command("git", []string{"/bin/sh", "-c", "exit 0"}, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 {
		t.Fatalf("a git call logged at info: %s", buf.String())
	}
	dir := setup(t)
	s := agentSpec(dir, 30*time.Second, time.Second)
	s.Log = log
	if _, err := Run(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `level=INFO msg="starting call" phase=plan`) {
		t.Fatalf("an agent call is not logged at info: %q", buf.String())
	}
}

// TestAttemptWords: an attempt reads as a person counts it; one past the
// call's own count is a network retry of its own budget, never "attempt 2
// of 1".
func TestAttemptWords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a    Attempt
		want string
	}{
		{Attempt{N: 1, Of: 1}, "attempt 1 of 1"},
		{Attempt{N: 1, Of: 3, Allowed: 1, Network: 2, Counted: 1}, "attempt 1 of 1, +2 on network failures"},
		{Attempt{N: 2, Of: 3, Allowed: 1, Network: 2, Counted: 2}, "attempt 2: network retry 1 of 2"},
		{Attempt{N: 3, Of: 4, Allowed: 2, Network: 2, Counted: 3}, "attempt 3: network retry 1 of 2"},
		{Attempt{N: 4, Of: 4, Allowed: 1, Network: 2, Counted: 2}, "attempt 2: network retry 1 of 2 (+2 not counted)"},
		{Attempt{N: 2, Of: 3, Allowed: 2, Network: 1, Counted: 2}, "attempt 2 of 2, +1 on network failures"},
	} {
		if got := tc.a.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.a, got, tc.want)
		}
	}
}
