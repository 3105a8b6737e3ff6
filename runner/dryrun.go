package runner

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"peal/agent"
	"peal/agentcall"
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
	sides := r.agents.Sides()
	fmt.Fprintf(w, "agent %s (%s)", cfg.AgentPath, sides[0].Kind.Name)
	if len(sides) > 1 {
		fmt.Fprintf(w, " (fallback on even attempts: %s (%s))", sides[1].Path, sides[1].Kind.Name)
	}
	fmt.Fprintln(w)
	for _, s := range sides {
		if s.Kind.Notes != "" {
			fmt.Fprintf(w, "note: %s: %s\n", s.Kind.Name, s.Kind.Notes)
		}
	}
	if len(tasks) == 0 {
		fmt.Fprintf(w, "\nthe plan has no task heading: a run first asks the agent to normalize it (up to %d attempts):\n  %s\n"+
			"the schedule depends on that answer.\n", 1+cfg.NormalizeRetryCount, d.shownArgv(phase.Normalize, cfg.Model, prompt.Normalize("", text), ""))
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
	d.describeReview()
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

// describeReview prints how Phase 3 would run: the review and the checks.
func (d *dryRun) describeReview() {
	if d.at.reviewer == nil {
		fmt.Fprintln(d.w, "review: none (no stet): tasks end after execute")
		return
	}
	fmt.Fprintln(d.w, "review: "+d.at.reviewer.Describe())
	c := d.at.checks()
	if c == nil {
		return
	}
	fmt.Fprintf(d.w, "checks: in order, each through sh -c in the task's work tree (%s; a task of a parallel block: its worktree), under %s each:\n",
		c.Dir(), c.Timeout())
	for i, cmd := range c.Commands() {
		fmt.Fprintf(d.w, "  %d. %s\n", i+1, cmd)
	}
	fmt.Fprintln(d.w, "  they run on the starting tree before the first task (what fails there is charged to no task until it passes), "+
		"after each execute and each address round (a failing one goes to the agent in the next round's prompt), "+
		"and on the work tree after each merge of a parallel block's task (a failure undoes the merge, as a conflict)")
}

// describeIsolated prints a block whose tasks work in worktrees of their
// own: where each task runs, its calls there as a sequential task's, and
// the merge back.
func (d *dryRun) describeIsolated(tasks []plan.Task, completed map[int]bool) {
	cfg := d.r.cfg
	fmt.Fprintf(d.w, "  each task in a worktree of its own under %s, on a branch made from the work tree's HEAD when the block starts "+
		"(a tree with uncommitted changes, or without a commit, runs the block in the shared tree instead)\n", d.r.trees.Root())
	if len(cfg.WorktreeSparsePaths) > 0 {
		fmt.Fprintf(d.w, "  each worktree checks out only %s and the top-level files (worktree_sparse_paths, git's cone mode); what a task writes elsewhere is committed with its work\n",
			strings.Join(cfg.WorktreeSparsePaths, ", "))
	}
	if len(cfg.WorktreeCopy) > 0 {
		fmt.Fprintf(d.w, "  copied into each worktree: %s\n", strings.Join(cfg.WorktreeCopy, ", "))
	}
	if len(cfg.WorktreeLink) > 0 {
		fmt.Fprintf(d.w, "  linked into each worktree from the work tree, shared by the tasks and never committed: %s\n", strings.Join(cfg.WorktreeLink, ", "))
	}
	if cfg.WorktreeSetupCommand != "" {
		fmt.Fprintf(d.w, "  run in each worktree before its first call: %s\n", cfg.WorktreeSetupCommand)
	}
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
	model, _ := agentcall.ModelFor(d.r.cfg, attempt, name)
	shown := model
	if shown == "" {
		shown = "(agent default)"
	}
	fmt.Fprintf(d.w, "%s%-8s model %s, attempts %d: %s\n", indent, name, shown, attempts, d.shownArgv(name, model, prompt, promptLen))
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
	rv := d.at.reviewer
	if rv == nil {
		return
	}
	attempt, _ := tickets.Next(d.r.cfg.KnowledgeDir, d.r.tickets.id(tasks[0].Index), d.r.tickets.esc)
	review := strings.Join(rv.ReviewCommands(), "; ")
	checks := strings.Join(rv.Checks().Commands(), "; ")
	again := func() {
		if rv.Reviews() {
			fmt.Fprintf(d.w, "%s%-8s %s\n", indent, "review", review)
		}
		if checks != "" {
			fmt.Fprintf(d.w, "%s%-8s %s\n", indent, "check", checks)
		}
	}
	again()
	what := "findings remain"
	switch {
	case checks != "" && rv.Reviews():
		what = "findings remain or a check fails"
	case checks != "":
		what = "a check fails"
	}
	fmt.Fprintf(d.w, "%swhile %s, up to %d rounds:\n", indent, what, d.r.cfg.MaxAddressRounds)
	if rv.Builtin() && !d.r.cfg.StetDisableLLMTriage {
		d.describeCall(indent, attempt, phase.Triage, rv.Phase3Attempts(), "", "<prompt: the review and the triage question>")
	}
	prompt := "<prompt: the review and its suggestions>"
	switch {
	case checks != "" && rv.Reviews():
		prompt = "<prompt: the review, its suggestions and the failing checks' output>"
	case checks != "":
		prompt = "<prompt: the failing checks' output>"
	}
	d.describeCall(indent, attempt, phase.Address, rv.Phase3Attempts(), "", prompt)
	commit("address round <N>")
	again()
}

// shownArgv is the argv of a call of the primary agent as the dry run shows
// it: the prompt as <prompt len=N> (or shown, when given), as the last
// argument or after "<" when it goes on stdin.
func (d *dryRun) shownArgv(name phase.Name, model, prompt, shown string) string {
	s := d.r.agents.Sides()[0]
	c := d.r.agents.Request(d.at.caller.Dir, s.Role, name, model, "")
	// With agent_session = "task", a task's plan begins its session and
	// the calls after it continue it (triage stays fresh); the id, which
	// the run chooses or learns, shows as <session>.
	id := ""
	if d.r.cfg.AgentSession == config.SessionTask && s.Kind.Session != nil && name != phase.Triage {
		for _, try := range []string{agent.NewID(), "ses_0000000000000000"} {
			if s.Kind.Session.ValidID(try) {
				id = try
			}
		}
		c.Session, c.Resume = id, name != phase.Plan
	}
	inv, _ := s.Kind.Invocation(s.Path, c)
	argv := inv.Argv
	if id != "" {
		for i, a := range argv {
			argv[i] = strings.ReplaceAll(a, id, "<session>")
		}
	}
	if inv.PromptInArgv() {
		argv = argv[:len(argv)-1]
	}
	if shown == "" {
		shown = fmt.Sprintf("<prompt len=%d>", len(prompt))
	}
	if s.Kind.PromptOnStdin {
		return strings.Join(argv, " ") + " < " + shown
	}
	if len(prompt) > agent.MaxArgLen {
		shown += " (too long for an argument: the call would fail)"
	}
	return strings.Join(append(argv, shown), " ")
}
