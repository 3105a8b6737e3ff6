package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"peal/phase"
)

// The repository's hooks. git runs none of peal's commands' hooks (every
// command sets core.hooksPath to nothing): a hook, or what it runs (a
// framework's environments in ~/.cache, a script of the tree under
// core.hooksPath = .husky), may be something a call wrote, and git would
// run it with peal's whole environment. peal runs itself, in git's order
// and with git's arguments, the hooks its commits and merges would have
// triggered, each a call of its own that the run confines (Hooks.Confine):
// a commit's pre-commit, prepare-commit-msg, commit-msg and post-commit; a
// merge's pre-merge-commit, prepare-commit-msg, commit-msg and post-merge;
// a fast-forward's post-merge. The others (reference-transaction,
// post-index-change, pre-auto-gc, post-checkout, post-rewrite) do not run
// for peal's bookkeeping. A repository without hooks costs nothing.

// Hooks are how a Repo runs the repository's hooks.
type Hooks struct {
	// Confine, when set, confines a hook before it starts (its Spec's
	// Confine and temporary folder); write are folders it may write
	// besides what a call in its folder may (the message file's).
	Confine func(spec *phase.Spec, write []string)
	// Temp is where a commit's message file is made for its hooks ("":
	// the system's temporary folder).
	Temp string
}

// RunHooks makes g and the Repos made from it (In) run the repository's
// hooks under h.
func (g *Repo) RunHooks(h Hooks) { g.hooks = h }

// HookError: a hook refused peal's commit or merge (it exited non-zero, or
// outlasted its timeout).
type HookError struct {
	Hook string
	Path string
	Err  error
}

func (e *HookError) Error() string {
	return fmt.Sprintf("the repository's %s hook (%s) refused peal's commit: %v", e.Hook, e.Path, e.Err)
}

func (e *HookError) Unwrap() error { return e.Err }

// hookPath is the hook name of the work tree, when it is there and git
// would run it (a file it may execute); "" otherwise.
func (g *Repo) hookPath(ctx context.Context, name string) (string, error) {
	f, err := g.resolve(ctx)
	if err != nil {
		return "", err
	}
	path := filepath.Join(f.hooks, name)
	info, err := os.Stat(path)
	if err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
		return "", nil
	}
	return path, nil
}

// hasHooks reports whether any of the hooks names is there.
func (g *Repo) hasHooks(ctx context.Context, names ...string) (bool, error) {
	for _, n := range names {
		p, err := g.hookPath(ctx, n)
		if err != nil || p != "" {
			return p != "", err
		}
	}
	return false, nil
}

// hook runs the hook name with args as git would (at the top of the work
// tree, with GIT_DIR, GIT_INDEX_FILE and GIT_EDITOR set), confined by the
// run; write are folders it may write besides. A hook that is not there is
// no error; one that exits non-zero, or outlasts the timeout, is a
// *HookError.
func (g *Repo) hook(ctx context.Context, name string, write []string, args ...string) error {
	path, err := g.hookPath(ctx, name)
	if err != nil || path == "" {
		return err
	}
	f, _ := g.resolve(ctx)
	spec := g.caller.Command("hook", append([]string{path}, args...), g.timeout)
	spec.Dir = g.top
	spec.Env = append(append([]string{}, spec.Env...), "GIT_DIR="+f.gitDir, "GIT_INDEX_FILE="+filepath.Join(f.gitDir, "index"), "GIT_EDITOR=:", "GIT_PREFIX=")
	spec.Env = append(spec.Env, g.ident...)
	if g.hooks.Confine != nil {
		g.hooks.Confine(&spec, write)
	}
	g.log.Info("running the repository's hook", "hook", name, "dir", g.top)
	res, err := phase.Run(ctx, spec)
	if err == nil {
		err = phase.CheckExit(res)
	}
	if err != nil {
		var interrupted *phase.InterruptedError
		if errors.As(err, &interrupted) {
			return err
		}
		return &HookError{Hook: name, Path: path, Err: err}
	}
	return nil
}

// afterHook runs a hook whose exit status git ignores (post-commit,
// post-merge): a failure is a warning.
func (g *Repo) afterHook(ctx context.Context, name string, args ...string) {
	if err := g.hook(ctx, name, nil, args...); err != nil {
		g.log.Warn("the repository's "+name+" hook failed (git would ignore it too)", "err", err)
	}
}

// messageFile makes a folder of its own in the hooks' temporary folder
// holding msg as COMMIT_EDITMSG (prepare-commit-msg and commit-msg may
// rewrite it, some through a file they rename over it), and returns the
// file and a function that removes the folder.
func (g *Repo) messageFile(msg string) (file string, done func(), err error) {
	root := g.hooks.Temp
	if root != "" {
		if err := os.MkdirAll(root, 0o700); err != nil {
			return "", nil, err
		}
	}
	dir, err := os.MkdirTemp(root, "commit-msg-")
	if err != nil {
		return "", nil, err
	}
	file = filepath.Join(dir, "COMMIT_EDITMSG")
	if err := os.WriteFile(file, []byte(msg+"\n"), 0o644); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return file, func() { os.RemoveAll(dir) }, nil
}

// commitHooked concludes a commit (or a merge stopped before its commit:
// source "merge") whose message is msg, with the hooks git would run for
// it: pre-commit (pre-merge-commit for a merge), prepare-commit-msg,
// commit-msg, then the commit itself, whose message the hooks may have
// rewritten, and post-commit (post-merge for a merge).
func (g *Repo) commitHooked(ctx context.Context, msg, source string) error {
	before := "pre-commit"
	if source == "merge" {
		before = "pre-merge-commit"
	}
	if err := g.hook(ctx, before, nil); err != nil {
		return err
	}
	file, done, err := g.messageFile(msg)
	if err != nil {
		return fmt.Errorf("writing the commit message for the repository's hooks: %w", err)
	}
	defer done()
	write := []string{filepath.Dir(file)}
	if err := g.hook(ctx, "prepare-commit-msg", write, file, source); err != nil {
		return err
	}
	if err := g.hook(ctx, "commit-msg", write, file); err != nil {
		return err
	}
	// git's cleanup of a message given with -m: blank lines and trailing
	// space, comments kept.
	if _, err := g.Command("commit", "-q", "--cleanup=whitespace", "-F", file).Run(ctx); err != nil {
		return err
	}
	if source == "merge" {
		g.afterHook(ctx, "post-merge", "0")
	} else {
		g.afterHook(ctx, "post-commit")
	}
	return nil
}
