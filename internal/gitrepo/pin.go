package gitrepo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"peal/internal/safefs"
)

// Where a Repo's git data is. A work tree's .git, or a .git in any folder
// on the way up to it, is something a call may write in its tree: a git
// that looked for its folder there would read the configuration (hooks,
// fsmonitor, textconv) of a folder a call made. So a Repo resolves, once,
// before its first command, its git folder, the repository's and the folder
// of its hooks, and names the first two in every command's environment
// (GIT_DIR, GIT_WORK_TREE, GIT_COMMON_DIR): git never looks for them. The
// work tree's Repo resolves them through git, at the start of a run, before
// any agent call (Pin); the Repo of a worktree (In) finds them in the
// repository's own records of its worktrees, which no call can write.

// folders are the git data of a Repo, resolved once.
type folders struct {
	gitDir string // the work tree's git folder: .git, or a worktree's admin folder
	common string // the repository's .git, shared by its worktrees
	top    string // the top of the work tree, as git names it
	hooks  string // the folder of its hooks (core.hooksPath honoured)
	// hooksIn says where hooks lies: "common" (in the repository's
	// .git, shared), "tree" (core.hooksPath relative: in each work tree,
	// at hooksRel), or "" (a folder of its own, the same for every tree).
	hooksIn  string
	hooksRel string
}

// env names the folders in a command's environment.
func (f *folders) env() []string {
	env := []string{"GIT_DIR=" + f.gitDir, "GIT_WORK_TREE=" + f.top}
	if f.common != f.gitDir {
		env = append(env, "GIT_COMMON_DIR="+f.common)
	}
	return env
}

// Pin resolves, through git, where the work tree's git data is (see
// folders), so that no later command looks for it in the tree. A run pins
// its work tree's Repo at its start, before any agent call; a Repo that was
// not pinned resolves its folders the same way before its first command.
func (g *Repo) Pin(ctx context.Context) error {
	_, err := g.resolve(ctx)
	return err
}

// resolve is the Repo's folders, resolved on the first call.
func (g *Repo) resolve(ctx context.Context) (*folders, error) {
	g.pinMu.Lock()
	defer g.pinMu.Unlock()
	if g.where != nil {
		return g.where, nil
	}
	c := &Cmd{g: g, args: []string{"rev-parse", "--path-format=absolute", "--absolute-git-dir", "--git-common-dir", "--show-toplevel", "--git-path", "hooks"},
		dir: g.dir, unpinned: true}
	out, err := c.Run(ctx)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 4 {
		return nil, fmt.Errorf("git rev-parse said %q: want the git folder, the repository's, the top of the work tree and the hooks folder", out)
	}
	f := &folders{gitDir: filepath.Clean(lines[0]), common: filepath.Clean(lines[1]), top: filepath.Clean(lines[2]), hooks: filepath.Clean(lines[3])}
	switch {
	case safefs.Within(f.hooks, f.common):
		f.hooksIn = "common"
	case safefs.Within(f.hooks, f.top):
		f.hooksIn, f.hooksRel = "tree", relTo(f.top, f.hooks)
	}
	g.where = f
	return f, nil
}

// relTo is path relative to dir, which holds it.
func relTo(dir, path string) string {
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return "."
	}
	return rel
}

// derive is where the git data of the worktree at top lies, from the
// work tree's (parent's) folders: its admin folder is the one of the
// repository's records of worktrees (.git/worktrees/*) whose gitdir file
// names top's .git, written by git when it made the worktree; no call can
// write them. When none does, the admin folder is the one git would have
// named after top, which then holds nothing: git refuses to run there
// rather than look for a .git in the tree.
func derive(parent *folders, top string) *folders {
	f := &folders{common: parent.common, top: top, hooksIn: parent.hooksIn, hooksRel: parent.hooksRel, hooks: parent.hooks}
	if f.hooksIn == "tree" {
		f.hooks = filepath.Join(top, f.hooksRel)
	}
	if top == parent.top || safefs.Same(top, parent.top) {
		f.gitDir = parent.gitDir
		return f
	}
	f.gitDir = filepath.Join(parent.common, "worktrees", filepath.Base(top))
	want := map[string]bool{filepath.Join(top, ".git"): true}
	if real, err := filepath.EvalSymlinks(top); err == nil {
		want[filepath.Join(real, ".git")] = true
	}
	admins := filepath.Join(parent.common, "worktrees")
	entries, _ := os.ReadDir(admins)
	for _, e := range entries {
		back, err := safefs.ReadFile(filepath.Join(admins, e.Name(), "gitdir"), 4096)
		if err == nil && want[filepath.Clean(strings.TrimSpace(string(back)))] {
			f.gitDir = filepath.Join(admins, e.Name())
			break
		}
	}
	return f
}

// GitDir is the work tree's git folder (.git, or a worktree's admin
// folder), and Common the repository's .git; both "" before the Repo is
// resolved (Pin).
func (g *Repo) GitDir() (gitDir, common string) {
	g.pinMu.Lock()
	defer g.pinMu.Unlock()
	if g.where == nil {
		return "", ""
	}
	return g.where.gitDir, g.where.common
}

// HooksDir is the folder of the repository's hooks as git would run them
// in this work tree (core.hooksPath honoured); "" before the Repo is
// resolved (Pin).
func (g *Repo) HooksDir() string {
	g.pinMu.Lock()
	defer g.pinMu.Unlock()
	if g.where == nil {
		return ""
	}
	return g.where.hooks
}
