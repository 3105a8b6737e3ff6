package phase

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"peal/internal/testkit/fakes"
)

var (
	netFail   = fakes.Outcome{Exit: 1, Stderr: "request failed: read tcp: ECONNRESET"}
	fatalFail = fakes.Outcome{Exit: 1, Stderr: "Error: not logged in. Run `agent login`."}
	plainFail = fakes.Outcome{Exit: 1, Stderr: "compile error"}
	rateFail  = fakes.Outcome{Exit: 1, Stderr: "429 Too Many Requests"}
	raceFail  = fakes.Outcome{Exit: 1, Stderr: "ENOENT: rename cli-config.json.tmp"}
	modelFail = fakes.Outcome{Exit: 1, Stderr: "model: m was not found"}
	success   = fakes.Outcome{Stdout: "fine"}
)

// byText is a classifier for these tests: the class follows from a word of
// stderr; wait is the reset a rate limit announces.
func byText(wait time.Duration) Classifier {
	return func(r Result) Verdict {
		err := CheckExit(r)
		switch {
		case err == nil:
			return Verdict{Class: Succeeded}
		case strings.Contains(r.Stderr, "not logged in"):
			return Verdict{Class: Fatal, Err: err}
		case strings.Contains(r.Stderr, "was not found"):
			return Verdict{Class: Fatal, Err: err, AgentOnly: true}
		case strings.Contains(r.Stderr, "no such session"):
			return Verdict{Class: Ordinary, Err: err, Again: true}
		case strings.Contains(r.Stderr, "ECONNRESET"):
			return Verdict{Class: Network, Err: err}
		case strings.Contains(r.Stderr, "429"):
			return Verdict{Class: RateLimited, Err: err, Wait: wait}
		case strings.Contains(r.Stderr, "cli-config"):
			return Verdict{Class: Transient, Err: err}
		}
		return Verdict{Class: Ordinary, Err: err}
	}
}

func adaptiveCall(t *testing.T, p Retry, outcomes ...fakes.Outcome) (string, []fakes.Call, error) {
	t.Helper()
	dir := setup(t, outcomes...)
	caller := Caller{Dir: dir, Limits: Limits{Timeout: 10 * time.Second, KillGrace: time.Second}, Env: []string{"FAKE_AGENT_DIR=" + dir}}
	_, n, err := Do(context.Background(), nil, p, func(a Attempt) Spec {
		return caller.Spec("execute", 1, a, []string{fakeAgent, "x"}, true)
	})
	c := calls(t, dir)
	if n != len(c) {
		t.Fatalf("Do reports %d attempts, the fake saw %d", n, len(c))
	}
	return dir, c, err
}

func withNet(retries int) map[Class]Budget {
	return map[Class]Budget{Network: {Retries: retries}}
}

func TestClassesHaveTheirOwnBudgets(t *testing.T) {
	t.Parallel()
	rate := func(n int, maxWait time.Duration) map[Class]Budget {
		return map[Class]Budget{RateLimited: {Retries: n, Backoff: backoff.NewConstantBackOff(time.Minute), MaxWait: maxWait}}
	}
	cases := []struct {
		name     string
		policy   Retry
		outcomes []fakes.Outcome
		calls    int
		check    func(error) bool
	}{
		{"network retries without a phase retry count", Retry{Attempts: 1, Budgets: withNet(2)}, []fakes.Outcome{netFail, netFail, success}, 3,
			func(err error) bool { return err == nil }},
		{"every attempt a network failure: unreachable", Retry{Attempts: 1, Budgets: withNet(2)}, []fakes.Outcome{netFail}, 3,
			func(err error) bool { var u *UnreachableError; return errors.As(err, &u) && u.Attempts == 3 }},
		{"network budget does not use the phase budget", Retry{Attempts: 2, Budgets: withNet(1)}, []fakes.Outcome{netFail, plainFail, success}, 3,
			func(err error) bool { return err == nil }},
		{"a mix is an ordinary failure", Retry{Attempts: 2, Budgets: withNet(1)}, []fakes.Outcome{plainFail, netFail, netFail}, 3,
			func(err error) bool {
				var f *FailedError
				var u *UnreachableError
				return errors.As(err, &f) && !errors.As(err, &u)
			}},
		{"a class without a budget is ordinary", Retry{Attempts: 2}, []fakes.Outcome{netFail}, 2,
			func(err error) bool { var f *FailedError; return errors.As(err, &f) }},
		{"fatal is never retried", Retry{Attempts: 3, Budgets: withNet(2)}, []fakes.Outcome{fatalFail, success}, 1,
			func(err error) bool {
				var f *FatalError
				return errors.As(err, &f) && strings.Contains(err.Error(), "not logged in")
			}},
		{"rate limits do not spend the ordinary budget", Retry{Attempts: 1, Budgets: rate(5, 0)}, []fakes.Outcome{rateFail, rateFail, success}, 3,
			func(err error) bool { return err == nil }},
		{"rate limit budget spent", Retry{Attempts: 3, Budgets: rate(1, 0)}, []fakes.Outcome{rateFail}, 2,
			func(err error) bool { var r *RateLimitError; return errors.As(err, &r) && r.Attempts == 2 }},
		{"rate limit waits stop at the cap", Retry{Attempts: 3, Budgets: rate(10, 90*time.Second)}, []fakes.Outcome{rateFail}, 3,
			func(err error) bool {
				var r *RateLimitError
				return errors.As(err, &r) && r.Waited == 90*time.Second && strings.Contains(err.Error(), "rate_limit_max_wait_sec (90 s)")
			}},
		{"no network retry starts past the give-up time", Retry{Attempts: 1, Budgets: map[Class]Budget{
			Network: {Retries: 5, Backoff: backoff.NewConstantBackOff(time.Minute), GiveUp: 150 * time.Second}}}, []fakes.Outcome{netFail}, 3,
			// Waits of 60 s: the third attempt starts at 120 s, a fourth would at 180 s.
			func(err error) bool { var u *UnreachableError; return errors.As(err, &u) && u.Attempts == 3 }},
		{"transient retried without the budget", Retry{Attempts: 1, Budgets: map[Class]Budget{Transient: {Retries: 3}}}, []fakes.Outcome{raceFail, raceFail, success}, 3,
			func(err error) bool { return err == nil }},
		{"transient budget spent", Retry{Attempts: 1, Budgets: map[Class]Budget{Transient: {Retries: 1}}}, []fakes.Outcome{raceFail}, 2,
			func(err error) bool { var f *FailedError; return errors.As(err, &f) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var s fakes.Sleeps
			tc.policy.Classify = byText(0)
			tc.policy.Sleep = s.Sleep
			_, c, err := adaptiveCall(t, tc.policy, tc.outcomes...)
			if len(c) != tc.calls || !tc.check(err) {
				t.Fatalf("%d calls (want %d), err %v", len(c), tc.calls, err)
			}
		})
	}
}

func TestRateLimitWaits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		reset   time.Duration
		maxWait time.Duration
		calls   int
		want    []time.Duration
	}{
		{"backoff when no reset is announced", 0, time.Hour, 3, []time.Duration{time.Minute, time.Minute}},
		// The server's time first; refused again after it, the longer of
		// the backoff and the server's time.
		{"the announced reset", 7 * time.Second, time.Hour, 3, []time.Duration{7 * time.Second, time.Minute}},
		{"an announced reset longer than the backoff", 2 * time.Minute, time.Hour, 3, []time.Duration{2 * time.Minute, 2 * time.Minute}},
		{"the last wait is cut to the cap", 0, 90 * time.Second, 3, []time.Duration{time.Minute, 30 * time.Second}},
		{"a reset beyond the cap fails at once", 2 * time.Hour, time.Hour, 1, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var s fakes.Sleeps
			p := Retry{Attempts: 1, Classify: byText(tc.reset), Sleep: s.Sleep,
				Budgets: map[Class]Budget{RateLimited: {Retries: 10, Backoff: backoff.NewConstantBackOff(time.Minute), MaxWait: tc.maxWait}}}
			outcomes := []fakes.Outcome{rateFail, rateFail, success}
			_, c, err := adaptiveCall(t, p, outcomes...)
			if len(c) != tc.calls || !slicesEqual(s.Waits(), tc.want) {
				t.Fatalf("%d calls (want %d), waits %v (want %v), err %v", len(c), tc.calls, s.Waits(), tc.want, err)
			}
			var r *RateLimitError
			if (tc.calls == 3) != (err == nil) || (err != nil && !errors.As(err, &r)) {
				t.Fatalf("err %v", err)
			}
		})
	}
}

func slicesEqual(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAttemptOfCountsBudgetsLeft(t *testing.T) {
	t.Parallel()
	var s fakes.Sleeps
	p := Retry{Attempts: 2, Budgets: withNet(1), Classify: byText(0), Sleep: s.Sleep}
	_, c, err := adaptiveCall(t, p, netFail, plainFail, success)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, call := range c {
		got = append(got, call.Env["PEAL_ATTEMPT"])
	}
	if strings.Join(got, " ") != "1 2 3" {
		t.Fatalf("attempts %v", got)
	}
}

func TestFallbackAlternates(t *testing.T) {
	t.Parallel()
	_, c, err := adaptiveCall(t, Retry{Attempts: 4, Fallback: true}, plainFail, plainFail, plainFail, success)
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, call := range c {
		roles = append(roles, call.Env["PEAL_AGENT_ROLE"])
	}
	if strings.Join(roles, " ") != "primary fallback primary fallback" {
		t.Fatalf("roles %q", roles)
	}
	_, c, _ = adaptiveCall(t, Retry{Attempts: 2}, plainFail, success)
	if c[1].Env["PEAL_AGENT_ROLE"] != "primary" {
		t.Fatalf("without a fallback every attempt is primary: %v", c[1].Env)
	}
}

// TestAgentOnlyFailureSwitchesAgent: a failure fatal for the agent of its
// attempt alone (its model does not exist) moves the call to the other
// agent, at once and without spending a retry, for the rest of the call;
// with no other agent left it is fatal.
func TestAgentOnlyFailureSwitchesAgent(t *testing.T) {
	t.Parallel()
	fatal := func(err error) bool { var f *FatalError; return errors.As(err, &f) }
	failed := func(err error) bool { var f *FailedError; return errors.As(err, &f) && f.Attempts == 4 }
	cases := []struct {
		name     string
		policy   Retry
		outcomes []fakes.Outcome
		roles    string
		waits    int // ordinary retries: the switch waits for nothing
		check    func(error) bool
	}{
		{"no retry count: the fallback still runs", Retry{Attempts: 1, Fallback: true}, []fakes.Outcome{modelFail, success},
			"primary fallback", 0, func(err error) bool { return err == nil }},
		{"the retries all go to the fallback", Retry{Attempts: 3, Fallback: true}, []fakes.Outcome{modelFail, plainFail},
			"primary fallback fallback fallback", 2, failed},
		{"without a fallback: fatal", Retry{Attempts: 3}, []fakes.Outcome{modelFail}, "primary", 0, fatal},
		{"both agents' models missing: fatal", Retry{Attempts: 3, Fallback: true}, []fakes.Outcome{modelFail},
			"primary fallback", 0, fatal},
		{"an agent skipped from the start", Retry{Attempts: 2, Fallback: true, Skip: func(role Role) bool { return role == RolePrimary }},
			[]fakes.Outcome{plainFail, success}, "fallback fallback", 1, func(err error) bool { return err == nil }},
		{"both skipped: the roles alternate as usual", Retry{Attempts: 2, Fallback: true, Skip: func(Role) bool { return true }},
			[]fakes.Outcome{plainFail, success}, "primary fallback", 1, func(err error) bool { return err == nil }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var s fakes.Sleeps
			tc.policy.Classify, tc.policy.Sleep = byText(0), s.Sleep
			_, c, err := adaptiveCall(t, tc.policy, tc.outcomes...)
			var roles []string
			for _, call := range c {
				roles = append(roles, call.Env["PEAL_AGENT_ROLE"])
			}
			if strings.Join(roles, " ") != tc.roles || !tc.check(err) {
				t.Fatalf("roles %q, err %v", roles, err)
			}
			if len(s.Waits()) != tc.waits {
				t.Fatalf("waits %v, want %d", s.Waits(), tc.waits)
			}
		})
	}
}

// TestAgainChangesTheRequestAtOnce: an attempt whose failure the next one
// avoids by changing its request (a conversation that could not be
// resumed) is followed at once by the same agent, without spending a retry
// and without a wait; once per agent and call, a second counts by its
// class.
func TestAgainChangesTheRequestAtOnce(t *testing.T) {
	t.Parallel()
	lost := fakes.Outcome{Exit: 1, Stderr: "no such session"}
	failed := func(n int) func(error) bool {
		return func(err error) bool { var f *FailedError; return errors.As(err, &f) && f.Attempts == n }
	}
	ok := func(err error) bool { return err == nil }
	cases := []struct {
		name     string
		policy   Retry
		outcomes []fakes.Outcome
		roles    string
		counted  string // PEAL_ATTEMPT is the attempt's number; the counted one is in the log line
		waits    int
		check    func(error) bool
	}{
		{"no retry count: the changed request still runs", Retry{Attempts: 1}, []fakes.Outcome{lost, success},
			"primary primary", "1 2", 0, ok},
		{"a second is judged by its class", Retry{Attempts: 1}, []fakes.Outcome{lost, lost},
			"primary primary", "1 2", 0, failed(2)},
		{"with a fallback the same agent goes again", Retry{Attempts: 2, Fallback: true}, []fakes.Outcome{lost, plainFail, success},
			"primary primary fallback", "1 2 3", 1, ok},
		{"each agent is granted once", Retry{Attempts: 2, Fallback: true}, []fakes.Outcome{lost, plainFail, lost, success},
			"primary primary fallback fallback", "1 2 3 4", 1, ok},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var s fakes.Sleeps
			tc.policy.Classify, tc.policy.Sleep = byText(0), s.Sleep
			_, c, err := adaptiveCall(t, tc.policy, tc.outcomes...)
			var roles, attempts []string
			for _, call := range c {
				roles = append(roles, call.Env["PEAL_AGENT_ROLE"])
				attempts = append(attempts, call.Env["PEAL_ATTEMPT"])
			}
			if strings.Join(roles, " ") != tc.roles || strings.Join(attempts, " ") != tc.counted || !tc.check(err) {
				t.Fatalf("roles %q, attempts %q, err %v", roles, attempts, err)
			}
			if len(s.Waits()) != tc.waits {
				t.Fatalf("waits %v, want %d", s.Waits(), tc.waits)
			}
		})
	}
}

func TestNetworkDelayHonoured(t *testing.T) {
	t.Parallel()
	var s fakes.Sleeps
	p := Retry{Attempts: 1, Classify: byText(0), Sleep: s.Sleep,
		Budgets: map[Class]Budget{Network: {Retries: 1, Backoff: backoff.NewConstantBackOff(time.Second)}}}
	_, _, err := adaptiveCall(t, p, netFail, success)
	if err != nil || !slicesEqual(s.Waits(), []time.Duration{time.Second}) {
		t.Fatalf("waits %v, err %v", s.Waits(), err)
	}
}

func TestNetworkDelayCancelled(t *testing.T) {
	t.Parallel()
	dir := setup(t, netFail)
	caller := Caller{Dir: dir, Limits: Limits{Timeout: 10 * time.Second, KillGrace: time.Second}, Env: []string{"FAKE_AGENT_DIR=" + dir}}
	ctx, cancel := context.WithCancel(context.Background())
	classify := byText(0)
	p := Retry{Attempts: 1, Budgets: map[Class]Budget{Network: {Retries: 3, Backoff: backoff.NewConstantBackOff(time.Hour)}},
		Classify: func(r Result) Verdict { cancel(); return classify(r) }}
	start := time.Now()
	_, n, err := Do(ctx, nil, p, func(a Attempt) Spec { return caller.Spec("plan", 1, a, []string{fakeAgent, "x"}, true) })
	var ie *InterruptedError
	if !errors.As(err, &ie) || n != 1 || time.Since(start) > 10*time.Second {
		t.Fatalf("n %d, err %v after %s", n, err, time.Since(start))
	}
}

func TestMessagesQuoteTheExplainingLine(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		res  Result
		want string
	}{
		{"stderr's last meaningful line", Result{Phase: "plan", ExitCode: 1, Stderr: "\x1b[91m\x1b[1mError: \x1b[0mCannot connect to API\n\n", Stdout: "x"},
			"plan call exited with status 1: Error: Cannot connect to API"},
		{"never an object dump", Result{Phase: "plan", ExitCode: 1, Stderr: "exception TypeError: fetch failed sending request\nAn unexpected critical error occurred:[object Object]\n"},
			"plan call exited with status 1: exception TypeError: fetch failed sending request"},
		{"stdout when stderr is silent", Result{Phase: "execute", ExitCode: 1, Stdout: "Not logged in · Please run /login\n"},
			"execute call exited with status 1: Not logged in · Please run /login"},
		{"nothing printed", Result{Phase: "execute", ExitCode: 2}, "execute call exited with status 2 and printed nothing"},
		{"capped", Result{Phase: "plan", ExitCode: 1, Stderr: strings.Repeat("y", 1000)}, "plan call exited with status 1: " + strings.Repeat("y", 300) + "…"},
	}
	for _, tc := range cases {
		if got := CheckExit(tc.res).Error(); got != tc.want {
			t.Errorf("%s: %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

// attemptsOf runs a call under p and returns the Attempt each build got.
func attemptsOf(t *testing.T, p Retry, log *slog.Logger, outcomes ...fakes.Outcome) ([]Attempt, error) {
	t.Helper()
	dir := setup(t, outcomes...)
	caller := Caller{Dir: dir, Limits: Limits{Timeout: 10 * time.Second, KillGrace: time.Second}, Env: []string{"FAKE_AGENT_DIR=" + dir}}
	var got []Attempt
	_, _, err := Do(context.Background(), log, p, func(a Attempt) Spec {
		got = append(got, a)
		return caller.Spec("plan", 1, a, []string{fakeAgent, "x"}, true)
	})
	return got, err
}

// TestWaitsAreNotAttempts: an attempt after a wait on a rate limit (or at
// once after a hiccup of the CLI) keeps the number of the one before it,
// so the counter never passes the attempts the retry count allows; the log
// says that the wait is not counted.
func TestWaitsAreNotAttempts(t *testing.T) {
	t.Parallel()
	var s fakes.Sleeps
	var log strings.Builder
	p := Retry{Attempts: 2, Classify: byText(0), Sleep: s.Sleep, Budgets: map[Class]Budget{
		RateLimited: {Retries: 10, Backoff: backoff.NewConstantBackOff(time.Minute), MaxWait: time.Hour},
		Transient:   {Retries: 3}}}
	got, err := attemptsOf(t, p, slog.New(slog.NewTextHandler(&log, nil)), rateFail, rateFail, plainFail, raceFail, success)
	if err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, a := range got {
		shown = append(shown, a.String())
	}
	want := []string{"attempt 1 of 2", "attempt 1 of 2 (+1 not counted)", "attempt 1 of 2 (+2 not counted)",
		"attempt 2 of 2 (+2 not counted)", "attempt 2 of 2 (+3 not counted)"}
	if !slices.Equal(shown, want) {
		t.Fatalf("attempts %q\nwant %q", shown, want)
	}
	if n := strings.Count(log.String(), "waiting 60 s before the next attempt (rate limited, not counted)"); n != 2 {
		t.Fatalf("%d waits logged as not counted:\n%s", n, log.String())
	}
	if !strings.Contains(log.String(), "retrying at once (a hiccup of the CLI, not counted)") {
		t.Fatalf("the hiccup's retry is not said to be uncounted:\n%s", log.String())
	}
	if strings.Contains(log.String(), "attempt 3 of 2") {
		t.Fatalf("an attempt past the count:\n%s", log.String())
	}
}

// TestRateLimitWaitedInsideAttempt: the time an attempt spent on the CLI's
// own retries of a rate limit (Verdict.Waited) counts against the cap like
// a wait between attempts, and each attempt is told what is left of it.
func TestRateLimitWaitedInsideAttempt(t *testing.T) {
	t.Parallel()
	var s fakes.Sleeps
	inner := byText(0)
	p := Retry{Attempts: 1, Sleep: s.Sleep,
		Classify: func(r Result) Verdict {
			v := inner(r)
			if v.Class == RateLimited {
				v.Waited = 50 * time.Second
			}
			return v
		},
		Budgets: map[Class]Budget{RateLimited: {Retries: 10, Backoff: backoff.NewConstantBackOff(time.Minute), MaxWait: 2 * time.Minute}}}
	got, err := attemptsOf(t, p, nil, rateFail)
	var r *RateLimitError
	// 50 s in the first attempt, a wait of 60 s, 50 s in the second: 160 s
	// is past the cap of 120 s, so no third attempt.
	if !errors.As(err, &r) || len(got) != 2 || !slicesEqual(s.Waits(), []time.Duration{time.Minute}) || r.Waited != 160*time.Second {
		t.Fatalf("%d attempts, waits %v, err %v", len(got), s.Waits(), err)
	}
	if got[0].RateLimitCap != 2*time.Minute || got[0].RateLimitWaited != 0 || got[1].RateLimitWaited != 110*time.Second {
		t.Fatalf("attempts told %v/%v and %v/%v", got[0].RateLimitWaited, got[0].RateLimitCap, got[1].RateLimitWaited, got[1].RateLimitCap)
	}
}
