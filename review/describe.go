package review

import (
	"fmt"
	"io"
	"strings"

	"peal/phase"
)

// The dry run's words for Phase 3: how the review and the checks run, and a
// task's rounds as a run would make them.

// Describe writes how Phase 3 runs: the review (or none), then the
// project's checks, in order, and when they run.
func (rv *Reviewer) Describe(w io.Writer) {
	if rv == nil {
		fmt.Fprintln(w, "review: none (no stet): tasks end after execute")
		return
	}
	fmt.Fprintln(w, "review: "+rv.describe())
	c := rv.Checks()
	if c == nil {
		return
	}
	fmt.Fprintf(w, "checks: in order, each through sh -c in the task's work tree (%s; a task of a parallel block: its worktree), under %s each:\n",
		c.Dir(), c.Timeout())
	for i, cmd := range c.Commands() {
		fmt.Fprintf(w, "  %d. %s\n", i+1, cmd)
	}
	fmt.Fprintln(w, "  they run on the starting tree before the first task (what fails there is charged to no task until it passes), "+
		"after each execute and each address round (a failing one goes to the agent in the next round's prompt), "+
		"and on the work tree after each merge of a parallel block's task (a failure undoes the merge, as a conflict)")
}

// DescribeRounds writes a task's Phase 3 after its commit, as a run would
// make it: its review and checks, then the rounds while findings remain or
// a check fails (triage, address, the round's commit, the review and
// checks again). commit writes the line of a commit whose subject ends with
// what (nothing when the work is not committed); call is the line of an
// agent call of the phase, with its attempts and the prompt shown.
func (rv *Reviewer) DescribeRounds(w io.Writer, indent string, commit func(what string), call func(name phase.Name, attempts int, shown string) string) {
	if rv == nil {
		return
	}
	review := strings.Join(rv.reviewCommands(), "; ")
	checks := strings.Join(rv.Checks().Commands(), "; ")
	again := func() {
		if rv.Reviews() {
			fmt.Fprintf(w, "%s%-8s %s\n", indent, "review", review)
		}
		if checks != "" {
			fmt.Fprintf(w, "%s%-8s %s\n", indent, "check", checks)
		}
	}
	again()
	what, prompt := "findings remain", "<prompt: the review and its suggestions>"
	switch {
	case checks != "" && rv.Reviews():
		what, prompt = "findings remain or a check fails", "<prompt: the review, its suggestions and the failing checks' output>"
	case checks != "":
		what, prompt = "a check fails", "<prompt: the failing checks' output>"
	}
	fmt.Fprintf(w, "%swhile %s, up to %d rounds:\n", indent, what, rv.cfg.MaxAddressRounds)
	if rv.Builtin() && !rv.cfg.StetDisableLLMTriage {
		fmt.Fprintln(w, indent+call(phase.Triage, rv.Phase3Attempts(), "<prompt: the review and the triage question>"))
	}
	fmt.Fprintln(w, indent+call(phase.Address, rv.Phase3Attempts(), prompt))
	commit("address round <N>")
	again()
}

// describe says in one line how Phase 3 runs.
func (rv *Reviewer) describe() string {
	if !rv.Reviews() {
		return "none (no stet): the project's checks alone make Phase 3"
	}
	if !rv.Builtin() {
		return fmt.Sprintf("custom commands, all once at session start; each review runs %q", strings.Join(rv.custom[len(rv.custom)-1], " "))
	}
	return fmt.Sprintf("stet %s, one session per task (per parallel block under parallel_isolation = shared): %s before the task's first call, %s finish after its Phase 3; "+
		"stet's state in %s, its worktrees in %s", rv.stet.path, strings.Join(rv.stet.startArgv(), " "), rv.stet.path, rv.stet.stateDir, rv.stet.worktrees)
}

// reviewCommands are the commands of one review (none without a review).
func (rv *Reviewer) reviewCommands() []string {
	if !rv.Reviews() {
		return nil
	}
	if !rv.Builtin() {
		return []string{strings.Join(rv.custom[len(rv.custom)-1], " ")}
	}
	return []string{
		strings.Join(append([]string{rv.stet.path}, rv.stet.streamArgv()...), " "),
		strings.Join(append([]string{rv.stet.path}, rv.stet.listArgv()...), " "),
	}
}
