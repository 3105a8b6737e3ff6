package runner

import (
	"fmt"
	"log/slog"
	"slices"

	"peal/config"
	"peal/state"
	"peal/worktree"
)

// TaskStatus is one task in `peal status`.
type TaskStatus struct {
	Index             int    `json:"index"`
	Status            string `json:"status"` // completed, failed, deferred, skipped, pending
	Ticket            string `json:"ticket"`
	Attempts          int    `json:"attempts"`
	RetryCount        int    `json:"retry_count"`
	LastAttemptStatus string `json:"last_attempt_status"` // "" when the ticket has no attempt
	// Usage is the tokens and cost of the task's agent calls in the last
	// run, when they were counted (structured_output).
	Usage *state.Usage `json:"usage,omitempty"`
	// Worktree describes the task's worktree (parallel_isolation =
	// worktree): the one it works in now, or where it ran in the last run.
	Worktree *WorktreeStatus `json:"worktree,omitempty"`
}

// WorktreeStatus is where a task of a parallel block works or worked.
type WorktreeStatus struct {
	Path   string `json:"path"`
	Branch string `json:"branch"`
	// Now: the worktree exists: the task runs there now, or a run that
	// died left it (the next run removes it). Otherwise the fields are
	// the last run's.
	Now    bool `json:"now"`
	Merged bool `json:"merged"`
	// Sparse are the folders a worktree that exists now checks out (git's
	// cone mode, relative to the top of the work tree); none: the whole
	// tree.
	Sparse []string `json:"sparse_paths,omitempty"`
	// Conflict lists the files the task's merge conflicted in;
	// ConflictDetail is what git said when the merge failed with none.
	Conflict       []string `json:"conflict_files,omitempty"`
	ConflictDetail string   `json:"conflict_detail,omitempty"`
	// ConflictChecks are the checks the work tree failed once the task's
	// work was merged (the merge was undone).
	ConflictChecks []string `json:"conflict_checks,omitempty"`
}

// StatusReport is what `peal status` prints.
type StatusReport struct {
	Tasks   []TaskStatus      `json:"tasks"`
	LastRun *state.RunSummary `json:"last_run"`
	// SparsePaths and Links are what the worktrees of parallel blocks
	// check out and link under this configuration (worktree_sparse_paths,
	// worktree_link).
	SparsePaths []string `json:"worktree_sparse_paths,omitempty"`
	Links       []string `json:"worktree_link,omitempty"`
}

// Status reports every task of cfg's plan from the state file, the
// retry-state store and the last run summary. It changes nothing on disk.
func Status(cfg *config.Config) (StatusReport, []string, error) {
	r := newRun(cfg, slog.New(slog.DiscardHandler))
	tasks, _, err := r.readPlan()
	if err != nil {
		return StatusReport{}, nil, err
	}
	if len(tasks) == 0 {
		return StatusReport{}, nil, fmt.Errorf("plan %s has no `## Task N` heading: its tasks are only known after a run normalizes it", cfg.PlanPath)
	}
	if tasks, err = SelectTasks(tasks, cfg.Task, cfg.FromTask); err != nil {
		return StatusReport{}, nil, err
	}
	st, warnings, err := state.Peek(cfg.StateDir, state.Plan{Path: cfg.PlanPath, Repo: cfg.RepoPath})
	if err != nil {
		return StatusReport{}, nil, err
	}
	report := StatusReport{Tasks: []TaskStatus{}, LastRun: lastRun(cfg), SparsePaths: cfg.WorktreeSparsePaths, Links: cfg.WorktreeLink}
	for _, t := range tasks {
		ts := TaskStatus{Index: t.Index, Ticket: r.tickets.id(t.Index), Status: "pending"}
		rs, rerr := state.LoadRetryState(cfg.KnowledgeDir, ts.Ticket)
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
		case report.LastRun != nil && slices.Contains(report.LastRun.TasksFailed, t.Index),
			ts.LastAttemptStatus == state.AttemptError, ts.LastAttemptStatus == state.AttemptBlocked:
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
func worktreeStatus(cfg *config.Config, task int, last *state.RunSummary) *WorktreeStatus {
	if now, ok := worktree.Inspect(cfg.StateDir, task); ok {
		return &WorktreeStatus{Path: now.Path, Branch: now.Branch, Now: true, Sparse: now.Sparse}
	}
	if last == nil {
		return nil
	}
	for _, pt := range last.ParallelTasks {
		if pt.Task == task {
			return &WorktreeStatus{Path: pt.Worktree, Branch: pt.Branch, Merged: pt.Merged, Conflict: pt.Conflict, ConflictDetail: pt.ConflictDetail,
				ConflictChecks: pt.ConflictChecks}
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
