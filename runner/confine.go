package runner

import (
	"path/filepath"
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

// Confined records and logs what the confinement refused a call that
// ended (policy.Rules.Refused: call its confinement, dir its folder, res
// its result) and returns the line that explains its failure by the
// confinement ("" when nothing points at it), with whether the call's
// output bore it out.
func (o *recorder) Confined(call *confine.Call, dir string, task int, res phase.Result, end agentcall.End) (line string, borne bool) {
	r := o.run
	rf := r.confined.Refused(call, dir, res, end != agentcall.Succeeded, end == agentcall.Failed)
	if rf.Count == 0 && rf.Line == "" {
		return "", false
	}
	r.journal.Add(state.Event{Ev: state.EvConfined, Time: r.now().UTC(), Task: state.TaskOf(task), Call: res.CallID, Message: rf.Line,
		RefusedCount: rf.Count, Refused: rf.Refused})
	switch {
	case rf.Borne:
		r.log.Warn("the confinement refused what the call needed: "+rf.Line, "phase", res.Phase, "task", task, "call", res.CallID)
	case rf.Line != "":
		r.log.Warn("the call failed without saying why, after the confinement refused it a connection: "+rf.Line, "phase", res.Phase, "task", task, "call", res.CallID)
	}
	return rf.Line, rf.Borne
}

// guardOf is the run's watch of what git runs, as the git client and the
// review see it: the watch is made once the run starts, after the run.
type guardOf struct{ r *run }

func (g guardOf) Check() error { return g.r.guard.Check() }
func (g guardOf) Accept()      { g.r.guard.Accept() }
