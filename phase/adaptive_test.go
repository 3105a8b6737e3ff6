package phase

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"peal/internal/fakes"
)

var (
	netFail   = fakes.Outcome{Exit: 1, Stderr: "request failed: read tcp: ECONNRESET"}
	fatalFail = fakes.Outcome{Exit: 1, Stderr: "Error: not logged in. Run `agent login`."}
	plainFail = fakes.Outcome{Exit: 1, Stderr: "compile error"}
	success   = fakes.Outcome{Stdout: "fine"}
)

func adaptiveCall(t *testing.T, p Policy, outcomes ...fakes.Outcome) (string, []fakes.Call, error) {
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

func net(retries int) *NetworkPolicy {
	return &NetworkPolicy{Patterns: []string{"econnreset", "rate limit"}, Retries: retries}
}

func TestNetworkFailuresHaveTheirOwnBudget(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		policy   Policy
		outcomes []fakes.Outcome
		calls    int
		check    func(error) bool
	}{
		{"network retries without a phase retry count", Policy{Attempts: 1, Network: net(2)}, []fakes.Outcome{netFail, netFail, success}, 3,
			func(err error) bool { return err == nil }},
		{"every attempt a network failure: unreachable", Policy{Attempts: 1, Network: net(2)}, []fakes.Outcome{netFail}, 3,
			func(err error) bool { var u *UnreachableError; return errors.As(err, &u) && u.Attempts == 3 }},
		{"network budget does not use the phase budget", Policy{Attempts: 2, Network: net(1)}, []fakes.Outcome{netFail, plainFail, success}, 3,
			func(err error) bool { return err == nil }},
		{"a mix is an ordinary failure", Policy{Attempts: 2, Network: net(1)}, []fakes.Outcome{plainFail, netFail, netFail}, 3,
			func(err error) bool {
				var f *FailedError
				var u *UnreachableError
				return errors.As(err, &f) && !errors.As(err, &u)
			}},
		{"without a network policy it is ordinary", Policy{Attempts: 2}, []fakes.Outcome{netFail}, 2,
			func(err error) bool { var f *FailedError; return errors.As(err, &f) }},
		{"fatal is never retried", Policy{Attempts: 3, Network: net(2), Fatal: []string{"NOT LOGGED IN"}}, []fakes.Outcome{fatalFail, success}, 1,
			func(err error) bool {
				var f *FatalError
				return errors.As(err, &f) && strings.Contains(err.Error(), "not logged in")
			}},
		{"custom patterns", Policy{Attempts: 1, Network: &NetworkPolicy{Patterns: []string{"compile"}, Retries: 1}}, []fakes.Outcome{plainFail, success}, 2,
			func(err error) bool { return err == nil }},
		{"only the stdout tail counts", Policy{Attempts: 1, Network: net(2)},
			[]fakes.Outcome{{Exit: 1, Stdout: "ECONNRESET in a file the agent printed\n" + strings.Repeat("x", 5000)}}, 1,
			func(err error) bool { var f *FailedError; return errors.As(err, &f) }},
		{"the stdout tail is searched", Policy{Attempts: 1, Network: net(1)},
			[]fakes.Outcome{{Exit: 1, Stdout: strings.Repeat("x", 5000) + "\nRate limit exceeded"}, success}, 2,
			func(err error) bool { return err == nil }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, c, err := adaptiveCall(t, tc.policy, tc.outcomes...)
			if len(c) != tc.calls || !tc.check(err) {
				t.Fatalf("%d calls (want %d), err %v", len(c), tc.calls, err)
			}
		})
	}
}

func TestFallbackAlternates(t *testing.T) {
	t.Parallel()
	_, c, err := adaptiveCall(t, Policy{Attempts: 4, Fallback: true}, plainFail, plainFail, plainFail, success)
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
	_, c, _ = adaptiveCall(t, Policy{Attempts: 2}, plainFail, success)
	if c[1].Env["PEAL_AGENT_ROLE"] != "primary" {
		t.Fatalf("without a fallback every attempt is primary: %v", c[1].Env)
	}
}

func TestNetworkDelayHonoured(t *testing.T) {
	t.Parallel()
	p := Policy{Attempts: 1, Network: &NetworkPolicy{Patterns: []string{"econnreset"}, Retries: 1, Backoff: backoff.NewConstantBackOff(time.Second)}}
	_, c, err := adaptiveCall(t, p, netFail, success)
	if err != nil {
		t.Fatal(err)
	}
	if gap := c[1].Time.Sub(c[0].Time); gap < 900*time.Millisecond {
		t.Fatalf("second attempt %s after the first, want the 1 s delay", gap)
	}
}

func TestNetworkDelayCancelled(t *testing.T) {
	t.Parallel()
	dir := setup(t, netFail)
	caller := Caller{Dir: dir, Limits: Limits{Timeout: 10 * time.Second, KillGrace: time.Second}, Env: []string{"FAKE_AGENT_DIR=" + dir}}
	ctx, cancel := context.WithCancel(context.Background())
	p := Policy{Attempts: 1, Network: &NetworkPolicy{Patterns: []string{"econnreset"}, Retries: 3, Backoff: backoff.NewConstantBackOff(time.Hour)},
		Failure: func(r Result) error { cancel(); return CheckExit(r) }}
	start := time.Now()
	_, n, err := Do(ctx, nil, p, func(a Attempt) Spec { return caller.Spec("plan", 1, a, []string{fakeAgent, "x"}, true) })
	var ie *InterruptedError
	if !errors.As(err, &ie) || n != 1 || time.Since(start) > 10*time.Second {
		t.Fatalf("n %d, err %v after %s", n, err, time.Since(start))
	}
}

// TestNetworkErrorFromFailure: a Failure that returns *NetworkError puts the
// attempt in the network class whatever its output says (stet's exit 2).
func TestNetworkErrorFromFailure(t *testing.T) {
	t.Parallel()
	byExit := func(r Result) error {
		if r.ExitCode == 2 {
			return &NetworkError{Err: errors.New("the model is unreachable")}
		}
		return CheckExit(r)
	}
	quiet := fakes.Outcome{Exit: 2, Stderr: "nothing a pattern knows"}
	cases := []struct {
		name     string
		policy   Policy
		outcomes []fakes.Outcome
		calls    int
		check    func(error) bool
	}{
		{"network retries, then success", Policy{Attempts: 1, Failure: byExit, Network: &NetworkPolicy{Retries: 2}}, []fakes.Outcome{quiet, quiet, success}, 3,
			func(err error) bool { return err == nil }},
		{"every attempt: unreachable", Policy{Attempts: 2, Failure: byExit, Network: &NetworkPolicy{Retries: 1}}, []fakes.Outcome{quiet}, 2,
			func(err error) bool {
				var u *UnreachableError
				return errors.As(err, &u) && u.Attempts == 2 && strings.Contains(err.Error(), "the model is unreachable")
			}},
		{"no network policy: unreachable at once", Policy{Attempts: 3, Failure: byExit}, []fakes.Outcome{quiet}, 1,
			func(err error) bool { var u *UnreachableError; return errors.As(err, &u) }},
		{"other exits stay ordinary", Policy{Attempts: 2, Failure: byExit, Network: &NetworkPolicy{Retries: 3}}, []fakes.Outcome{plainFail}, 2,
			func(err error) bool { var f *FailedError; return errors.As(err, &f) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, c, err := adaptiveCall(t, tc.policy, tc.outcomes...)
			if len(c) != tc.calls || !tc.check(err) {
				t.Fatalf("%d calls (want %d), err %v", len(c), tc.calls, err)
			}
		})
	}
}
