package report

import (
	"fmt"
	"path/filepath"
	"slices"

	"peal/config"
	"peal/plan"
	"peal/review"
	"peal/state"
	"peal/tickets"
	"peal/worktree"
)

// Status is `peal status`'s view of cfg's plan, which the report reads
// too: every task from the state file, the retry-state store and the last
// run summary, the worktrees and what peal kept for the user. It changes
// nothing on disk and starts nothing.
func Status(cfg *config.Config) (state.StatusReport, []string, error) {
	tasks, _, err := plan.Read(cfg.PlanPath, cfg.NormalizePlan)
	if err != nil {
		return state.StatusReport{}, nil, err
	}
	if len(tasks) == 0 {
		return state.StatusReport{}, nil, fmt.Errorf("plan %s has no `## Task N` heading: its tasks are only known after a run normalizes it", cfg.PlanPath)
	}
	all := tasks
	if tasks, err = plan.Select(tasks, cfg.Task, cfg.FromTask); err != nil {
		return state.StatusReport{}, nil, err
	}
	// The state as a run would take it: tied to the plan as it is now.
	st, changes, warnings, err := state.Peek(cfg.StateDir, state.Plan{Path: cfg.PlanPath, Repo: cfg.RepoPath}, state.Texts(all, ""))
	if err != nil {
		return state.StatusReport{}, nil, err
	}
	report := state.StatusReport{Tasks: []state.TaskStatus{}, LastRun: lastRun(cfg), SparsePaths: cfg.WorktreeSparsePaths, Links: cfg.WorktreeLink,
		Changes: changes.Line()}
	rv, _ := review.New(review.Options{Config: cfg}) // no command runs: it only finds stet
	report.Commits = cfg.CommitAfterPhase2 || rv.Commits()
	if home, ok := worktree.InspectHome(cfg.StateDir); ok {
		report.RunWorktree = &state.WorktreeStatus{Path: home.Path, Branch: home.Branch, Now: true}
	}
	if cfg.StateNotes != "" {
		gitDir := filepath.Dir(filepath.Dir(cfg.StateNotes))
		report.Kept = state.ReadKept(state.KeptDir(gitDir), func(ref string) bool { return state.RefExists(gitDir, ref) })
	}
	failed := func(task int) bool {
		return report.LastRun != nil && slices.ContainsFunc(report.LastRun.TasksFailed, func(was int) bool { n, ok := changes.Now(was); return ok && n == task })
	}
	for _, t := range tasks {
		ts := state.TaskStatus{Index: t.Index, Ticket: cfg.Ticket(st.Ticket(t.Index)), Status: "pending"}
		rs, rerr := tickets.Load(cfg.KnowledgeDir, ts.Ticket)
		if rerr == nil {
			ts.Attempts, ts.RetryCount, ts.LastAttemptStatus = len(rs.Attempts), rs.RetryCount, rs.LastStatus()
		}
		exhausted := rerr == nil && cfg.EscalationEnabled && rs.Exhausted(int(cfg.EscalationMaxRetries))
		switch {
		case slices.Contains(st.CompletedTaskIndices, t.Index):
			ts.Status = "completed"
		case slices.Contains(st.DeferredTaskIndices, t.Index):
			ts.Status = "deferred"
		case exhausted:
			ts.Status = "skipped"
		case failed(t.Index),
			ts.LastAttemptStatus == tickets.AttemptError, ts.LastAttemptStatus == tickets.AttemptBlocked:
			ts.Status = "failed"
		}
		ts.Worktree = worktreeStatus(cfg, t.Index, report.LastRun)
		if lr := report.LastRun; lr != nil && lr.Usage != nil {
			if u, ok := lr.Usage.Tasks[t.Index]; ok {
				ts.Usage = &u
			}
		}
		report.Tasks = append(report.Tasks, ts)
	}
	return report, warnings, nil
}

// worktreeStatus is the worktree of task: the one that exists now (its
// branch read from git's files, without running git), else the last run's
// record of it; nil when the task had none.
func worktreeStatus(cfg *config.Config, task int, last *state.RunSummary) *state.WorktreeStatus {
	if now, ok := worktree.Inspect(cfg.StateDir, task); ok {
		return &state.WorktreeStatus{Path: now.Path, Branch: now.Branch, Now: true, Sparse: now.Sparse}
	}
	if last == nil {
		return nil
	}
	for _, pt := range last.ParallelTasks {
		if pt.Task == task {
			return &state.WorktreeStatus{Path: pt.Worktree, Branch: pt.Branch, Merged: pt.Merged, Conflict: pt.Conflict}
		}
	}
	return nil
}

// lastRun is the run summary of this plan and repo, or nil.
func lastRun(cfg *config.Config) *state.RunSummary {
	sum, ok := state.ReadRunSummary(cfg.RunSummaryPath)
	if !ok || sum.PlanPath != cfg.PlanPath || sum.RepoPath != cfg.RepoPath {
		return nil
	}
	return &sum
}
