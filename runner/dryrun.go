package runner

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"peal/config"
	"peal/phase"
	"peal/plan"
	"peal/policy"
	"peal/prompt"
	"peal/state"
	"peal/tickets"
	"peal/worktree"
)

// DryRun prints what `peal run` would do with cfg: the schedule, every task's
// calls with their argv (prompts as <prompt len=N>) and models, escalation
// included. It starts no child process and writes no file.
func DryRun(cfg *config.Config, log *slog.Logger, w io.Writer) error {
	r := newRun(cfg, log)
	d := &dryRun{r: r, at: r.main, w: w}
	tasks, text, err := readPlan(cfg)
	if err != nil {
		return err
	}
	if r.confined.Files() {
		// The calls run where a run makes them: in the run's worktree.
		d.at = r.homeSite(r.trees.Home())
	}
	fmt.Fprintf(w, "plan %s\nrepo %s\n", cfg.PlanPath, cfg.RepoPath)
	if r.confined.Files() {
		fmt.Fprintf(w, "the tasks work in %s, the run's worktree: it mirrors the work tree (its HEAD, its uncommitted changes, what git ignores there linked), and each task's work comes back to the work tree as the task ends (%s)\n",
			d.at.caller.Dir, map[bool]string{true: "its commits become the work tree's", false: "uncommitted, as an unconfined run leaves it"}[r.main.commits])
	}
	r.agents.Describe(w)
	if len(tasks) == 0 {
		fmt.Fprintf(w, "\nthe plan has no task heading: a run first asks the agent to normalize it (up to %d attempts):\n  %s\n"+
			"the schedule depends on that answer.\n", 1+cfg.NormalizeRetryCount, r.agents.Argv(d.at.caller.Dir, phase.Normalize, cfg.Model, prompt.Normalize("", text), ""))
		return nil
	}
	all := tasks
	if tasks, err = plan.Select(tasks, cfg.Task, cfg.FromTask); err != nil {
		return err
	}
	st, changes, warnings, err := state.Peek(cfg.StateDir, state.Plan{Path: cfg.PlanPath, Repo: cfg.RepoPath}, state.Texts(all, ""))
	if err != nil {
		return err
	}
	r.tickets.part = st.Ticket
	if line := changes.Line(); line != "" {
		warnings = append(warnings, line)
	}
	for _, warning := range warnings {
		fmt.Fprintf(w, "note: %s\n", warning)
	}
	completed := map[int]bool{}
	for _, i := range st.CompletedTaskIndices {
		completed[i] = true
	}
	for _, n := range r.reviewNotes {
		log.Log(context.Background(), n.Level, n.Msg, n.Args...)
	}
	d.at.reviewer.Describe(w)
	desc, err := policy.Describe(cfg)
	if err != nil {
		return err
	}
	for _, sec := range desc.Sections {
		fmt.Fprintln(w, "confinement: "+sec.Head)
		for _, it := range sec.Items {
			fmt.Fprintln(w, "  "+it)
		}
	}

	for n, seg := range plan.Segments(tasks) {
		kind := "sequential"
		if seg.Parallel {
			kind = "sequential (parallel is off)"
			if r.cfg.Parallel && r.cfg.MaxParallel > 1 {
				kind = fmt.Sprintf("parallel, at most %d at once", r.cfg.MaxParallel)
			}
		}
		fmt.Fprintf(w, "\nsegment %d: %s\n", n+1, kind)
		var left []plan.Task
		for _, t := range seg.Tasks {
			if !completed[t.Index] {
				left = append(left, t)
			}
		}
		block := r.runsAsBlock(seg, left) // as a run decides it
		if block && cfg.ParallelIsolation == config.IsolationWorktree {
			d.describeIsolated(seg.Tasks, completed)
			continue
		}
		var pending []plan.Task
		for _, t := range seg.Tasks {
			if d.describeTask(t, completed[t.Index], !block) {
				pending = append(pending, t)
			}
		}
		if block && len(pending) > 0 {
			fmt.Fprintf(w, "  after the block's executes, for the block as a whole:\n")
			d.describePhase3(pending, "  ")
		}
	}
	return nil
}

// dryRun prints a run's calls as the run would make them.
type dryRun struct {
	r  *run
	at *site // where the calls described run
	w  io.Writer
}

// describeIsolated prints a block whose tasks work in worktrees of their
// own: where each task runs, its calls there as a sequential task's, and
// the merge back.
func (d *dryRun) describeIsolated(tasks []plan.Task, completed map[int]bool) {
	cfg := d.r.cfg
	d.r.trees.Describe(d.w, "  ", cfg.WorktreeSparsePaths, cfg.WorktreeCopy, cfg.WorktreeLink, cfg.WorktreeSetupCommand)
	for _, t := range tasks {
		tt := d.r.trees.Of(t.Index)
		if !completed[t.Index] {
			fmt.Fprintf(d.w, "  task %d: worktree %s, branch %s, review folder %s\n", t.Index, tt.Path, tt.Branch, tt.Review)
		}
		in := &dryRun{r: d.r, at: d.r.worktreeSite(tt), w: d.w}
		in.describeTask(t, completed[t.Index], true)
	}
	checked := ""
	if d.r.chk.all() != nil {
		checked = ", then the checks run on the work tree (a failure undoes the merge, as a conflict)"
	}
	fmt.Fprintf(d.w, "  merge back: each completed task in plan order, git merge --no-ff -m \"peal: merge task N (<branch>)\" <branch>%s; "+
		"a conflict is undone and its branch kept under %s; then (parallel_conflict = %s) %s\n", checked, worktree.KeptPrefix, cfg.ParallelConflict,
		conflictAction(cfg.ParallelConflict).describe())
}

// describeTask prints one task's calls as a run would make them now, Phase 3
// included for a sequential task, and reports whether the task would run.
func (d *dryRun) describeTask(t plan.Task, completed, sequential bool) bool {
	if completed {
		fmt.Fprintf(d.w, "  task %d: completed by an earlier run, skipped\n", t.Index)
		return false
	}
	id := d.r.tickets.id(t.Index)
	attempt, note := tickets.Next(d.r.cfg.KnowledgeDir, id, d.r.tickets.esc)
	if note != "" {
		fmt.Fprintf(d.w, "  task %d: ticket %s: %s\n", t.Index, id, note)
		return false
	}
	fmt.Fprintf(d.w, "  task %d: ticket %s, attempt %d\n", t.Index, id, attempt)
	phases := phaseAttempts(d.r.cfg)
	d.describeCall("    ", attempt, phase.Plan, phases, prompt.Plan(t.Body), "")
	d.describeCall("    ", attempt, phase.Execute, phases, "", "<prompt: the plan text>")
	if sequential {
		d.describePhase3([]plan.Task{t}, "    ")
	}
	return true
}

// describeCall prints one agent call of a ticket's attempt: its model,
// attempts and argv.
func (d *dryRun) describeCall(indent string, attempt int, name phase.Name, attempts int, prompt, promptLen string) {
	fmt.Fprintln(d.w, indent+d.r.agents.DescribeCall(d.at.caller.Dir, attempt, name, attempts, prompt, promptLen))
}

// describePhase3 prints the commit after the execute(s) of tasks and their
// review; the agent calls carry the first task's index.
func (d *dryRun) describePhase3(tasks []plan.Task, indent string) {
	subject := fmt.Sprintf("task %d", tasks[0].Index)
	if len(tasks) > 1 {
		subject = "tasks " + plan.IndexList(tasks)
	}
	commit := func(what string) {
		if d.at.commits {
			fmt.Fprintf(d.w, "%s%-8s git add -A; git commit -m \"peal: %s - %s\"\n", indent, "commit", subject, what)
		}
	}
	commit("<first line of the plan text>")
	attempt, _ := tickets.Next(d.r.cfg.KnowledgeDir, d.r.tickets.id(tasks[0].Index), d.r.tickets.esc)
	d.at.reviewer.DescribeRounds(d.w, indent, commit, func(name phase.Name, attempts int, shown string) string {
		return d.r.agents.DescribeCall(d.at.caller.Dir, attempt, name, attempts, "", shown)
	})
}
