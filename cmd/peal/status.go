package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"peal/check"
	"peal/runner"
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
		cfg.Task, cfg.FromTask = c.Task, c.FromTask
		err = cfg.ValidateWithoutAgent()
	}
	if err != nil {
		return failf("%v", err)
	}
	report, warnings, err := runner.Status(cfg)
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
		return printJSON(e.stdout, report)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	withUsage := report.LastRun != nil && report.LastRun.Usage != nil
	header := "task\tstatus\tticket\tattempts\tretry count\tlast attempt"
	if withUsage {
		header += "\tlast run tokens in/out\tcost"
	}
	fmt.Fprintln(tw, header)
	for _, t := range report.Tasks {
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
	printWorktrees(e, report)
	if s := report.LastRun; s != nil {
		fmt.Fprintf(e.stdout, "\nlast run: exit %d at %s; completed %v (already before it %v), failed %v, with findings %v, deferred %v, skipped %v\n",
			s.ExitCode, s.CompletedAt, s.TasksCompleted, s.TasksAlreadyCompleted, s.TasksFailed, s.TasksWithRemainingFindings, s.TasksDeferred, s.TasksSkipped)
		if u := s.Usage; u != nil {
			fmt.Fprintf(e.stdout, "last run usage: %d input tokens, %d output tokens, $%.4f\n", u.InputTokens, u.OutputTokens, u.CostUSD)
		}
	} else {
		fmt.Fprintln(e.stdout, "\nlast run: no run summary (no run yet, or the last one failed hard)")
	}
	return nil
}

// printWorktrees says what the worktrees of parallel blocks hold, where
// the tasks of parallel blocks work, or worked in the last run, and what
// became of their work.
func printWorktrees(e *env, report state.StatusReport) {
	first := true
	heading := func() {
		if first {
			fmt.Fprintln(e.stdout, "\nworktrees:")
			first = false
		}
	}
	if len(report.SparsePaths) > 0 {
		heading()
		fmt.Fprintf(e.stdout, "  each checks out only %s, and the top-level files (worktree_sparse_paths)\n", strings.Join(report.SparsePaths, ", "))
	}
	if len(report.Links) > 0 {
		heading()
		fmt.Fprintf(e.stdout, "  each links %s to the work tree's (worktree_link)\n", strings.Join(report.Links, ", "))
	}
	for _, t := range report.Tasks {
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
		case len(w.Conflict) > 0:
			fmt.Fprintf(e.stdout, "  task %d: its merge conflicted in %s; its work is kept on branch %s (last run)\n", t.Index, strings.Join(w.Conflict, ", "), w.Branch)
		case len(w.ConflictChecks) > 0:
			fmt.Fprintf(e.stdout, "  task %d: once merged, the work tree failed the checks %s; the merge was undone and its work is kept on branch %s (last run)\n",
				t.Index, check.Quoted(w.ConflictChecks), w.Branch)
		case w.ConflictDetail != "":
			fmt.Fprintf(e.stdout, "  task %d: its merge failed (%s); its work is kept on branch %s (last run)\n", t.Index, w.ConflictDetail, w.Branch)
		case w.Branch != "":
			fmt.Fprintf(e.stdout, "  task %d: not merged; its work is kept on branch %s (last run)\n", t.Index, w.Branch)
		default:
			fmt.Fprintf(e.stdout, "  task %d: ran in a worktree and did not complete (last run)\n", t.Index)
		}
	}
}
