package runner

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"peal/agent"
	"peal/config"
	"peal/phase"
	"peal/state"
)

// DryRun prints what `peal run` would do with cfg: the schedule, every task's
// calls with their argv (prompts as <prompt len=N>) and models, escalation
// included. It starts no child process and writes no file.
func DryRun(cfg *config.Config, log *slog.Logger, w io.Writer) error {
	r := newRun(cfg, log)
	tasks, text, err := r.readPlan()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "plan %s\nrepo %s\nagent %s (%s)", cfg.PlanPath, cfg.RepoPath, cfg.AgentPath, r.agents.primary.kind.Name)
	if f := r.agents.fallback; f != nil {
		fmt.Fprintf(w, " (fallback on even attempts: %s (%s))", f.path, f.kind.Name)
	}
	fmt.Fprintln(w)
	for _, s := range r.agents.sides() {
		if s.kind.Notes != "" {
			fmt.Fprintf(w, "note: %s: %s\n", s.kind.Name, s.kind.Notes)
		}
	}
	if len(tasks) == 0 {
		fmt.Fprintf(w, "\nthe plan has no task heading: a run first asks the agent to normalize it (up to %d attempts):\n  %s\n"+
			"the schedule depends on that answer.\n", 1+cfg.NormalizeRetryCount, r.shownArgv("normalize", cfg.Model, phase.NormalizePrompt("", text), ""))
		return nil
	}
	if tasks, err = SelectTasks(tasks, cfg.Task, cfg.FromTask); err != nil {
		return err
	}
	st, warnings, err := state.Peek(cfg.StateDir, cfg.PlanPath, cfg.RepoPath)
	if err != nil {
		return err
	}
	for _, warning := range warnings {
		fmt.Fprintf(w, "note: %s\n", warning)
	}
	completed := map[int]bool{}
	for _, i := range st.CompletedTaskIndices {
		completed[i] = true
	}
	r.stet = r.resolveStet()
	r.describeReview(w)

	for n, seg := range Segments(tasks) {
		kind := "sequential"
		if seg.Parallel {
			kind = "sequential (parallel is off)"
			if r.cfg.Parallel && r.cfg.MaxParallel > 1 {
				kind = fmt.Sprintf("parallel, at most %d at once", r.cfg.MaxParallel)
			}
		}
		fmt.Fprintf(w, "\nsegment %d: %s\n", n+1, kind)
		block := seg.Parallel && r.cfg.Parallel && r.cfg.MaxParallel > 1
		for _, t := range seg.Tasks {
			r.describeTask(w, t, completed[t.Index], !block)
		}
		if block && r.cfg.CommitAfterPhase2 {
			fmt.Fprintln(w, "  after the block's executes: one commit for the block (git add -A; git commit)")
		}
	}
	return nil
}

// describeReview prints how Phase 3 would run.
func (r *run) describeReview(w io.Writer) {
	switch {
	case r.stet == nil:
		fmt.Fprintln(w, "review: none (no stet): tasks end after execute")
	case !r.stet.builtin():
		fmt.Fprintf(w, "review: custom commands, all once at session start; each review runs %q\n", strings.Join(r.stet.reviewArgv(), " "))
	default:
		fmt.Fprintf(w, "review: stet %s; session start: %s; at the end: %s finish\n", r.stet.path, strings.Join(r.stet.startArgv(), " "), r.stet.path)
	}
}

// describeTask prints one task's calls as a run would make them now.
func (r *run) describeTask(w io.Writer, t Task, completed, commit bool) {
	if completed {
		fmt.Fprintf(w, "  task %d: completed by an earlier run, skipped\n", t.Index)
		return
	}
	id := r.ticketID(t.Index)
	attempt, note := r.peekAttempt(id)
	if note != "" {
		fmt.Fprintf(w, "  task %d: ticket %s: %s\n", t.Index, id, note)
		return
	}
	fmt.Fprintf(w, "  task %d: ticket %s, attempt %d\n", t.Index, id, attempt)
	r.tickets.byTask[t.Index] = &ticketRun{id: id, attempt: attempt}
	defer delete(r.tickets.byTask, t.Index)

	call := func(name string, attempts int, prompt string, promptLen string) {
		model := r.modelFor(t.Index, name)
		args := r.shownArgv(name, model, prompt, promptLen)
		shown := model
		if shown == "" {
			shown = "(agent default)"
		}
		fmt.Fprintf(w, "    %-8s model %s, attempts %d: %s\n", name, shown, attempts, args)
	}
	phases := 1 + int(r.cfg.PhaseRetryCount)
	call("plan", phases, phase.PlanPrompt(t.Body), "")
	call("execute", phases, "", "<prompt: the plan text>")
	if r.cfg.CommitAfterPhase2 && commit {
		fmt.Fprintf(w, "    %-8s git add -A; git commit -m \"peal: task %d - <first line of the plan text>\"\n", "commit", t.Index)
	}
	if r.stet == nil {
		return
	}
	fmt.Fprintf(w, "    %-8s %s\n", "review", strings.Join(r.stet.reviewArgv(), " "))
	fmt.Fprintf(w, "    while findings remain, up to %d rounds:\n", r.cfg.MaxAddressRounds)
	if r.stet.builtin() && !r.cfg.StetDisableLLMTriage {
		call("triage", r.phase3Attempts(), "", "<prompt: the review and the triage question>")
	}
	call("address", r.phase3Attempts(), "", "<prompt: the review and its suggestions>")
}

// peekAttempt reads which attempt a ticket's next run would be, without
// locking or writing; note says why the ticket would not run.
func (r *run) peekAttempt(id string) (int, string) {
	st, err := state.LoadRetryState(r.cfg.KnowledgeDir, id)
	if err != nil {
		// Missing or unreadable: a run starts a fresh state.
		return 1, ""
	}
	if r.cfg.EscalationEnabled && st.Exhausted(int(r.cfg.EscalationMaxRetries)) {
		return 0, fmt.Sprintf("skipped: %d blocked attempts reached max_retries %d", st.RetryCount, r.cfg.EscalationMaxRetries)
	}
	return st.NextAttempt(), ""
}

// shownArgv is the argv of a call of the primary agent as the dry run shows
// it: the prompt as <prompt len=N> (or shown, when given), as the last
// argument or after "<" when it goes on stdin.
func (r *run) shownArgv(name, model, prompt, shown string) string {
	s := &r.agents.primary
	c := r.agentRequest(s, name, model, "")
	inv, _ := s.kind.Invocation(s.path, c)
	argv := inv.Argv
	if inv.PromptInArgv() {
		argv = argv[:len(argv)-1]
	}
	if shown == "" {
		shown = fmt.Sprintf("<prompt len=%d>", len(prompt))
	}
	if s.kind.PromptOnStdin {
		return strings.Join(argv, " ") + " < " + shown
	}
	if len(prompt) > agent.MaxArgLen {
		shown += " (too long for an argument: the call would fail)"
	}
	return strings.Join(append(argv, shown), " ")
}
