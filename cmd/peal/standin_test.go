package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// standIn writes an executable shell script into the sandbox: the kind of
// stand-in agent (or stet) Peal users test their plans with.
func (s *sandbox) standIn(name, body string) string {
	s.t.Helper()
	p := filepath.Join(s.dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		s.t.Fatal(err)
	}
	return p
}

// summary reads the run summary, nil when there is none.
func (s *sandbox) summary() map[string]any {
	s.t.Helper()
	data, err := os.ReadFile(filepath.Join(s.stateDir, "run_summary.json"))
	if os.IsNotExist(err) {
		return nil
	}
	var sum map[string]any
	if err != nil || json.Unmarshal(data, &sum) != nil {
		s.t.Fatalf("run summary: %v %s", err, data)
	}
	return sum
}

// TestStandInAgents: agents that are not the Cursor CLI but stand in for it
// (echo, false, a script that prints a plan), run without CURSOR_API_KEY, as
// Peal's own tests ran them. Their `status` answer says neither yes nor no,
// so the run goes on (with a warning) and their calls decide.
func TestStandInAgents(t *testing.T) {
	t.Parallel()
	echo, err := exec.LookPath("echo")
	if err != nil {
		t.Skip("no echo on PATH")
	}
	cases := []struct {
		name  string
		plan  string
		agent func(s *sandbox) string
		args  []string
		code  int
		// calls is the PEAL_PHASE of each call of a script agent, in order
		// ("-" for a call with none: the status check).
		calls     string
		completed []int
		summary   bool
	}{
		{"echo answers every call", "## Task 1\nDo something", func(*sandbox) string { return echo },
			nil, 0, "", []int{1}, true},
		{"echo with --task 2", "## Task 1\nFirst\n\n## Task 2\nSecond\n\n## Task 3\nThird\n", func(*sandbox) string { return echo },
			[]string{"--task", "2"}, 0, "", []int{2}, true},
		{"echo with --from-task 2", "## Task 1\nFirst\n\n## Task 2\nSecond\n\n## Task 3\nThird\n", func(*sandbox) string { return echo },
			[]string{"--from-task", "2"}, 0, "", []int{2, 3}, true},
		{"false fails the first task", "## Task 1\nWill fail.\n## Task 2\nNever reached.\n", func(*sandbox) string { return "false" },
			nil, 1, "", []int{}, false},
		{"a script normalizes on its second try", "PRD. No task headings.", func(s *sandbox) string {
			// It keeps its record where a confined call may write.
			return s.standIn("stub.sh", `cd "$FAKE_AGENT_DIR"
echo "${PEAL_PHASE:--}" >> calls
c=$(grep -c normalize calls)
if [ "$PEAL_PHASE" = normalize ] && [ "$c" -eq 1 ]; then echo garbage; exit 0; fi
printf '%s\n' '## Task 1' 'Do it.'
`)
		}, []string{"--normalize", "--normalize-retry-count", "1"}, 0, "- normalize normalize plan execute", []int{1}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t, tc.plan)
			env := slices.DeleteFunc(s.env("PEAL_AGENT_CMD="+tc.agent(s)),
				func(kv string) bool { return strings.HasPrefix(kv, "CURSOR_API_KEY=") })
			r := s.peal(env, append([]string{"run"}, tc.args...)...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", r.code, tc.code, r.stderr)
			}
			if !strings.Contains(r.stderr, "cannot tell whether the agent can authenticate") {
				t.Errorf("no warning about the status check:\n%s", r.stderr)
			}
			if got := s.completed(); !slices.Equal(got, tc.completed) && !(len(got) == 0 && len(tc.completed) == 0) {
				t.Errorf("completed %v, want %v", got, tc.completed)
			}
			if tc.calls != "" {
				data, _ := os.ReadFile(filepath.Join(s.agentDir, "calls"))
				if got := strings.Join(strings.Fields(string(data)), " "); got != tc.calls {
					t.Errorf("calls %q, want %q", got, tc.calls)
				}
			}
			sum := s.summary()
			if (sum != nil) != tc.summary {
				t.Fatalf("run summary written: %v, want %v", sum != nil, tc.summary)
			}
			if sum != nil && sum["exit_code"] != float64(tc.code) {
				t.Errorf("summary exit_code %v", sum["exit_code"])
			}
		})
	}
}
