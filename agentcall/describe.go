package agentcall

import (
	"fmt"
	"io"
	"strings"

	"peal/agent"
	"peal/config"
	"peal/phase"
)

// The dry run's words for agent calls: the run's agents, and each call as
// a run would make it now, with its model, its attempts and its argv, the
// prompt shown by its length.

// Describe writes the run's agents: the primary, the fallback (on even
// attempts), and each kind's notes.
func (a *Agents) Describe(w io.Writer) {
	fmt.Fprintf(w, "agent %s (%s)", a.cfg.AgentPath, a.primary.kind.Name)
	if f := a.fallback; f != nil {
		fmt.Fprintf(w, " (fallback on even attempts: %s (%s))", f.path, f.kind.Name)
	}
	fmt.Fprintln(w)
	for _, s := range a.sides() {
		if s.kind.Notes != "" {
			fmt.Fprintf(w, "note: %s: %s\n", s.kind.Name, s.kind.Notes)
		}
	}
}

// DescribeCall is a call of the phase name at dir on attempt n of its
// ticket (0: none), as the dry run shows it: its model (ModelFor), its
// attempts and its argv (Argv).
func (a *Agents) DescribeCall(dir string, n int, name phase.Name, attempts int, prompt, shown string) string {
	model, _ := ModelFor(a.cfg, n, name)
	named := model
	if named == "" {
		named = "(agent default)"
	}
	return fmt.Sprintf("%-8s model %s, attempts %d: %s", name, named, attempts, a.Argv(dir, name, model, prompt, shown))
}

// Argv is the argv of a call of the primary agent at dir as the dry run
// shows it: the prompt as <prompt len=N> (or shown, when given), as the
// last argument or after "<" when it goes on stdin.
func (a *Agents) Argv(dir string, name phase.Name, model, prompt, shown string) string {
	s := &a.primary
	c := a.request(dir, s.role, name, model, "")
	// With agent_session = "task", a task's plan begins its session and
	// the calls after it continue it (triage stays fresh); the id, which
	// the run chooses or learns, shows as <session>.
	id := ""
	if a.cfg.AgentSession == config.SessionTask && s.kind.Session != nil && name != phase.Triage {
		for _, try := range []string{agent.NewID(), "ses_0000000000000000"} {
			if s.kind.Session.ValidID(try) {
				id = try
			}
		}
		c.Session, c.Resume = id, name != phase.Plan
	}
	inv, _ := s.kind.Invocation(s.path, c)
	argv := inv.Argv
	if id != "" {
		for i, arg := range argv {
			argv[i] = strings.ReplaceAll(arg, id, "<session>")
		}
	}
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
