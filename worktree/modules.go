package worktree

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"peal/internal/gitrepo"
	"peal/internal/safefs"
)

// Submodules in the home worktree. A submodule the work tree has checked
// out is checked out in the home worktree too, as a worktree of the
// submodule's own repository (its git data stays where the work tree's
// checkout has it, in the repository's .git, which no call may write),
// detached at the commit the work tree's checkout is at, with what that
// checkout holds uncommitted, and the entries git ignores there linked
// from it: a task finds in the submodule's folder what the user has there,
// its submodules checked out the same way. What a task changes in a
// submodule's files comes back to the work tree's checkout as files,
// uncommitted, as the task would have left them there: nothing is ever
// committed in a submodule (a call cannot write its git data, and peal's
// commits leave its gitlink as the index holds it). A change the work tree
// cannot take fails the task as any other, and is kept on a branch of the
// submodule's repository. A submodule the work tree has not checked out is
// an empty folder in both.

// module is a submodule the work tree has checked out, as the home
// worktree holds it.
type module struct {
	path string        // slash form, from the top of the work tree
	main *gitrepo.Repo // its checkout in the work tree
	home *gitrepo.Repo // its checkout in the home worktree
	// inner are the paths of its own submodules, from its top; links are
	// the entries of it linked into the home worktree, from its top (a
	// folder's with a trailing /).
	inner, links []string
}

// modulesOf are the submodules the work tree of git has checked out, and
// theirs, each after the one that holds it; prefix is where git's work tree
// lies in the work tree's (slash form, "" for the work tree itself).
func modulesOf(ctx context.Context, git *gitrepo.Repo, prefix string) ([]*module, error) {
	subs, err := git.Submodules(ctx)
	if err != nil {
		return nil, err
	}
	var out []*module
	for _, s := range subs {
		m := &module{path: path.Join(prefix, s.Path), main: git.Module(s)}
		inner, err := modulesOf(ctx, m.main, m.path)
		if err != nil {
			return nil, err
		}
		m.inner = directChildren(m.path, inner)
		out = append(append(out, m), inner...)
	}
	return out, nil
}

// directChildren are the paths (from the top of parent) of the modules
// that lie directly in parent, no other module between.
func directChildren(parent string, mods []*module) []string {
	var out []string
	for _, m := range mods {
		rel := strings.TrimPrefix(m.path, parent+"/")
		if !slices.ContainsFunc(mods, func(o *module) bool { return o != m && strings.HasPrefix(m.path, o.path+"/") }) {
			out = append(out, rel)
		}
	}
	return out
}

// ownModules are the paths of the submodules that lie directly in the work
// tree, for the home worktree's commits to leave.
func ownModules(mods []*module) []string {
	var out []string
	for _, m := range mods {
		if !slices.ContainsFunc(mods, func(o *module) bool { return strings.HasPrefix(m.path, o.path+"/") }) {
			out = append(out, m.path)
		}
	}
	return out
}

// openModules finds the work tree's submodules and checks each out in the
// home worktree where it is not yet (a worktree of its repository,
// detached at the commit of the work tree's checkout); one the home
// worktree no longer has is removed. It leaves what a checkout there holds
// as it is: what the work tree's checkout holds uncommitted is mirrored by
// mirrorModules.
func (m *Mirror) openModules(ctx context.Context) error {
	mods, err := modulesOf(ctx, m.main, "")
	if err != nil {
		return fmt.Errorf("listing the submodules of the work tree: %w", err)
	}
	for _, old := range m.modules {
		if !slices.ContainsFunc(mods, func(n *module) bool { return n.path == old.path }) {
			m.dropModule(ctx, old)
		}
	}
	for _, mod := range mods {
		at := filepath.Join(m.Tree.Path, filepath.FromSlash(mod.path))
		mod.home = mod.main.At(at)
		if mod.home.Registered() {
			// Its .git file is a call's to rewrite: peal's git never reads
			// it, the next task's own git does.
			gitDir, _ := mod.home.GitDir()
			pointer := "gitdir: " + gitDir + "\n"
			if now, err := safefs.ReadFile(filepath.Join(at, ".git"), 4096); err != nil || string(now) != pointer {
				if err := safefs.WriteFile(filepath.Join(at, ".git"), []byte(pointer)); err != nil {
					return fmt.Errorf("the submodule %s in the run's worktree: %w", mod.path, err)
				}
			}
			continue
		}
		if err := m.clearModule(at); err != nil {
			return err
		}
		head, err := mod.main.HeadOrNone(ctx)
		if err != nil {
			return err
		}
		if err := mod.main.AddDetached(ctx, at, head); err != nil {
			return fmt.Errorf("checking the submodule %s out in the run's worktree: %w", mod.path, err)
		}
		mod.home = mod.main.At(at)
		if _, err := mod.home.Command("read-tree", "--reset", "-u", "HEAD").Run(ctx); err != nil {
			return fmt.Errorf("checking the submodule %s out in the run's worktree: %w", mod.path, err)
		}
	}
	m.modules = mods
	m.leaveModules()
	return nil
}

// leaveModules tells the home worktree's gits what their commits leave as
// the index holds it: each submodule's gitlink, and in a submodule, its
// own submodules and the entries linked into it.
func (m *Mirror) leaveModules() {
	if m.git != nil {
		m.git.Leave(ownModules(m.modules))
	}
	for _, mod := range m.modules {
		mod.links = nil
		for _, l := range m.Linked {
			if owner := m.moduleOf(strings.TrimSuffix(l, "/")); owner == mod {
				mod.links = append(mod.links, strings.TrimPrefix(l, mod.path+"/"))
			}
		}
		mod.home.Leave(append(slices.Clone(mod.inner), mod.links...))
	}
}

// moduleOf is the innermost submodule that holds p (slash form, from the
// top); nil when none does.
func (m *Mirror) moduleOf(p string) *module {
	var in *module
	for _, mod := range m.modules {
		if strings.HasPrefix(p, mod.path+"/") && (in == nil || len(mod.path) > len(in.path)) {
			in = mod
		}
	}
	return in
}

// clearModule readies the folder of a submodule's checkout in the home
// worktree: an empty folder, as the home worktree's checkout leaves it, or
// none. What an earlier run left there without its git (it died while
// making it) is moved aside, never lost.
func (m *Mirror) clearModule(at string) error {
	entries, err := os.ReadDir(at)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(entries) == 0) {
		return nil
	}
	aside := filepath.Join(m.set.root, asideName, time.Now().UTC().Format("20060102T150405.000000000Z"))
	if err := os.MkdirAll(aside, 0o700); err != nil {
		return err
	}
	m.set.log.Warn("a submodule's folder in the run's worktree held files without its git: they are kept aside", "folder", at, "kept", aside)
	return os.Rename(at, filepath.Join(aside, filepath.Base(at)))
}

// dropModule removes a submodule's checkout from the home worktree, and
// its repository's record of it.
func (m *Mirror) dropModule(ctx context.Context, mod *module) {
	if mod.home == nil {
		return
	}
	if _, err := mod.main.Command("worktree", "remove", "--force", "--force", mod.home.Top()).Run(ctx); err != nil {
		m.set.log.Warn("could not remove a submodule's checkout from the run's worktree", "submodule", mod.path, "err", err)
	}
}

// movedModules are the snapshot of the work tree, whose HEAD is head and
// which git status says holds nothing uncommitted, and its submodules (by
// the paths the snapshot changes), when a checkout of one is at another
// commit than the one recorded; none, and head, otherwise.
func (m *Mirror) movedModules(ctx context.Context, head string) ([]string, string, error) {
	tree, err := m.snapshot(ctx, m.main)
	if err != nil {
		return nil, "", err
	}
	changed, err := m.main.ChangedFiles(ctx, head, tree)
	if err != nil || len(changed) == 0 {
		return nil, head, err
	}
	return changed, tree, nil
}

// mirrorModules makes each submodule's checkout in the home worktree hold
// what the work tree's holds: its HEAD and its uncommitted changes (in its
// index, as the home worktree's own: what the work tree took), the entries
// linked into it kept.
func (m *Mirror) mirrorModules(ctx context.Context) error {
	for _, mod := range m.modules {
		head, err := mod.main.HeadOrNone(ctx)
		if err != nil {
			return err
		}
		tree, err := m.snapshot(ctx, mod.main)
		if err != nil {
			return err
		}
		if err := mod.home.Checkout(ctx, head, tree, mod.links); err != nil {
			return fmt.Errorf("the submodule %s: %w", mod.path, err)
		}
	}
	return nil
}

// moduleWork is what the tasks did in the submodules' checkouts since
// their work last came back: the changes of their files (paths from the
// top of the work tree), the entries git ignores there (as Status lists
// them, from the top), and the submodules changed. A repository a call
// made in one is an *EmbeddedError.
type moduleWork struct {
	changes []gitrepo.Change
	ignored []string
	changed []*module
}

// moduleWork reads what the tasks did in the submodules' checkouts.
func (m *Mirror) moduleWork(ctx context.Context) (moduleWork, error) {
	var w moduleWork
	for _, mod := range m.modules {
		st, err := mod.home.Status(ctx)
		if err != nil {
			return w, fmt.Errorf("the submodule %s in the run's worktree: %w", mod.path, err)
		}
		if len(st.Embedded) > 0 {
			return w, &gitrepo.EmbeddedError{Tree: mod.home.Top(), Paths: prefixed(mod.path, st.Embedded)}
		}
		changes := mod.changes(st)
		for _, c := range changes {
			c.Path = mod.path + "/" + c.Path
			w.changes = append(w.changes, c)
		}
		w.ignored = append(w.ignored, prefixed(mod.path, st.Ignored)...)
		if len(changes) > 0 {
			w.changed = append(w.changed, mod)
		}
	}
	return w, nil
}

// changes are the changes of st (the Status of the submodule's checkout in
// the home worktree) that are a task's: not the links of the work tree's
// entries, nor its own submodules.
func (mod *module) changes(st gitrepo.Status) []gitrepo.Change {
	return slices.DeleteFunc(slices.Clone(st.Unstaged), func(c gitrepo.Change) bool {
		return slices.Contains(mod.links, c.Path) || slices.Contains(mod.links, c.Path+"/") || inPaths(c.Path, mod.inner)
	})
}

// inPaths reports whether p is one of paths or lies in one.
func inPaths(p string, paths []string) bool {
	return slices.ContainsFunc(paths, func(q string) bool { return p == q || strings.HasPrefix(p, q+"/") })
}

// prefixed are paths (from a submodule's top) from the top of the work
// tree.
func prefixed(prefix string, paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = prefix + "/" + p
	}
	return out
}

// noteModules makes each changed submodule's checkout in the home worktree
// note, in its index, that the work tree took what it holds.
func noteModules(ctx context.Context, changed []*module) error {
	for _, mod := range changed {
		if _, err := mod.home.State(ctx); err != nil {
			return fmt.Errorf("the submodule %s in the run's worktree: %w", mod.path, err)
		}
	}
	return nil
}

// keepModules keeps what the tasks did in the submodules' checkouts, that
// the work tree did not take, on a branch of each one's repository (a
// repository a call made there kept as its files). It returns them, as a
// line names them ("" when none).
func (m *Mirror) keepModules(ctx context.Context) (string, error) {
	var kept []string
	for _, mod := range m.modules {
		if mod.home == nil || !mod.home.Registered() {
			continue
		}
		st, err := mod.home.Status(ctx)
		if err != nil {
			return "", fmt.Errorf("the submodule %s in the run's worktree: %w", mod.path, err)
		}
		if err := mod.home.Unembed(st.Embedded); err != nil {
			return "", err
		}
		if len(mod.changes(st)) == 0 && len(st.Embedded) == 0 {
			continue
		}
		commit, err := mod.home.KeepOn(ctx, "peal: the work of the run's worktree in this submodule that the work tree could not take")
		if err == nil {
			name := keptName(-1, commit[:min(8, len(commit))])
			if err = mod.main.SetBranch(ctx, name, commit); err == nil {
				kept = append(kept, "branch "+name+" of the submodule "+mod.path)
			}
		}
		if err != nil {
			return "", fmt.Errorf("keeping the work of the submodule %s on a branch: %w", mod.path, err)
		}
	}
	return strings.Join(kept, ", "), nil
}

// forgetModules drops the submodules' repositories' records of their
// checkouts in the home worktree, once it is removed.
func (m *Mirror) forgetModules(ctx context.Context) {
	for _, mod := range m.modules {
		if err := mod.main.PruneWorktrees(ctx); err != nil {
			m.set.log.Warn("could not drop a submodule's record of its checkout in the run's worktree", "submodule", mod.path, "err", err)
		}
	}
	m.modules = nil
}
