package phase

import (
	"context"
	"testing"
	"time"

	"peal/internal/testkit/fakes"
)

type observed struct {
	started []CallInfo
	ended   int
}

func (o *observed) CallStarted(c CallInfo) func() {
	o.started = append(o.started, c)
	return func() { o.ended++ }
}

// TestObserverAroundCall: the observer hears of a call once its child runs
// and of its end before Run returns; a call that cannot start is not heard
// of; only calls with a prompt (agent calls) carry a role.
func TestObserverAroundCall(t *testing.T) {
	t.Parallel()
	dir := setup(t, fakes.Outcome{})
	cases := []struct {
		name    string
		prompt  bool
		attempt Attempt
		want    Attempt
	}{
		{"agent call", true, Attempt{N: 2, Of: 3, Role: RoleFallback}, Attempt{N: 2, Of: 3, Role: RoleFallback}},
		{"call that is not retried", true, Attempt{}, Attempt{N: 1, Of: 1}},
		{"no agent, no role", false, Attempt{N: 1, Of: 2, Role: RolePrimary}, Attempt{N: 1, Of: 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var o observed
			spec := agentSpec(dir, 30*time.Second, time.Second)
			spec.Prompt, spec.Attempt, spec.Task, spec.Observer = tc.prompt, tc.attempt, 4, &o
			before := time.Now()
			if _, err := Run(context.Background(), spec); err != nil {
				t.Fatal(err)
			}
			if len(o.started) != 1 || o.ended != 1 {
				t.Fatalf("%d starts, %d ends", len(o.started), o.ended)
			}
			c := o.started[0]
			if c.Phase != "plan" || c.Task != 4 || c.Attempt != tc.want || c.Started.Before(before) {
				t.Fatalf("observer heard %+v", c)
			}
		})
	}
	// The observer learns which log file holds which stream.
	var logs observed
	spec := agentSpec(dir, 30*time.Second, time.Second)
	spec.Observer, spec.StdoutSink, spec.StderrSink = &logs, &namedBuffer{name: "out.log"}, &namedBuffer{name: "err.log"}
	if _, err := Run(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	if c := logs.started[0]; c.StdoutLog != "out.log" || c.StderrLog != "err.log" {
		t.Fatalf("logs: stdout %q, stderr %q", c.StdoutLog, c.StderrLog)
	}
	var o observed
	spec = agentSpec(dir, time.Second, time.Second)
	spec.Argv[0], spec.Observer = "/nonexistent/agent", &o
	if _, err := Run(context.Background(), spec); err == nil || len(o.started) != 0 || o.ended != 0 {
		t.Fatalf("a call that never started was observed: %v, %+v", err, o)
	}
}

// infoTaker keeps the CallInfo it is told.
type infoTaker struct{ got *CallInfo }

func (o infoTaker) CallStarted(info CallInfo) func() { *o.got = info; return nil }

// TestAt: an observer told where a call runs shows it before what the call
// says it is doing, and alone when the call says nothing.
func TestAt(t *testing.T) {
	t.Parallel()
	var got CallInfo
	obs := At(infoTaker{&got}, "worktree task-2 on peal/2")
	for _, tc := range []struct {
		detail func() string
		want   string
	}{
		{nil, "worktree task-2 on peal/2"},
		{func() string { return "" }, "worktree task-2 on peal/2"},
		{func() string { return "hunk 3/7" }, "worktree task-2 on peal/2 | hunk 3/7"},
	} {
		obs.CallStarted(CallInfo{ID: "c", Detail: tc.detail})
		if got.ID != "c" || got.Detail == nil || got.Detail() != tc.want {
			t.Errorf("told %+v, detail %q; want %q", got, got.Detail(), tc.want)
		}
	}
}
