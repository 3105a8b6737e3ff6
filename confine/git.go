package confine

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Git is where a work tree's repository data lives.
type Git struct {
	WorkTree string
	// Dir is the work tree's own git folder: the repository's .git for
	// the main work tree, the worktree's admin folder
	// (.git/worktrees/<name>) for a linked worktree.
	Dir string
	// Common is the repository's .git, shared by all its worktrees.
	Common string
	Linked bool
}

// KeyGit names the repository's git folder in errors and denials.
const KeyGit = "the repository's .git"

// FindGit reads where the git data of workTree lives, from its .git (a
// folder, or a file "gitdir: <admin folder>" in a linked worktree, whose
// commondir file names the repository's .git).
func FindGit(workTree string) (Git, error) {
	g := Git{WorkTree: workTree, Dir: filepath.Join(workTree, ".git")}
	fi, err := os.Lstat(g.Dir)
	if err != nil {
		return Git{}, err
	}
	if fi.IsDir() {
		g.Common = g.Dir
		return g, nil
	}
	b, err := readSmallFile(g.Dir)
	if err != nil {
		return Git{}, err
	}
	dir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok {
		return Git{}, fmt.Errorf("confine: %s is neither a folder nor a gitdir file", g.Dir)
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(workTree, dir)
	}
	g.Dir, g.Linked = filepath.Clean(dir), true
	b, err = readSmallFile(filepath.Join(g.Dir, "commondir"))
	if err != nil {
		return Git{}, err
	}
	common := strings.TrimSpace(string(b))
	if !filepath.IsAbs(common) {
		common = filepath.Join(g.Dir, common)
	}
	g.Common = filepath.Clean(common)
	return g, nil
}

func readSmallFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if len(b) > 4096 {
		return nil, fmt.Errorf("confine: %s is too large for a git pointer", path)
	}
	return b, err
}

// Paths are the access's paths for the work tree's git data, on the rule
// this package recommends:
//
//   - The repository's .git is never written: not its hooks, config and
//     info (which run code in peal's own git), nor its refs, objects,
//     index and HEAD (peal stages and commits the task's work itself). An
//     agent's git status, diff, log and show work; git status cannot
//     refresh the index, which changes nothing it prints.
//   - stage (linked worktrees only) lets the agent's own git add work too:
//     its worktree's admin folder (index, HEAD, logs) and the objects
//     folder become writable. git writes through a lock file renamed over
//     the old one, so the rights must be the folder's (create, remove),
//     which a main work tree cannot have: its index lies directly in .git,
//     next to hooks and config. What an agent can then change, and what
//     peal's own git must not trust: the admin folder's commondir and
//     gitdir (peal's git names GIT_DIR and GIT_COMMON_DIR itself), its
//     HEAD (peal commits to the task's branch by name), config.worktree
//     (read only when the repository sets extensions.worktreeConfig), and
//     any object file (an object can be rewritten in place).
//
// The linked worktree's own .git file stays writable with the work tree:
// protecting it would narrow the work tree's top folder (nothing could be
// created there), and peal's own git never reads it (it names GIT_DIR).
func (g Git) Paths(stage bool) (write, protect []Path) {
	protect = Paths(KeyGit, g.Common)
	if !within(g.Dir, g.Common) {
		protect = append(protect, Path{Path: g.Dir, Key: KeyGit})
	}
	if stage && g.Linked && beneath(g.Dir, g.Common) {
		write = Paths(KeyGit, g.Dir, filepath.Join(g.Common, "objects"))
	}
	return write, protect
}
