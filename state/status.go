package state

// What `peal status` tells of a plan's tasks, from the state files, the
// retry-state store and the last run summary; `peal report` shows it too.

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
	Usage *Usage `json:"usage,omitempty"`
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
	// Conflict is why the last run undid the task's merge.
	Conflict
}

// StatusReport is what `peal status` prints.
type StatusReport struct {
	Tasks   []TaskStatus `json:"tasks"`
	LastRun *RunSummary  `json:"last_run"`
	// Changes says in one line what changed in the plan since its last
	// run (Changes.Line); "" when it has none.
	Changes string `json:"changes,omitempty"`
	// SparsePaths and Links are what the worktrees of parallel blocks
	// check out and link under this configuration (worktree_sparse_paths,
	// worktree_link).
	SparsePaths []string `json:"worktree_sparse_paths,omitempty"`
	Links       []string `json:"worktree_link,omitempty"`
	// Commits: a run of this configuration commits each task's work (stet
	// reviews commits, or commit_after_phase2); without, the work stays
	// uncommitted in the work tree.
	Commits bool `json:"commits"`
	// RunWorktree is the worktree the runs on the state folder keep
	// between runs (where the kernel confines files, their tasks work
	// there), when there is one now; `peal clean` removes it.
	RunWorktree *WorktreeStatus `json:"run_worktree,omitempty"`
	// Kept is what peal keeps for the user in the repository, noted in its
	// git folder (KeptDir): it outlives the state folder.
	Kept []Kept `json:"kept,omitempty"`
}
