package runner

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"peal/internal/testkit/fakes"
	"peal/phase"
	"peal/state"
)

// TestRecordKeepsThePrevious: a run moves the last run's record aside and
// starts its own, which ends with the run's exit code; the previous one is
// kept whole.
func TestRecordKeepsThePrevious(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n## Task 2\nB\n")
	if _, err := h.runCfg(h.config(), noStet); err != nil {
		t.Fatal(err)
	}
	first, _, err := state.ReadRecord(filepath.Join(h.stateDir, state.RecordName))
	if err != nil {
		t.Fatal(err)
	}
	// Task 2 again: a run of one task, after the first.
	os.WriteFile(filepath.Join(h.stateDir, "state.json"), []byte(`{"plan_path":"`+h.plan+`","repo_path":"`+h.repo+`","completed_task_indices":[1]}`), 0o644)
	if _, err := h.runCfg(h.config(), noStet); err != nil {
		t.Fatal(err)
	}
	prev, _, err := state.ReadRecord(filepath.Join(h.stateDir, state.RecordPrevName))
	if err != nil || len(prev) != len(first) {
		t.Fatalf("previous record: %v, %d lines, want the first run's %d", err, len(prev), len(first))
	}
	second, _, err := state.ReadRecord(filepath.Join(h.stateDir, state.RecordName))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	started := -1
	for _, ev := range second {
		if ev.Ev == state.EvTaskStart {
			started = *ev.Task
		}
		if ev.Ev != state.EvCallStart && ev.Ev != state.EvCallEnd && ev.Ev != state.EvAttempt {
			kinds = append(kinds, ev.Ev)
		}
	}
	want := []string{state.EvRunStart, state.EvTasks, state.EvTaskStart, state.EvTaskEnd, state.EvRunEnd}
	if !slices.Equal(kinds, want) {
		t.Fatalf("second record %v, want %v", kinds, want)
	}
	if end := second[len(second)-1]; end.ExitCode == nil || *end.ExitCode != ExitOK || started != 2 {
		t.Fatalf("second record ends %+v, task %d started", end, started)
	}
}

// TestRecordFailureIsAWarning: a record that cannot be started changes
// nothing but a warning.
func TestRecordFailureIsAWarning(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	// A folder where the previous record goes: the last one cannot be moved.
	os.MkdirAll(filepath.Join(h.stateDir, state.RecordPrevName, "x"), 0o755)
	os.WriteFile(filepath.Join(h.stateDir, state.RecordName), []byte("{}\n"), 0o644)
	out, err := h.runCfg(h.config(), noStet)
	if err != nil || out.ExitCode != ExitOK || !slices.Equal(h.state().CompletedTaskIndices, []int{1}) {
		t.Fatalf("err %v, outcome %+v", err, out)
	}
	if !strings.Contains(h.log.String(), "could not start the run record") {
		t.Fatalf("no warning:\n%s", h.log)
	}
}

// onCallStart is an Observer that calls fn when a call starts.
type onCallStart struct{ fn func(phase.CallInfo) }

func (o *onCallStart) PlanLoaded(int)                         {}
func (o *onCallStart) CallStarted(info phase.CallInfo) func() { o.fn(info); return nil }

// TestRecordNamesTheRunBeforeNormalizing: while the plan is normalized, the
// record already holds the run's first line with its process id, so that a
// reader tells this live run from a killed one; the tasks the run selected
// follow once the plan is known.
func TestRecordNamesTheRunBeforeNormalizing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "# Ideas\nWe should add A and then B.\n")
	h.scenario(map[string][]fakes.Outcome{"normalize": {{Stdout: "## Task 1\nAdd A\n## Task 2\nAdd B\n"}}})
	var during []state.Event
	obs := &onCallStart{fn: func(info phase.CallInfo) {
		if info.Phase == "normalize" {
			during, _, _ = state.ReadRecord(filepath.Join(h.stateDir, state.RecordName))
			// Git's own bookkeeping (where the repository's git data is)
			// comes first; it is no call of the plan's.
			during = slices.DeleteFunc(during, func(e state.Event) bool {
				return e.Phase == "git" || e.Ev == state.EvCallEnd
			})
		}
	}}
	if _, err := Run(context.Background(), h.config("PEAL_NORMALIZE_PLAN=true"), slog.New(slog.DiscardHandler), h.opts(WithObserver(obs), noStet)...); err != nil {
		t.Fatal(err)
	}
	if len(during) != 2 || during[0].Ev != state.EvRunStart || during[0].PID != os.Getpid() || during[0].PlanPath != h.plan ||
		during[1].Ev != state.EvCallStart || during[1].Phase != "normalize" {
		t.Fatalf("record while normalizing %+v", during)
	}
	all, _, err := state.ReadRecord(filepath.Join(h.stateDir, state.RecordName))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(all, func(ev state.Event) bool { return ev.Ev == state.EvTasks })
	if i < 0 || !slices.Equal(all[i].Tasks, []int{1, 2}) || all[i-1].Ev != state.EvAttempt {
		t.Fatalf("record %+v", all)
	}
	// Between the tasks and the first task's start, only peal's own git
	// ran (the run's worktree, under confinement).
	gitCalls := map[string]bool{}
	for _, ev := range all[i+1:] {
		switch {
		case ev.Ev == state.EvCallStart && ev.Phase == "git":
			gitCalls[ev.Call] = true
			continue
		case ev.Ev == state.EvCallEnd && gitCalls[ev.Call]:
			continue
		case ev.Ev != state.EvTaskStart:
			t.Fatalf("before the first task started: %+v", ev)
		}
		break
	}
}

// noStet finds no stet on PATH, whatever the machine has installed: the
// run reviews nothing.
func noStet(s *settings) { s.lookPath = func(string) (string, error) { return "", exec.ErrNotFound } }
