package runner

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"peal/internal/testkit/fakes"
	"peal/tickets"
)

// TestTicketWithAStateFolderOfItsOwn: in ticket mode, a loop may give each
// attempt of the ticket a state folder of its own. The run with a new
// folder is never refused: it is the ticket's next attempt, a note names
// the folder of the previous run, and the attempts go on in the store that
// holds them (the previous folder's, outside a ticketflow project; the
// project's own in one), where ticketflow's own code reads them.
func TestTicketWithAStateFolderOfItsOwn(t *testing.T) {
	t.Parallel()
	for _, tf := range []bool{false, true} {
		name := "state folders' stores"
		if tf {
			name = "ticketflow project"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "## Task 1\nA\n")
			if tf {
				os.MkdirAll(filepath.Join(h.repo, ".tf"), 0o755)
			}
			h.scenario(map[string][]fakes.Outcome{"execute": {fail, ok}})
			first, second := filepath.Join(h.tmp, "attempt1"), filepath.Join(h.tmp, "attempt2")
			if _, err := h.run("PEAL_TICKET_ID=pt-loop", "PEAL_STATE_DIR="+first); err == nil {
				t.Fatal("the first attempt did not fail")
			}
			cfg := h.config("PEAL_TICKET_ID=pt-loop", "PEAL_STATE_DIR="+second)
			note := "ticket pt-loop: this run is its next attempt, with state folder " + second + " (set by PEAL_STATE_DIR); the previous run of plan " + h.plan + " kept its state in " + first
			if !slices.Contains(cfg.Notes, note) {
				t.Fatalf("notes %q, want %q", cfg.Notes, note)
			}
			store := filepath.Join(first, "knowledge")
			if tf {
				store = filepath.Join(h.repo, ".tf", "knowledge")
			}
			if cfg.KnowledgeDir != store {
				t.Fatalf("store %s, want %s", cfg.KnowledgeDir, store)
			}
			out, err := h.runCfg(cfg)
			if err != nil || out.ExitCode != ExitOK || h.keys() != "plan:1 execute:1 plan:1 execute:1" {
				t.Fatalf("second attempt: %v, %+v, calls %q", err, out, h.keys())
			}
			st, err := tickets.Load(store, "pt-loop")
			if err != nil || len(st.Attempts) != 2 || st.Attempts[0].Status != tickets.AttemptError || st.Attempts[1].Status != tickets.AttemptClosed {
				t.Fatalf("the ticket's attempts: %+v, %v", st, err)
			}
			if got := ticketflowAttempts(t, filepath.Join(store, "tickets", "pt-loop")); got != nil && !slices.Equal(got, []string{"1 error", "2 closed"}) {
				t.Fatalf("ticketflow reads %q", got)
			}
		})
	}
}

// ticketflowAttempts are the attempts ticketflow's own code reads in a
// ticket's folder ("N status"), when PEAL_TICKETFLOW_SRC names a checkout
// of it; nil without one.
func ticketflowAttempts(t *testing.T, dir string) []string {
	t.Helper()
	src := os.Getenv("PEAL_TICKETFLOW_SRC")
	if _, err := exec.LookPath("python3"); src == "" || err != nil {
		return nil
	}
	cmd := exec.Command("python3", "-c", `import json, sys
import tf.retry_state as rs
s = rs.RetryState.load(sys.argv[1])
print(json.dumps(["%d %s" % (a["attemptNumber"], a["status"]) for a in s.to_dict()["attempts"]]))`, dir)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+src)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ticketflow: %v", err)
	}
	var got []string
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(out))), &got); err != nil {
		t.Fatalf("ticketflow printed %q", out)
	}
	return got
}
