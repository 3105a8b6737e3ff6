package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"peal/internal/safefs"
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
	What string // "commit" or "merge"
	Err  error
}

func (e *HookError) Error() string {
	return fmt.Sprintf("the repository's %s hook (%s) refused peal's %s: %v", e.Hook, e.Path, e.What, e.Err)
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

// hookRoom is where the hooks of one commit or merge may write beyond
// their work tree: a folder of their own in Hooks.Temp, holding the
// commit's message (prepare-commit-msg and commit-msg may rewrite it, some
// through a file they rename over it) and a copy of the work tree's index
// (a hook's git add, or the git write-tree of the pre-commit framework,
// writes the index through a lock file beside it: the work tree's own lies
// in its git folder, beside its configuration, which no hook may write).
// What a hook staged in the copy is the work tree's once it ends.
type hookRoom struct {
	g      *Repo
	f      *folders
	dir    string
	what   string // "commit" or "merge"
	msg    string // the message file
	index  string // the copy of the index
	before []byte // the index as it was copied
}

// room makes the hooks' room of a commit or merge (what) whose message is
// msg.
func (g *Repo) room(ctx context.Context, what, msg string) (*hookRoom, error) {
	f, err := g.resolve(ctx)
	if err != nil {
		return nil, err
	}
	root := g.hooks.Temp
	if root != "" {
		if err := os.MkdirAll(root, 0o700); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp(root, "hooks-")
	if err != nil {
		return nil, err
	}
	h := &hookRoom{g: g, f: f, dir: dir, what: what, msg: filepath.Join(dir, "COMMIT_EDITMSG"), index: filepath.Join(dir, "index")}
	if err := h.fill(msg); err != nil {
		h.close()
		return nil, safefs.Full(err, dir)
	}
	return h, nil
}

// fill writes the room's message file (msg) and its copy of the index.
func (h *hookRoom) fill(msg string) error {
	room, err := safefs.OpenDir(h.dir, false)
	if err != nil {
		return err
	}
	defer room.Close()
	if err := room.WriteFile(filepath.Base(h.msg), []byte(msg+"\n")); err != nil {
		return err
	}
	if h.before, err = os.ReadFile(filepath.Join(h.f.gitDir, "index")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return room.WriteFile(filepath.Base(h.index), h.before)
}

// close removes the room.
func (h *hookRoom) close() { os.RemoveAll(h.dir) }

// write are the folders a hook of the room may write beyond its work tree:
// the room, and the git data a commit's own git writes that holds nothing
// git runs (objects, refs, logs); never the hooks, the configuration or
// info.
func (h *hookRoom) write() []string {
	return []string{h.dir, filepath.Join(h.f.common, "objects"), filepath.Join(h.f.common, "refs"), filepath.Join(h.f.common, "logs")}
}

// back makes what the hook staged in the copy of the index the work
// tree's: the copy is written beside the work tree's index and renamed
// over it, as git writes an index (safefs: atomically, never through a
// link).
func (h *hookRoom) back() error {
	now, err := os.ReadFile(h.index)
	if err != nil || bytes.Equal(now, h.before) {
		return nil // a hook that removed the copy staged nothing
	}
	gitDir, err := safefs.OpenDir(h.f.gitDir, false)
	if err != nil {
		return err
	}
	defer gitDir.Close()
	if err := gitDir.WriteFile("index", now); err != nil {
		return safefs.Full(err, h.f.gitDir)
	}
	h.before = now
	return nil
}

// hook runs the hook name with args as git would (at the top of the work
// tree, with GIT_DIR, GIT_INDEX_FILE and GIT_EDITOR set), confined by the
// run, with the room's index and folders. A hook that is not there is no
// error; one that exits non-zero, or outlasts the timeout, is a
// *HookError.
func (h *hookRoom) hook(ctx context.Context, name string, args ...string) error {
	g := h.g
	path, err := g.hookPath(ctx, name)
	if err != nil || path == "" {
		return err
	}
	spec := g.caller.Command("hook", append([]string{path}, args...), g.timeout)
	spec.Dir = g.top
	spec.Env = append(append([]string{}, spec.Env...), "GIT_DIR="+h.f.gitDir, "GIT_INDEX_FILE="+h.index, "GIT_EDITOR=:", "GIT_PREFIX=")
	if h.f.common != h.f.gitDir {
		spec.Env = append(spec.Env, "GIT_COMMON_DIR="+h.f.common)
	}
	spec.Env = append(spec.Env, g.ident...)
	if g.hooks.Confine != nil {
		g.hooks.Confine(&spec, h.write())
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
		return &HookError{Hook: name, Path: path, What: h.what, Err: err}
	}
	if err := h.back(); err != nil {
		return fmt.Errorf("taking what the %s hook staged into the index: %w", name, err)
	}
	return nil
}

// afterHook runs a hook whose exit status git ignores (post-commit,
// post-merge): a failure is a warning.
func (g *Repo) afterHook(ctx context.Context, name string, args ...string) {
	if p, err := g.hookPath(ctx, name); err != nil || p == "" {
		return
	}
	h, err := g.room(ctx, map[bool]string{true: "merge", false: "commit"}[name == "post-merge"], "")
	if err == nil {
		defer h.close()
		err = h.hook(ctx, name, args...)
	}
	if err != nil {
		g.log.Warn("the repository's "+name+" hook failed (git would ignore it too)", "err", err)
	}
}

// commitHooked concludes a commit (or a merge stopped before its commit:
// source "merge") whose message is msg, with the hooks git would run for
// it: pre-commit (pre-merge-commit for a merge), prepare-commit-msg,
// commit-msg, then the commit itself, whose message the hooks may have
// rewritten, and post-commit (post-merge for a merge).
func (g *Repo) commitHooked(ctx context.Context, msg, source string) error {
	before, what := "pre-commit", "commit"
	if source == "merge" {
		before, what = "pre-merge-commit", "merge"
	}
	h, err := g.room(ctx, what, msg)
	if err != nil {
		return fmt.Errorf("preparing the repository's hooks: %w", err)
	}
	defer h.close()
	if err := h.hook(ctx, before); err != nil {
		return err
	}
	if err := h.hook(ctx, "prepare-commit-msg", h.msg, source); err != nil {
		return err
	}
	if err := h.hook(ctx, "commit-msg", h.msg); err != nil {
		return err
	}
	// git's cleanup of a message given with -m: blank lines and trailing
	// space, comments kept.
	if _, err := g.Command("commit", "-q", "--cleanup=whitespace", "-F", h.msg).Run(ctx); err != nil {
		return err
	}
	after := "post-commit"
	if source == "merge" {
		after = "post-merge"
	}
	args := map[string][]string{"post-merge": {"0"}}[after]
	if err := h.hook(ctx, after, args...); err != nil {
		g.log.Warn("the repository's "+after+" hook failed (git would ignore it too)", "err", err)
	}
	return nil
}
