package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"peal/check"
	"peal/internal/procs"
	"peal/internal/safefs"
	"peal/report"
	"peal/state"
)

// StatusCmd is `peal status`: where the plan of this configuration stands.
type StatusCmd struct {
	configFlags
	taskFlags
	JSON bool `name:"json" help:"Print {\"tasks\": [...], \"last_run\": {...}} instead of a table."`
}

// Run prints every task's status, ticket and attempts, and the last run. It
// reads the plan, the state and the store; it needs no agent CLI.
func (c *StatusCmd) Run(e *env) error {
	cfg, err := c.load(e)
	if err == nil {
		cfg.Task, cfg.FromTask, cfg.ReadOnly = c.Task, c.FromTask, true
		err = cfg.ValidateWithoutAgent()
	}
	if err != nil {
		return failf("%v", err)
	}
	view, warnings, err := report.Status(cfg)
	if err != nil {
		return failf("%v", err)
	}
	for _, n := range cfg.Notes {
		fmt.Fprintf(e.stderr, "peal: note: %s\n", n)
	}
	for _, w := range append(cfg.Warnings, warnings...) {
		fmt.Fprintf(e.stderr, "peal: warning: %s\n", w)
	}
	if c.JSON {
		return printJSON(e.stdout, view)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	withUsage := view.LastRun != nil && view.LastRun.Usage != nil
	header := "task\tstatus\tticket\tattempts\tretry count\tlast attempt"
	if withUsage {
		header += "\tlast run tokens in/out\tcost"
	}
	fmt.Fprintln(tw, header)
	for _, t := range view.Tasks {
		last := t.LastAttemptStatus
		if last == "" {
			last = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s", t.Index, t.Status, t.Ticket, t.Attempts, t.RetryCount, last)
		if withUsage {
			u := state.Usage{}
			if t.Usage != nil {
				u = *t.Usage
			}
			fmt.Fprintf(tw, "\t%d/%d\t$%.4f", u.InputTokens, u.OutputTokens, u.CostUSD)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if view.Changes != "" {
		fmt.Fprintln(e.stdout, "\n"+view.Changes)
	}
	printWorktrees(e, view)
	printKept(e, view.Kept)
	printBetweenRuns(e, view)
	fmt.Fprintln(e.stdout)
	last := "last run"
	switch rec := lastRecordedRun(cfg.StateDir, cfg.PlanPath, cfg.RepoPath); {
	case rec.running:
		fmt.Fprintf(e.stdout, "now: a run is going on (pid %d, started at %s): `peal report` tells it so far\n", rec.start.PID, stamp(rec.start.Time))
		last = "run before it"
	case rec.start != nil && rec.end == nil:
		fmt.Fprintf(e.stdout, "last run: started at %s, stopped without ending (killed, or the machine stopped) after %s; its completed tasks are saved, and `peal report` names the calls it cut off\n",
			stamp(rec.start.Time), stamp(rec.last))
		return nil
	case rec.end != nil && rec.end.ExitCode != nil && *rec.end.ExitCode != 0 && *rec.end.ExitCode != 2:
		// A run that failed hard writes no summary: its record says why.
		fmt.Fprintf(e.stdout, "last run: exit %d at %s: %s\n", *rec.end.ExitCode, stamp(rec.end.Time), oneLine(rec.end.Message))
		return nil
	}
	if s := view.LastRun; s != nil {
		fmt.Fprintf(e.stdout, "%s: exit %d at %s: %s\n", last, s.ExitCode, s.CompletedAt, lastRunText(s))
		if u := s.Usage; u != nil {
			fmt.Fprintf(e.stdout, "%s usage: %d input tokens, %d output tokens, $%.4f\n", last, u.InputTokens, u.OutputTokens, u.CostUSD)
		}
	} else if last == "last run" {
		fmt.Fprintln(e.stdout, "last run: none recorded of this plan in this state folder")
	}
	return nil
}

// lastRecorded is what the run record of a state folder says of its run.
type lastRecorded struct {
	start, end *state.Event
	last       time.Time // of its last line
	running    bool      // no end, and its process is alive
}

// lastRecordedRun reads the run record of the state folder dir, when it is of a
// run of the plan and repository.
func lastRecordedRun(dir, plan, repo string) lastRecorded {
	events, _, err := state.ReadRecord(filepath.Join(dir, state.RecordName))
	if err != nil || len(events) == 0 || events[0].Ev != state.EvRunStart ||
		!safefs.Same(events[0].PlanPath, plan) || !safefs.Same(events[0].RepoPath, repo) {
		return lastRecorded{}
	}
	rec := lastRecorded{start: &events[0], last: events[len(events)-1].Time}
	for i := range events {
		if events[i].Ev == state.EvRunEnd {
			rec.end = &events[i]
		}
	}
	rec.running = rec.end == nil && rec.start.PID > 0 && procs.Alive(rec.start.PID)
	return rec
}

// stamp is a time as status shows it.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// printWorktrees says what the worktrees of parallel blocks hold, where
// the tasks of parallel blocks work, or worked in the last run, and what
// became of their work.
func printWorktrees(e *env, view state.StatusReport) {
	first := true
	heading := func() {
		if first {
			fmt.Fprintln(e.stdout, "\nworktrees:")
			first = false
		}
	}
	if len(view.SparsePaths) > 0 {
		heading()
		fmt.Fprintf(e.stdout, "  each checks out only %s, and the top-level files (worktree_sparse_paths)\n", strings.Join(view.SparsePaths, ", "))
	}
	if len(view.Links) > 0 {
		heading()
		fmt.Fprintf(e.stdout, "  each links %s to the work tree's (worktree_link)\n", strings.Join(view.Links, ", "))
	}
	for _, t := range view.Tasks {
		w := t.Worktree
		if w == nil {
			continue
		}
		heading()
		switch {
		case w.Now:
			what := ""
			if len(w.Sparse) > 0 {
				what = ", checking out only " + strings.Join(w.Sparse, ", ")
			}
			fmt.Fprintf(e.stdout, "  task %d: in %s on branch %s now%s (a running run's, or left by one that died: the next run removes it)\n", t.Index, w.Path, w.Branch, what)
		case w.Merged:
			fmt.Fprintf(e.stdout, "  task %d: merged into the work tree from branch %s (last run)\n", t.Index, w.Branch)
		case len(w.Files) > 0:
			fmt.Fprintf(e.stdout, "  task %d: its merge conflicted in %s; its work is kept on branch %s (last run)\n", t.Index, strings.Join(w.Files, ", "), w.Branch)
		case len(w.Checks) > 0:
			fmt.Fprintf(e.stdout, "  task %d: once merged, the work tree failed the checks %s; the merge was undone and its work is kept on branch %s (last run)\n",
				t.Index, check.Quoted(w.Checks), w.Branch)
		case w.Detail != "":
			fmt.Fprintf(e.stdout, "  task %d: its merge failed (%s); its work is kept on branch %s (last run)\n", t.Index, w.Detail, w.Branch)
		case w.Branch != "":
			fmt.Fprintf(e.stdout, "  task %d: not merged; its work is kept on branch %s (last run)\n", t.Index, w.Branch)
		default:
			fmt.Fprintf(e.stdout, "  task %d: ran in a worktree and did not complete (last run)\n", t.Index)
		}
	}
}

// printKept lists what peal keeps for the user in the repository, each
// with the commands that look at it and take it back: a file kept, one
// line of its own.
func printKept(e *env, kept []state.Kept) {
	if len(kept) == 0 {
		return
	}
	fmt.Fprintln(e.stdout, "\nkept for you (in the repository: removing the state folder keeps them):")
	for _, k := range kept {
		if k.What != state.KeptFiles {
			fmt.Fprintf(e.stdout, "  %s\n", k.Line())
			continue
		}
		who := fmt.Sprintf("task %d", k.Task)
		if k.Task < 0 {
			who = "the run"
		}
		fmt.Fprintf(e.stdout, "  files of yours that %s removed or replaced, on %s (see them: %s):\n", who, k.Ref, k.Look)
		for _, f := range k.Files {
			fmt.Fprintf(e.stdout, "    %s: put it back with %s\n", f.Path, f.Restore)
		}
	}
}

// printBetweenRuns says what the runs of this configuration leave that a
// person may wonder about: the worktree they keep between runs, and how to
// remove it; the work they leave uncommitted when nothing commits it.
func printBetweenRuns(e *env, view state.StatusReport) {
	if w := view.RunWorktree; w != nil {
		fmt.Fprintf(e.stdout, "\nrun's worktree: %s on branch %s, kept between runs (the tasks work there where the kernel confines files); "+
			"`peal clean` removes it and the runs' branches, as far as they hold no work of their own\n", w.Path, w.Branch)
	}
	if !view.Commits {
		fmt.Fprintln(e.stdout, "\ncommits: none: runs of this configuration review nothing (no stet found, no stet_commands) and commit_after_phase2 is off, "+
			"so each task's work stays uncommitted in the work tree (git status shows it) for you to review and commit")
	}
}

// lastRunText says what the last run did, naming only what happened:
// "tasks 1, 2 completed; task 3 failed", "task 3 completed (tasks 1, 2
// before it)", "nothing to do (tasks 1, 2 completed before it)".
func lastRunText(s *state.RunSummary) string {
	var parts []string
	for _, c := range []struct {
		what  string
		tasks []int
	}{{"completed", s.TasksCompleted}, {"failed", s.TasksFailed}, {"left with findings", s.TasksWithRemainingFindings},
		{"deferred", s.TasksDeferred}, {"skipped (retries used up)", s.TasksSkipped}, {"completed without review (on_stet_fail = skip)", s.TasksReviewSkipped},
		{"whose checks still fail", s.TasksChecksFailed}} {
		if len(c.tasks) > 0 {
			parts = append(parts, taskList(c.tasks)+" "+c.what)
		}
	}
	if len(s.ChecksFailing) > 0 {
		parts = append(parts, "the final tree fails the checks "+check.Quoted(s.ChecksFailing))
	}
	text := strings.Join(parts, "; ")
	if text == "" {
		text = "nothing to do"
	}
	if before := s.TasksAlreadyCompleted; len(before) > 0 {
		text += " (" + taskList(before) + " completed before it)"
	}
	return text
}
