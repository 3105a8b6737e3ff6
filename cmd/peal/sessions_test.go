package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"peal/internal/testkit/fakes"
)

// TestSessionContinuesAfterKill: a run killed (SIGKILL: nothing of peal's
// runs after it) while the task's address call works leaves the session
// its plan began in the state folder; the next run's calls of the task
// continue it, with the conversation so far.
func TestSessionContinuesAfterKill(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"claude", "codex"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t, "## Task 1\nA\n")
			ready := filepath.Join(s.agentDir, "ready") // where a confined call may write
			if err := syscall.Mkfifo(ready, 0o644); err != nil {
				t.Fatal(err)
			}
			fix := fakes.Outcome{WhenPrompt: &fakes.PromptWrites{Contains: "--- FAIL: TestStatus", WriteFiles: map[string]string{"status.txt": "fixed\n"}}}
			s.scenario(map[string][]fakes.Outcome{
				"execute": {{WriteFiles: map[string]string{"status.txt": "broken\n"}}},
				"address": {{WriteFiles: map[string]string{ready: "x"}, Hang: true}, fix},
			})
			env := s.env("PEAL_AGENT_KIND="+kind, "PEAL_AGENT_CMD="+cli(t, s.dir, kind), "OPENAI_API_KEY=sk-test",
				"PEAL_AGENT_SESSION=task", "PEAL_CHECK_COMMANDS="+reportCheck)
			cmd := exec.Command(bins["peal"], "run")
			cmd.Dir, cmd.Env = s.dir, env
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.ReadFile(ready); err != nil { // blocks until the address call runs
				t.Fatal(err)
			}
			cmd.Process.Kill()
			cmd.Wait()
			calls, _ := fakes.ReadCalls(s.agentDir)
			starts := fakes.Starts(calls)
			starts[len(starts)-1].ID().Kill() // the orphaned agent
			ends := fakes.Ends(calls)
			if len(ends) != 2 || ends[0].Phase != "plan" || ends[1].Session != ends[0].Session {
				t.Fatalf("the killed run's calls %v", fakes.Keys(calls))
			}
			id := ends[0].Session

			if r := s.peal(env, "run"); r.code != 0 {
				t.Fatalf("the second run: exit %d\n%s", r.code, r.stderr)
			}
			calls, _ = fakes.ReadCalls(s.agentDir)
			ends = fakes.Ends(calls)[2:]
			var got []string
			for _, c := range ends {
				if c.Session != id || !c.Resumed {
					t.Fatalf("%s call %+v does not continue the session %s", c.Phase, c, id)
				}
				got = append(got, c.Phase)
			}
			if !slices.Equal(got, []string{"plan", "execute", "address"}) {
				t.Fatalf("the second run's calls %q", got)
			}
			// The killed address call is part of the conversation.
			if want := []string{"plan", "execute", "address"}; !slices.Equal(ends[0].History, want) {
				t.Fatalf("the second run's plan call holds %q, want %q", ends[0].History, want)
			}
		})
	}
}
