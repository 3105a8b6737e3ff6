package phase

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"peal/internal/procs"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testbin"
)

var fakeAgent string

// helpers are the programs this test binary is, run by a test as a call
// with its name as the first argument.
var helpers = map[string]func(args []string) int{}

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && helpers[os.Args[1]] != nil {
		os.Exit(helpers[os.Args[1]](os.Args[2:]))
	}
	os.Exit(testbin.Main(m, func(b map[string]string) { fakeAgent = b["fakeagent"] }, "peal/testdata/fakeagent"))
}

// setup writes a scenario whose every call has the given outcomes, in order.
func setup(t testing.TB, outcomes ...fakes.Outcome) string {
	t.Helper()
	dir := t.TempDir()
	s := fakes.Scenario{}
	if len(outcomes) > 0 {
		s.Rules = map[string][]fakes.Outcome{"plan": outcomes, "execute": outcomes, "normalize": outcomes}
	}
	if err := fakes.WriteScenario(dir, s); err != nil {
		t.Fatal(err)
	}
	return dir
}

func agentSpec(dir string, timeout, grace time.Duration) Spec {
	return Spec{
		Phase:     "plan",
		Argv:      []string{fakeAgent, "--print", "--plan", "the prompt"},
		Prompt:    true,
		Dir:       dir,
		Env:       []string{"FAKE_AGENT_DIR=" + dir, "PEAL_PHASE=plan", "PEAL_TASK_INDEX=1"},
		Timeout:   timeout,
		KillGrace: grace,
	}
}

func calls(t *testing.T, dir string) []fakes.Call {
	t.Helper()
	c, err := fakes.ReadCalls(dir)
	if err != nil {
		t.Fatal(err)
	}
	return fakes.Starts(c)
}

func grandchildren(t *testing.T, dir string) []int {
	t.Helper()
	ids, err := fakes.GrandchildPIDs(dir)
	if err != nil || len(ids) == 0 {
		t.Fatalf("no grandchild recorded: %v", err)
	}
	var pids []int
	for _, id := range ids {
		pids = append(pids, id.Host())
	}
	t.Cleanup(func() {
		for _, p := range pids {
			killIfAlive(p)
		}
	})
	return pids
}

// noGrandchildLeft fails the test when a grandchild the fake recorded in dir
// is still alive once the call (described by after, e.g. "the call") returned.
func noGrandchildLeft(t *testing.T, dir, after string) {
	t.Helper()
	for _, pid := range grandchildren(t, dir) {
		if procs.Alive(pid) {
			t.Fatalf("grandchild %d outlived %s", pid, after)
		}
	}
}

func TestRunSuccess(t *testing.T) {
	t.Parallel()
	dir := setup(t, fakes.Outcome{Stdout: "the plan", Stderr: "some noise"})
	res, err := Run(context.Background(), agentSpec(dir, 30*time.Second, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || res.TimedOut || !strings.Contains(res.Stdout, "the plan") || !strings.Contains(res.Stderr, "some noise") {
		t.Fatalf("unexpected result %+v", res)
	}
	if err := CheckExit(res); err != nil {
		t.Fatal(err)
	}
	c := calls(t, dir)
	if len(c) != 1 || !c[0].StdinNull || c[0].Cwd != dir {
		t.Fatalf("call record %+v: want one call, stdin /dev/null, cwd %s", c, dir)
	}
}

func TestRunExitCode(t *testing.T) {
	t.Parallel()
	dir := setup(t, fakes.Outcome{Exit: 3, Stderr: "first\nboom: broken"})
	res, err := Run(context.Background(), agentSpec(dir, 30*time.Second, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var ee *ExitError
	if err := CheckExit(res); !errors.As(err, &ee) || ee.Code != 3 || !strings.Contains(err.Error(), "boom: broken") {
		t.Fatalf("CheckExit = %v, want exit 3 naming the last stderr line", err)
	}
}

func TestRunStartError(t *testing.T) {
	t.Parallel()
	spec := agentSpec(t.TempDir(), time.Second, time.Second)
	spec.Argv[0] = "/nonexistent/agent"
	_, err := Run(context.Background(), spec)
	var se *StartError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want *StartError", err)
	}
}

// TestNULArgumentNamed: an argument or a variable holding a NUL byte is
// said as such, not as the system's "invalid argument", and nothing runs.
func TestNULArgumentNamed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		argv, env []string
		want      string
	}{
		{[]string{"/bin/echo", "ok", "a\x00b"}, nil, "cannot start /bin/echo: argument 2 holds a NUL byte, which no program can be given"},
		{[]string{"/bin/echo"}, []string{"X=a\x00b"}, "cannot start /bin/echo: variable X holds a NUL byte, which no program can be given"},
	} {
		_, err := Run(context.Background(), Spec{Phase: "git", Argv: tc.argv, Env: tc.env, Timeout: time.Minute, KillGrace: time.Second})
		var se *StartError
		if !errors.As(err, &se) || err.Error() != tc.want || !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%q: %v, want %q", tc.argv, err, tc.want)
		}
	}
}

// The hang tests use generous upper bounds: they guard against hangs, the
// benchmarks measure the timing.
func TestTimeoutStopsChild(t *testing.T) {
	t.Parallel()
	dir := setup(t, fakes.Outcome{Hang: true})
	start := time.Now()
	res, err := Run(context.Background(), agentSpec(dir, time.Second, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("took %s", took)
	}
	var te *TimeoutError
	if err := CheckExit(res); !errors.As(err, &te) || te.Idle || !strings.Contains(err.Error(), "timed out after 1 s") {
		t.Fatalf("CheckExit = %v", err)
	}
}

func TestTimeoutKillsChildIgnoringTerm(t *testing.T) {
	t.Parallel()
	dir := setup(t, fakes.Outcome{Hang: true, IgnoreTerm: true})
	start := time.Now()
	res, err := Run(context.Background(), agentSpec(dir, time.Second, 300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second || !res.TimedOut {
		t.Fatalf("took %s, timed out %v", took, res.TimedOut)
	}
	if alive := calls(t, dir)[0].ID().Alive(); alive {
		t.Fatal("agent ignoring SIGTERM is still alive")
	}
}

// A grandchild that holds the pipes and ignores SIGTERM does not keep Run
// waiting past the grace, and is dead afterwards.
func TestTimeoutGrandchildHoldingPipes(t *testing.T) {
	t.Parallel()
	dir := setup(t, fakes.Outcome{Grandchild: true, GrandchildIgnoreTerm: true, Hang: true})
	start := time.Now()
	res, err := Run(context.Background(), agentSpec(dir, time.Second, 300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second || !res.TimedOut {
		t.Fatalf("took %s, timed out %v", took, res.TimedOut)
	}
	noGrandchildLeft(t, dir, "the call")
}

// Whatever a successful call leaves in its group is terminated at once:
// with a 60 s grace, Run must not wait for the grace.
func TestSuccessfulCallLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	dir := setup(t, fakes.Outcome{Grandchild: true, Stdout: "done"})
	start := time.Now()
	res, err := Run(context.Background(), agentSpec(dir, 60*time.Second, 60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("took %s: waited on the grandchild", took)
	}
	if res.ExitCode != 0 || res.TimedOut {
		t.Fatalf("result %+v", res)
	}
	noGrandchildLeft(t, dir, "a successful call")
}

func TestLeftoverIgnoringTermIsKilledAfterGrace(t *testing.T) {
	t.Parallel()
	dir := setup(t, fakes.Outcome{Grandchild: true, GrandchildIgnoreTerm: true})
	start := time.Now()
	res, err := Run(context.Background(), agentSpec(dir, 60*time.Second, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second || res.ExitCode != 0 {
		t.Fatalf("took %s, exit %d", took, res.ExitCode)
	}
	noGrandchildLeft(t, dir, "the call (it ignored SIGTERM)")
}

// 200 MiB of output: the agent finishes normally, 10 MiB are kept.
func TestLargeOutputIsDrained(t *testing.T) {
	t.Parallel()
	dir := setup(t, fakes.Outcome{StdoutMiB: 200})
	res, err := Run(context.Background(), agentSpec(dir, 120*time.Second, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	if len(res.Stdout) != MaxCapture || res.StdoutDropped < 190<<20 {
		t.Fatalf("kept %d bytes, dropped %d", len(res.Stdout), res.StdoutDropped)
	}
	all, _ := fakes.ReadCalls(dir)
	ends := fakes.Ends(all)
	if len(ends) != 1 || ends[0].StdoutBytes < 200<<20 {
		t.Fatalf("the agent did not finish writing: %+v", ends)
	}
}

func TestSinkGetsWholeStream(t *testing.T) {
	t.Parallel()
	dir := setup(t, fakes.Outcome{StdoutMiB: 11})
	var sink countingWriter
	spec := agentSpec(dir, 60*time.Second, time.Second)
	spec.StdoutSink = &sink
	res, err := Run(context.Background(), spec)
	if err != nil || res.ExitCode != 0 {
		t.Fatal(err, res.ExitCode)
	}
	if sink.n < 11<<20 {
		t.Fatalf("sink got %d bytes", sink.n)
	}
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// A silent child is stopped by the idle timeout.
func TestIdleTimeout(t *testing.T) {
	t.Parallel()
	dir := setup(t, fakes.Outcome{NoStdout: true, Hang: true})
	spec := agentSpec(dir, 60*time.Second, time.Second)
	spec.IdleTimeout = time.Second
	start := time.Now()
	res, err := Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("took %s", took)
	}
	var te *TimeoutError
	if err := CheckExit(res); !errors.As(err, &te) || !te.Idle || !strings.Contains(err.Error(), "no output for 1 s") {
		t.Fatalf("CheckExit = %v", err)
	}
}

// A chatty child is not stopped by the idle timeout: chatter every 40 ms for
// 1.6 s against a 1.2 s idle limit. The agent outlives the limit only because
// its output keeps resetting it, and a loaded machine would have to stall it
// 30 times longer to fail this.
func TestOutputResetsIdleTimeout(t *testing.T) {
	t.Parallel()
	chatty := setup(t, fakes.Outcome{ChatterMS: 40, ChatterCount: 40})
	spec := agentSpec(chatty, 60*time.Second, time.Second)
	spec.IdleTimeout = 1200 * time.Millisecond
	res, err := Run(context.Background(), spec)
	if err != nil || res.TimedOut || res.ExitCode != 0 {
		t.Fatalf("chatty agent stopped: %v %+v", err, res)
	}
}

// Cancelling the context stops the child's group.
func TestCancelStopsGroup(t *testing.T) {
	t.Parallel()
	dir := setup(t, fakes.Outcome{Grandchild: true, Hang: true})
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	ready := &firstWrite{ch: make(chan struct{})}
	spec := agentSpec(dir, 60*time.Second, time.Second)
	spec.StdoutSink = ready
	go func() {
		_, err := Run(ctx, spec)
		done <- err
	}()
	<-ready.ch // the fake prints only after its grandchild has started
	grandchildren(t, dir)
	cancel(errors.New("test signal"))
	select {
	case err := <-done:
		var ie *InterruptedError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), "test signal") {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancellation")
	}
	if calls(t, dir)[0].ID().Alive() {
		t.Fatal("agent alive after cancellation")
	}
	noGrandchildLeft(t, dir, "a cancelled call")
}

// firstWrite closes ch on the first output of the child: the event tests wait on.
type firstWrite struct {
	ch   chan struct{}
	once sync.Once
}

func (w *firstWrite) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.ch) })
	return len(p), nil
}

func TestDoRetries(t *testing.T) {
	t.Parallel()
	fail := fakes.Outcome{Exit: 1, Stderr: "nope"}
	ok := fakes.Outcome{Stdout: "fine"}
	hang := fakes.Outcome{Hang: true}
	cases := []struct {
		name     string
		outcomes []fakes.Outcome
		attempts int
		wantN    int
		wantErr  bool
	}{
		{"first try", []fakes.Outcome{ok}, 1, 1, false},
		{"no retries, failure", []fakes.Outcome{fail, ok}, 1, 1, true},
		{"two failures then success", []fakes.Outcome{fail, fail, ok}, 3, 3, false},
		{"exhausted", []fakes.Outcome{fail}, 3, 3, true},
		{"timeout is retried", []fakes.Outcome{hang, ok}, 2, 2, false},
		{"timeouts exhaust", []fakes.Outcome{hang}, 2, 2, true},
	}
	// Calls that must answer get 1 s; where every attempt hangs, less does.
	timeout := func(outcomes []fakes.Outcome) time.Duration {
		if len(outcomes) == 1 && outcomes[0].Hang {
			return 300 * time.Millisecond
		}
		return time.Second
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := setup(t, tc.outcomes...)
			caller := Caller{Dir: dir, Limits: Limits{Timeout: timeout(tc.outcomes), KillGrace: time.Second}, Env: []string{"FAKE_AGENT_DIR=" + dir}}
			res, n, err := Do(context.Background(), nil, Retry{Attempts: tc.attempts}, func(a Attempt) Spec {
				return caller.Spec("plan", 4, a, []string{fakeAgent, "p"}, true)
			})
			c := calls(t, dir)
			if n != tc.wantN || len(c) != tc.wantN {
				t.Fatalf("attempts = %d, calls = %d, want %d", n, len(c), tc.wantN)
			}
			for i, call := range c {
				if call.Env["PEAL_ATTEMPT"] != fmt.Sprint(i+1) || call.Env["PEAL_PHASE"] != "plan" || call.Env["PEAL_TASK_INDEX"] != "4" {
					t.Fatalf("call %d env %v", i+1, call.Env)
				}
			}
			var fe *FailedError
			if tc.wantErr {
				if !errors.As(err, &fe) || fe.Attempts != tc.wantN {
					t.Fatalf("err = %v, want FailedError after %d", err, tc.wantN)
				}
				return
			}
			if err != nil || !strings.Contains(res.Stdout, "fine") {
				t.Fatalf("err = %v, stdout %q", err, res.Stdout)
			}
		})
	}
}

func TestDoStartErrorNotRetried(t *testing.T) {
	t.Parallel()
	_, n, err := Do(context.Background(), nil, Retry{Attempts: 3}, func(a Attempt) Spec {
		return Spec{Phase: "plan", Argv: []string{"/nonexistent/agent"}, Timeout: time.Second, KillGrace: time.Second}
	})
	var se *StartError
	if n != 1 || !errors.As(err, &se) {
		t.Fatalf("n = %d, err = %v", n, err)
	}
}

func TestDoCustomFailureAndBackoff(t *testing.T) {
	t.Parallel()
	dir := setup(t, fakes.Outcome{Stdout: "bad"}, fakes.Outcome{Stdout: "bad"}, fakes.Outcome{Stdout: "good"})
	caller := Caller{Dir: dir, Limits: Limits{Timeout: 10 * time.Second, KillGrace: time.Second}, Env: []string{"FAKE_AGENT_DIR=" + dir}}
	delays := &countingBackOff{}
	res, n, err := Do(context.Background(), nil, Retry{
		Attempts: 5,
		Backoff:  delays,
		Failure: func(r Result) error {
			if strings.Contains(r.Stdout, "bad") {
				return errors.New("bad output")
			}
			return nil
		},
	}, func(a Attempt) Spec { return caller.Spec("normalize", 0, a, []string{fakeAgent, "x"}, true) })
	if err != nil || n != 3 || !strings.Contains(res.Stdout, "good") {
		t.Fatalf("n = %d, err = %v, stdout %q", n, err, res.Stdout)
	}
	if delays.resets != 1 || delays.calls != 2 {
		t.Fatalf("backoff reset %d times, asked %d times; want 1 and 2", delays.resets, delays.calls)
	}
}

func TestDoDelayCancelled(t *testing.T) {
	t.Parallel()
	dir := setup(t, fakes.Outcome{Exit: 1})
	caller := Caller{Dir: dir, Limits: Limits{Timeout: 10 * time.Second, KillGrace: time.Second}, Env: []string{"FAKE_AGENT_DIR=" + dir}}
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	// The first attempt's failure cancels the run: Do must not sit out the hour.
	failure := func(r Result) error { cancel(); return CheckExit(r) }
	_, n, err := Do(ctx, nil, Retry{Attempts: 3, Backoff: backoff.NewConstantBackOff(time.Hour), Failure: failure}, func(a Attempt) Spec {
		return caller.Spec("execute", 1, a, []string{fakeAgent, "x"}, true)
	})
	var ie *InterruptedError
	if !errors.As(err, &ie) || n != 1 || time.Since(start) > 10*time.Second {
		t.Fatalf("n = %d, err = %v after %s", n, err, time.Since(start))
	}
}

type countingBackOff struct{ resets, calls int }

func (b *countingBackOff) NextBackOff() time.Duration { b.calls++; return 0 }
func (b *countingBackOff) Reset()                     { b.resets++ }

func TestLogArgvHidesPrompt(t *testing.T) {
	t.Parallel()
	got := LogArgv([]string{"agent", "--print", "secret prompt text"}, true)
	if strings.Contains(strings.Join(got, " "), "secret") || got[2] != "<prompt len=18>" {
		t.Fatalf("%q", got)
	}
}

func killIfAlive(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}

func TestPromptTooLongForArgv(t *testing.T) {
	t.Parallel()
	spec := agentSpec(t.TempDir(), time.Second, time.Second)
	spec.Argv = []string{fakeAgent, strings.Repeat("x", 256<<10)}
	_, err := Run(context.Background(), spec)
	var se *StartError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "longer than the system allows") {
		t.Fatalf("err = %v", err)
	}
}
