package runner

import (
	"path/filepath"
	"slices"
	"strings"

	"peal/agentcall"
	"peal/confine"
	"peal/internal/safefs"
	"peal/phase"
	"peal/policy"
	"peal/state"
)

// confineCommand confines a check or worktree_setup_command before it
// starts: the policy of the site its folder lies in, and a temporary
// folder of its own in the state folder (the one it inherits is not its to
// write).
func (r *run) confineCommand(spec *phase.Spec) {
	if r.confined == nil {
		return
	}
	spec.TempRoot = filepath.Join(r.cfg.StateDir, "tmp")
	spec.Confine = r.confined.ForCall(r.siteOf(spec.Dir).policy(), nil, spec.Env)
}

// confineHook confines one of the repository's hooks that peal's commit or
// merge at spec's folder triggers (gitrepo.Hooks): as a check there, and
// writing the folders of write too (the commit's message file). A hook may
// run what a call wrote: a script of the tree (core.hooksPath = .husky),
// a program in a cache a call may write (the pre-commit framework's
// environments).
func (r *run) confineHook(spec *phase.Spec, write []string) {
	r.confineCommand(spec)
	if spec.Confine != nil {
		spec.Confine.Access.Write = append(spec.Confine.Access.Write, confine.Paths(keyMessage, write...)...)
	}
}

// keyMessage names the folder of a commit's message file in a hook's
// policy.
const keyMessage = "the commit message peal's hooks may rewrite"

// policy is what the confinement policy of a call needs of the site.
func (at *site) policy() policy.Site {
	ps := policy.Site{Tree: at.tree, Main: at.main, Linked: at.linked, Writable: at.writable}
	if at.git != nil {
		// Where the tree's git data is, as peal's git found it: never
		// what the tree's .git says now.
		ps.GitDir, ps.Common = at.git.GitDir()
	}
	return ps
}

// siteOf is the site whose work tree holds dir: a task's worktree, or the
// work tree.
func (r *run) siteOf(dir string) *site {
	if safefs.Within(dir, r.home.tree) {
		return r.home
	}
	root := r.trees.Root()
	if rel, err := filepath.Rel(root, dir); err == nil && filepath.IsLocal(rel) {
		name, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
		return &site{tree: filepath.Join(root, name), main: r.main.tree, linked: r.linkedPaths()}
	}
	return r.main
}

// Confined records what the confinement refused a call that ended (its
// result res; call its confinement, dir its folder): the connections the
// proxy refused it, and, when it failed, the line that explains the
// failure by the confinement, which it returns ("" when nothing points at
// it), with whether the call's output bore it out (a denial in it, or the
// refused host named). A refusal the output does not name is only the
// likeliest cause of a failure that names none (a side request's refusal
// is no cause): it is given, never for a failure that says its own cause.
// The line is logged too.
func (o *recorder) Confined(call *confine.Call, dir string, task int, res phase.Result, end agentcall.End) (line string, borne bool) {
	r := o.run
	if r.confined == nil || call == nil || res.CallID == "" {
		return "", false
	}
	refused, count := r.confined.Proxy().Refusals(res.CallID)
	r.confined.Proxy().Forget(res.CallID)
	if end != agentcall.Succeeded {
		line = confine.Explain(&call.Access, dir, strings.Split(res.Stdout+"\n"+res.Stderr, "\n"), refused)
		borne = line != ""
	}
	if line == "" && end == agentcall.Failed {
		line = confine.LastRefusal(refused)
	}
	if count == 0 && line == "" {
		return "", false
	}
	ev := state.Event{Ev: state.EvConfined, Time: r.now().UTC(), Task: state.TaskOf(task), Call: res.CallID, Message: line, RefusedCount: count}
	for _, ref := range refused {
		what := ref.Host
		if ref.Request != "" {
			// A request the model endpoint refused: what it asked.
			what = ref.Request + " (" + ref.Host + ")"
		}
		if len(ev.Refused) < 16 && !slices.Contains(ev.Refused, what) {
			ev.Refused = append(ev.Refused, what)
		}
	}
	r.journal.Add(ev)
	switch {
	case borne:
		r.log.Warn("the confinement refused what the call needed: "+line, "phase", res.Phase, "task", task, "call", res.CallID)
	case line != "":
		r.log.Warn("the call failed without saying why, after the confinement refused it a connection: "+line, "phase", res.Phase, "task", task, "call", res.CallID)
	}
	return line, borne
}

// explainDenial is the line that explains the failure of a command that
// is no task's, confined by rules (a post-run command, after the run record
// closed) by the confinement: what its output says was refused, or the
// connection the proxy refused it; "" when nothing points at it.
func explainDenial(rules *policy.Rules, call *confine.Call, dir string, res phase.Result) string {
	if rules == nil || call == nil || res.CallID == "" {
		return ""
	}
	refused, _ := rules.Proxy().Refusals(res.CallID)
	rules.Proxy().Forget(res.CallID)
	if line := confine.Explain(&call.Access, dir, strings.Split(res.Stdout+"\n"+res.Stderr, "\n"), refused); line != "" {
		return line
	}
	return confine.LastRefusal(refused)
}

// guardOf is the run's watch of what git runs, as the git client and the
// review see it: the watch is made once the run starts, after the run.
type guardOf struct{ r *run }

func (g guardOf) Check() error { return g.r.guard.Check() }
func (g guardOf) Accept()      { g.r.guard.Accept() }
