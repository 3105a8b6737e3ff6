package confine_test

import (
	"log/slog"
	"os"
	"path/filepath"

	"peal/confine"
)

// How the run fills the confinement of an agent call in a task's worktree,
// and of a check run in the same tree. The proxy is the run's, made once.
func Example() {
	home, _ := os.UserHomeDir()
	repo := "/src/project"                        // the main work tree
	tree := "/src/project/.peal/worktrees/task-2" // the task's worktree
	proxy := confine.NewProxy(slog.Default())
	mode := confine.Auto // the `confine` key

	// What every call of the run shares.
	base := confine.Base(home)
	base.Deny = append(base.Deny, confine.Paths(confine.KeyReadDeny /* the user's confine_read_deny */)...)
	base.Protect = append(base.Protect,
		confine.Path{Path: filepath.Join(repo, ".peal"), Key: "peal's state folder"},
		confine.Path{Path: repo, Key: "the main work tree"},
		// and the other tasks' worktrees
	)
	base.Write = append(base.Write,
		confine.Paths("build cache", filepath.Join(home, ".cache"), filepath.Join(home, "go", "pkg", "mod"))...)
	base.Write = append(base.Write, confine.Paths(confine.KeyWritePaths /* the user's confine_write_paths */)...)

	// This call: its work tree, its git data, its CLI's folders, its hosts.
	pol := base.Clone()
	pol.Write = append(pol.Write, confine.Path{Path: tree, Key: "work tree"})
	if g, err := confine.FindGit(tree); err == nil {
		write, protect := g.Paths(false)
		pol.Write = append(pol.Write, write...)
		pol.Protect = append(pol.Protect, protect...)
	}
	pol.Write = append(pol.Write, confine.Paths("claude's folders", filepath.Join(home, ".claude"))...)
	pol.Deny = append(pol.Deny, confine.Paths("codex's credentials", filepath.Join(home, ".codex", "auth.json"))...)
	pol.TCP = &confine.TCP{} // the proxy's port is added per call
	allow, err := confine.ParseAllow("claude's hosts", "api.anthropic.com")
	if err == nil {
		allow, err = allow.With(confine.KeyNetworkAllow /* , the user's confine_network_allow */)
	}
	if err != nil {
		return
	}
	agentCall := &confine.Call{Mode: mode, Access: pol, EnvPass: []string{"ANTHROPIC_*", "CLAUDE_*"}, Proxy: proxy, Allow: allow}

	// A check runs the code the agent wrote: the same tree, no CLI folders,
	// no model's host, only what the user allowed (a module proxy, say).
	checkPol := base.Clone()
	checkPol.Write = append(checkPol.Write, confine.Path{Path: tree, Key: "work tree"})
	checkPol.TCP = &confine.TCP{}
	checkAllow, _ := confine.ParseAllow(confine.KeyNetworkAllow, "proxy.golang.org", "sum.golang.org")
	check := &confine.Call{Mode: mode, Access: checkPol, Proxy: proxy, Allow: checkAllow}

	// Each goes into its phase.Spec (Confine: agentCall, Confine: check);
	// after a failed call, the line that explains a denial:
	//   refused, _ := proxy.Refusals(res.CallID)
	//   line := confine.Explain(&agentCall.Access, spec.Dir, outputLines, refused)
	_, _ = agentCall, check
}
