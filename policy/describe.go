package policy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
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
	// Lines say it, a line each: what the kernel enforces; what an agent
	// call of each of the run's kinds, and a check or
	// worktree_setup_command, writes, reads in the home folders, reaches
	// and keeps of the environment; the folders read by allow list; what
	// no call reads; what no call writes.
	Lines []string
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
		return Description{Lines: []string{"confine = " + string(cfg.Confine) + ": " + err.Error()}}, err
	}
	c, err := buildRules(cfg, nil, probing(cfg), false, thisMachine())
	if err != nil || c == nil {
		return Description{Off: true, Lines: []string{"confine = off: agent calls and checks run with peal's whole environment, file system and network"}}, err
	}
	d := Description{Support: c.support, Lines: []string{fmt.Sprintf("confine = %s: %s", c.mode, c.support)}}
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
			return Description{Lines: []string{"confine = " + string(cfg.Confine) + ": " + err.Error()}}, err
		}
	}
	kinds := []string{cfg.AgentKind}
	if fk := cfg.FallbackKind(); fk != "" && fk != cfg.AgentKind {
		kinds = append(kinds, fk)
	}
	var checks *confine.Call
	for _, name := range kinds {
		k, err := agent.Lookup(name)
		if err != nil {
			continue
		}
		call := c.ForCall(site, k, nil)
		d.Lines = append(d.Lines, name+" agent calls "+describeCall(call, k))
	}
	checks = c.ForCall(site, nil, nil)
	d.Lines = append(d.Lines, checksLine+" "+describeCall(checks, nil),
		"read only where a call is allowed to: "+grouped(checks.Access.Hide, nil),
		"never read: "+grouped(checks.Access.Deny, nil),
		"never written: "+grouped(checks.Access.Protect, nil)+"; from a parallel block's worktree, "+keyMainTree)
	if c.postRunUnconfined {
		d.Lines = append(d.Lines, "post_run_commands run unconfined (post_run_confined = false), with peal's whole environment")
	}
	return d, nil
}

// checksLine names the processes confined as checks.
const checksLine = "checks and worktree_setup_command (and post_run_commands, stet_commands, the repository's hooks, which also write the repository's objects, refs and logs)"

// describeCall says what a call may write, reach and keep of peal's
// environment.
func describeCall(call *confine.Call, k *agent.Kind) string {
	var writes []string
	if slices.ContainsFunc(call.Access.Write, func(p confine.Path) bool { return p.Key == keyWorkTree }) {
		writes = append(writes, "its work tree")
	}
	writes = append(writes, "its "+confine.KeyTemp)
	if rest := grouped(call.Access.Write, []string{confine.KeySystem, keyWorkTree}); rest != "nothing" {
		writes = append(writes, rest)
	}
	hosts := "none"
	if entries := call.Allow.Entries(); len(entries) > 0 {
		hosts = strings.Join(entries, ", ")
	}
	if k != nil {
		for _, v := range k.Confine.BaseURLs {
			if os.Getenv(v) == "" {
				hosts += ", the host of $" + v
			}
		}
	}
	env := "no other"
	if len(call.EnvPass) > 0 {
		env = strings.Join(call.EnvPass, ", ")
	}
	reads := "nothing else"
	if len(call.Access.Hide) > 0 {
		reads = grouped(call.Access.Read, []string{confine.KeySystem})
	}
	return fmt.Sprintf("write %s; read besides, in the home folders, %s; reach %s; keep the basic variables and %s",
		strings.Join(writes, ", "), reads, hosts, env)
}

// grouped names the paths of list by the key that put them there, in the
// order the keys first come, leaving out the keys of skip: "key (path,
// path), key (path)".
func grouped(list []confine.Path, skip []string) string {
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
		out = append(out, k+" ("+strings.Join(paths[k], ", ")+")")
	}
	if len(out) == 0 {
		return "nothing"
	}
	return strings.Join(out, ", ")
}
