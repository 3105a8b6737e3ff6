package policy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"peal/agent"
	"peal/config"
	"peal/confine"
	"peal/internal/gitrepo"
	"peal/phase"
)

// Description is what the confinement of a configuration gives each kind
// of call on this machine, derived from the policies the calls get.
type Description struct {
	// Off: confine = off, nothing is confined.
	Off bool
	// Support is what the kernel enforces (under off: nothing asked).
	Support confine.Support
	// Sections say it, one thing an item: what the kernel enforces; what
	// an agent call of each of the run's kinds, and a check or
	// worktree_setup_command, writes, reads in the home folders, reaches
	// and keeps of the environment; the folders read by allow list; what
	// no call reads; what no call writes.
	Sections []Section
}

// Section is one part of a Description: a heading, and its items, each
// short enough for a line of its own (a path, a host, a variable).
type Section struct {
	Head  string
	Items []string
}

// Lines are the description as lines: each section's heading, then its
// items, each on a line of its own after indent.
func (d Description) Lines(indent string) []string {
	var out []string
	for _, s := range d.Sections {
		out = append(out, s.Head)
		for _, it := range s.Items {
			out = append(out, indent+it)
		}
	}
	return out
}

// failed is the description of a confinement that cannot be set up: err
// says why.
func failed(mode config.ConfineMode, err error) Description {
	return Description{Sections: []Section{{Head: "confine = " + string(mode), Items: []string{err.Error()}}}}
}

// gitTimeout bounds the git command of a description.
const gitTimeout = 30 * time.Second

// Describe describes the confinement of cfg on this machine. It starts
// nothing but git, which reads the configuration the calls' git reads
// (Repository), and writes nothing. `peal doctor`, `peal config` and the dry run
// show it.
func Describe(cfg *config.Config) (Description, error) {
	if err := cfg.CheckConfinePaths(); err != nil {
		// Never a policy that says a path is written and never written.
		return failed(cfg.Confine, err), err
	}
	c, err := buildRules(cfg, nil, probing(cfg), false, thisMachine())
	if err != nil || c == nil {
		return Description{Off: true, Sections: []Section{{Head: "confine = off",
			Items: []string{"agent calls and checks run with peal's whole environment, file system and network"}}}}, err
	}
	d := Description{Support: c.support, Sections: []Section{{Head: fmt.Sprintf("confine = %s", c.mode), Items: c.support.Parts()}}}
	// The policy of a call in the work tree: its own folder's grant is
	// said as "its work tree", whichever tree a call works in.
	site := Site{Tree: cfg.RepoPath}
	if g, err := confine.FindGit(cfg.RepoPath); err == nil {
		site.Tree = g.WorkTree
		ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
		defer cancel()
		// Only a credential stops a description: a git that cannot run
		// stops the run itself with its own error.
		var cred *CredentialError
		if err := c.Repository(ctx, gitrepo.New(phase.Caller{Dir: site.Tree, Limits: phase.Limits{KillGrace: time.Second}}, nil, gitTimeout, site.Tree)); errors.As(err, &cred) {
			return failed(cfg.Confine, err), err
		}
	}
	kinds := []string{cfg.AgentKind}
	if fk := cfg.FallbackKind(); fk != "" && fk != cfg.AgentKind {
		kinds = append(kinds, fk)
	}
	for _, name := range kinds {
		k, err := agent.Lookup(name)
		if err != nil {
			continue
		}
		call := c.ForCall(site, k, nil)
		items := describeCall(call, k)
		if keys := c.keys.describe(k); keys != "" {
			items = append(items, keys)
		}
		d.Sections = append(d.Sections, Section{Head: name + " agent calls", Items: items})
	}
	checks := c.ForCall(site, nil, nil)
	d.Sections = append(d.Sections, Section{Head: checksLine, Items: describeCall(checks, nil)},
		Section{Head: "read only where a call is allowed to", Items: orNothing(grouped(checks.Access.Hide, nil))},
		Section{Head: "never read", Items: orNothing(grouped(checks.Access.Deny, nil))},
		Section{Head: "never written", Items: append(grouped(checks.Access.Protect, nil), "from a parallel block's worktree: "+keyMainTree)},
		c.gitSection())
	if c.postRunUnconfined {
		d.Sections = append(d.Sections, Section{Head: "post_run_commands run unconfined (post_run_confined = false)",
			Items: []string{"with peal's whole environment, file system and network"}})
	}
	return d, nil
}

// checksLine names the processes confined as checks.
const checksLine = "checks and worktree_setup_command (and post_run_commands, stet_commands, the repository's hooks, which also write the repository's objects, refs and logs)"

// describeCall says what a call may write, read in the home folders, reach
// and keep of peal's environment, a thing an item.
func describeCall(call *confine.Call, k *agent.Kind) []string {
	var items []string
	if slices.ContainsFunc(call.Access.Write, func(p confine.Path) bool { return p.Key == keyWorkTree }) {
		items = append(items, "write: its work tree")
	}
	items = append(items, "write: its "+confine.KeyTemp)
	for _, it := range grouped(call.Access.Write, []string{confine.KeySystem, keyWorkTree}) {
		items = append(items, "write: "+it)
	}
	if len(call.Access.Hide) > 0 {
		for _, it := range grouped(call.Access.Read, []string{confine.KeySystem}) {
			items = append(items, "read besides, in the home folders: "+it)
		}
	}
	hosts := call.Allow.Entries()
	if k != nil {
		for _, v := range k.Confine.BaseURLs {
			if os.Getenv(v) == "" {
				hosts = append(hosts, "the host of $"+v)
			}
		}
	}
	if len(hosts) == 0 {
		hosts = []string{"no host"}
	}
	for _, h := range hosts {
		items = append(items, "reach: "+h)
	}
	items = append(items, "keep of peal's environment: the basic variables")
	for _, v := range call.EnvPass {
		items = append(items, "keep of peal's environment: "+v)
	}
	return items
}

// grouped names the paths of list with the key that put them there, a
// path an item ("path (key)"), in the order the keys first come, leaving
// out the keys of skip.
func grouped(list []confine.Path, skip []string) []string {
	var keys []string
	paths := map[string][]string{}
	for _, p := range list {
		if slices.Contains(skip, p.Key) {
			continue
		}
		if _, ok := paths[p.Key]; !ok {
			keys = append(keys, p.Key)
		}
		if !slices.Contains(paths[p.Key], p.Path) {
			paths[p.Key] = append(paths[p.Key], p.Path)
		}
	}
	var out []string
	for _, k := range keys {
		for _, p := range paths[k] {
			out = append(out, p+" ("+k+")")
		}
	}
	return out
}

// orNothing is items, or "nothing" when there are none.
func orNothing(items []string) []string {
	if len(items) == 0 {
		return []string{"nothing"}
	}
	return items
}
