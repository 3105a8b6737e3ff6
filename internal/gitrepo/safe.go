package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// What peal's own git runs with, whatever the configuration files and the
// tree say. Every command of a Repo (Cmd.Run) gets the settings below on
// its command line, which outrank every configuration file (and which git
// hands on to any git it starts in a submodule), and inherits of peal's
// environment only the basic variables and those of envPass: a token peal
// was given (GITHUB_TOKEN, a model's key) never reaches git, nor anything
// git could start.
//
// A tree a call wrote may hold a git repository of its own (a folder with a
// .git): its configuration (core.fsmonitor, filters, hooks) is the call's.
// git runs that configuration only when it enters the repository, as a
// submodule: peal's git never stages one (see EmbeddedError), and never
// looks into a submodule's files (diff.ignoreSubmodules, for status and
// the porcelain diffs).

// safeSettings are the settings of every command.
var safeSettings = []string{
	// peal runs the hooks of its commits and merges itself, confined
	// (hooks.go).
	"core.hooksPath=" + os.DevNull,
	// A file system monitor is a program git runs before it reads the
	// tree; the user's is not worth a program a call could name.
	"core.fsmonitor=false",
	// No command of peal's goes into a submodule, and status and the
	// porcelain diffs never look at a submodule's files: git would run
	// git there, with the submodule's configuration.
	"submodule.recurse=false",
	"diff.ignoreSubmodules=all",
	"status.submoduleSummary=false",
	// A commit or a merge starts no maintenance of its own, which would
	// outlive the command, out of its process group.
	"maintenance.auto=false",
}

// envPass are the variables of peal's environment its git inherits besides
// the basic ones (PATH, HOME, XDG_*, the locale, TMPDIR: confine.BasicEnv):
// the identity of commits, where the user's configuration is, and what
// signing commits needs (the GnuPG folder, the SSH agent that may hold the
// signing key). None is a token.
var envPass = []string{
	"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE",
	"GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE", "EMAIL",
	"GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM",
	"GNUPGHOME", "SSH_AUTH_SOCK",
}

// EnvPass are the variables of peal's environment every git command of
// peal's inherits besides the basic ones.
func EnvPass() []string { return slices.Clone(envPass) }

// SafeArgs are the arguments that give a git command the settings every
// command of peal's runs with (-c name=value each), for the git peal gives
// another program (stet's).
func SafeArgs() []string { return safeArgs(false) }

// safeArgs are SafeArgs, without core.hooksPath when asHooks (the command
// that asks git where the hooks are).
func safeArgs(asHooks bool) []string {
	var args []string
	for _, s := range safeSettings {
		if asHooks && strings.HasPrefix(s, "core.hooksPath=") {
			continue
		}
		args = append(args, "-c", s)
	}
	return args
}

// EmbeddedError: a tree a call wrote holds git repositories of their own
// (folders with a .git) that git does not track there, at Paths (slash
// form, from the top of the tree, each with a trailing /). peal stages
// none of them (git would record each as a submodule, and a later command
// would run git in it, with the configuration the call gave it).
type EmbeddedError struct {
	Tree  string
	Paths []string
}

func (e *EmbeddedError) Error() string {
	return fmt.Sprintf("the task's tree holds a git repository that a call made (%s, with its own .git): peal commits no repository inside the tree and runs no git in one; "+
		"make it a submodule outside a run, or tell the agent not to run git init (or clone) in the tree", ListPaths(e.Paths, 3))
}

// embedded are the folders of the work tree (from its top, with a trailing
// /) that hold a git repository git does not track there, but those in
// peal's folders (exclude: addExcludes' pathspecs) and what git ignores. git
// lists such a folder, and nothing in it, among the untracked files.
func (g *Repo) embedded(ctx context.Context, exclude []string) ([]string, error) {
	args := append([]string{"ls-files", "-o", "-z", "--exclude-standard", "--"}, exclude...)
	out, err := g.Command(args...).Dir(g.top).Env("GIT_OPTIONAL_LOCKS=0").Run(ctx)
	if err != nil {
		return nil, err
	}
	var repos []string
	for _, p := range strings.Split(out, "\x00") {
		if strings.HasSuffix(p, "/") {
			repos = append(repos, p)
		}
	}
	return repos, nil
}

// NoteEmbedded notes the repositories of the work tree's own that git does
// not track (a clone the user keeps there), before any call: peal's commits
// leave them out, as ever, and never take them for a call's.
func (g *Repo) NoteEmbedded(ctx context.Context) error {
	exclude, err := g.addExcludes(ctx)
	if err != nil {
		return err
	}
	repos, err := g.embedded(ctx, exclude)
	if err != nil {
		return err
	}
	g.pinMu.Lock()
	defer g.pinMu.Unlock()
	g.users = repos
	return nil
}

// stageable are the pathspecs of `git add -A` in the work tree: exclude,
// and every repository embedded in it. A repository that is not the user's
// (NoteEmbedded) is an *EmbeddedError unless all: what the work tree holds
// is read (Snapshot), not a call's work committed.
func (g *Repo) stageable(ctx context.Context, exclude []string, all bool) ([]string, error) {
	repos, err := g.embedded(ctx, exclude)
	if err != nil {
		return nil, err
	}
	g.pinMu.Lock()
	users := g.users
	g.pinMu.Unlock()
	var made []string
	for _, p := range repos {
		if !all && !slices.Contains(users, p) {
			made = append(made, p)
		}
		exclude = append(exclude, ":(top,exclude,literal)"+strings.TrimSuffix(p, "/"))
	}
	if len(made) > 0 {
		return nil, &EmbeddedError{Tree: g.top, Paths: made}
	}
	return append(exclude, g.fixed...), nil
}

// Made are the repositories embedded in the work tree that are not the
// user's (NoteEmbedded): those a call made.
func (g *Repo) Made(ctx context.Context) ([]string, error) {
	exclude, err := g.addExcludes(ctx)
	if err != nil {
		return nil, err
	}
	_, err = g.stageable(ctx, exclude, false)
	var embedded *EmbeddedError
	if errors.As(err, &embedded) {
		return embedded.Paths, nil
	}
	return nil, err
}

// Leave makes peal's `git add -A` leave paths (slash form, from the top,
// taken literally) as the index holds them: in the run's worktree, the
// submodules it holds as checkouts of their own (whose .git file a call
// could rewrite to name a repository of its own), and in such a checkout,
// its own submodules and the entries linked into it from the work tree.
func (g *Repo) Leave(paths []string) {
	g.fixed = nil
	for _, p := range paths {
		g.fixed = append(g.fixed, ":(top,exclude,literal)"+strings.TrimSuffix(p, "/"))
	}
}

// Unembed takes the repository out of each of the folders paths (as an
// EmbeddedError names them) of the work tree: its .git is removed, and
// what the folder holds is files like any other. It is for a tree whose
// work is kept on a branch and then removed (the run's worktree).
func (g *Repo) Unembed(paths []string) error {
	for _, p := range paths {
		rel := filepath.FromSlash(strings.TrimSuffix(p, "/"))
		if !filepath.IsLocal(rel) {
			return fmt.Errorf("%q is no path inside the tree", p)
		}
		dir := filepath.Join(g.top, rel)
		// A folder, reached through no link (a call may have made one
		// since git listed it).
		if real, err := filepath.EvalSymlinks(dir); err != nil || real != dir {
			if r, terr := filepath.EvalSymlinks(g.top); terr != nil || real != filepath.Join(r, rel) {
				return fmt.Errorf("%s is no folder of the tree", p)
			}
		}
		if err := os.RemoveAll(filepath.Join(dir, ".git")); err != nil {
			return err
		}
	}
	return nil
}
