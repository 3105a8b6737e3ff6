package runner

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"peal/internal/testkit/fakes"
	"peal/phase"
)

// noteTaker is an Observer that writes down what it hears.
type noteTaker struct {
	mu     sync.Mutex
	events []string
}

func (r *noteTaker) add(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *noteTaker) PlanLoaded(n int) { r.add(fmt.Sprintf("plan of %d", n)) }

func (r *noteTaker) CallStarted(c phase.CallInfo) func() {
	what := fmt.Sprintf("%s:%d %d/%d %s", c.Phase, c.Task, c.Attempt.N, c.Attempt.Of, c.Attempt.Role)
	if c.Started.IsZero() {
		what += " without a start time"
	}
	r.add("start " + what)
	return func() { r.add("end " + what) }
}

// TestObserverHearsEveryAttempt: the observer learns the plan's size before
// any call (the whole plan, not the --task selection), then the start and
// end of every attempt with its phase, task, attempt and agent role; calls
// that are no agent calls (git) have no role.
func TestObserverHearsEveryAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, threeTasks)
	h.scenario(map[string][]fakes.Outcome{"execute:2": {fail, ok}})
	// Unconfined: a confined run's own worktree adds git calls of its own.
	cfg := h.config("PEAL_PHASE_RETRY_COUNT=1", "PEAL_NETWORK_RETRY_COUNT=0", "PEAL_FALLBACK_AGENT_CMD="+fakeAgent,
		"PEAL_COMMIT_AFTER_PHASE2=true", "PEAL_CONFINE=off")
	two := uint32(2)
	cfg.Task = &two
	var rec noteTaker
	if _, err := Run(context.Background(), cfg, slog.New(slog.DiscardHandler), h.opts(WithObserver(&rec))...); err != nil {
		t.Fatal(err)
	}
	git := func(n int) []string {
		var out []string
		for range n {
			out = append(out, "start git:-1 1/1 ", "end git:-1 1/1 ")
		}
		return out
	}
	want := []string{"plan of 3"}
	// The worktrees git knows of (one an earlier run left is swept), where
	// the repository's git data is, the identity peal's commits are made
	// as, the repositories the user keeps in the work tree, then the work
	// tree noted before the task: HEAD's branch, the refs, HEAD, what git
	// ignores, the repositories it holds (never staged), its files staged
	// and written as a tree.
	want = append(append(want, git(4)...), git(7)...)
	want = append(want,
		"start plan:2 1/2 primary", "end plan:2 1/2 primary",
		"start execute:2 1/2 primary", "end execute:2 1/2 primary",
		"start execute:2 2/2 fallback", "end execute:2 2/2 fallback")
	// A repository a call made in the tree?, the commit, then the work
	// tree compared with the note.
	want = append(append(want, git(3)...), git(5)...)
	if !slices.Equal(rec.events, want) {
		t.Fatalf("observer heard\n%s\nwant\n%s", strings.Join(rec.events, "\n"), strings.Join(want, "\n"))
	}
}
