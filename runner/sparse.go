package runner

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"peal/internal/safefs"
	"peal/phase"
)

// cone is the sparse set of the worktrees of parallel blocks
// (worktree_sparse_paths) in git's cone mode: folders, relative to the top
// of the work tree, in slash form. A worktree holds the files of these
// folders, the files directly in each of their parent folders, and the
// top-level files; an empty cone is the whole tree.
type cone []string

// coneOf is the cone of paths, relative to repo_path, which is the folder
// rel (relative to the top of its work tree) of the work tree.
func coneOf(rel string, paths []string) cone {
	var c cone
	for _, p := range paths {
		c = append(c, path.Join(filepath.ToSlash(rel), filepath.ToSlash(filepath.Clean(p))))
	}
	slices.Sort(c)
	return slices.Compact(c)
}

// holds reports whether the file p (relative to the top, slash form) is
// checked out in a worktree of the cone.
func (c cone) holds(p string) bool {
	if len(c) == 0 {
		return true
	}
	dir := path.Dir(p)
	for _, f := range c {
		if strings.HasPrefix(p, f+"/") || dir == "." || strings.HasPrefix(f, dir+"/") {
			return true
		}
	}
	return false
}

// within reports whether p lies in one of the cone's folders.
func (c cone) within(p string) bool {
	return slices.ContainsFunc(c, func(f string) bool { return strings.HasPrefix(p, f+"/") })
}

// setSparse makes the worktree at path, registered without its files, a
// sparse checkout of the cone: git keeps the settings in the worktree's
// own configuration (the repository gets extensions.worktreeConfig, as any
// `git sparse-checkout` in a worktree gives it), so that the work tree
// stays a full checkout and every git in the worktree (the agent's, stet's,
// peal's) sees the same set. The folders go on standard input, so that no
// name is read as an option.
func (ts *trees) setSparse(ctx context.Context, path string) error {
	spec := ts.git.Caller.Command("git", []string{"git", "-C", path, "sparse-checkout", "set", "--cone", "--sparse-index", "--stdin"}, ts.git.Timeout)
	spec.Stdin = []byte(strings.Join(ts.sparse, "\n") + "\n")
	if err := runGit(ctx, spec); err != nil {
		return fmt.Errorf("git sparse-checkout set in %s: %w", path, err)
	}
	return nil
}

// checkSparseGit refuses a git too old for sparse worktrees: before 2.37
// git does not notice a file written where a sparse checkout has none (it
// keeps the path marked as not checked out), so a task's write there would
// be lost without a word.
func (ts *trees) checkSparseGit(ctx context.Context) error {
	res, err := ts.git.Run(ctx, "version")
	if err != nil {
		return fmt.Errorf("git version: %w", err)
	}
	if !gitAtLeast(res.Stdout, 2, 37) {
		return fmt.Errorf("worktree_sparse_paths needs git 2.37 or later, and this is %s: update git, or unset worktree_sparse_paths", strings.TrimSpace(res.Stdout))
	}
	return nil
}

// gitAtLeast reports whether the output of git version names major.minor or
// a later version.
func gitAtLeast(version string, major, minor int) bool {
	var maj, min int
	if _, err := fmt.Sscanf(strings.TrimPrefix(strings.TrimSpace(version), "git version "), "%d.%d", &maj, &min); err != nil {
		return false
	}
	return maj > major || maj == major && min >= minor
}

// runGit runs a git command of the worktrees made by hand (with a standard
// input, or its output read as it comes); a non-zero exit is an error.
func runGit(ctx context.Context, spec phase.Spec) error {
	res, err := phase.Run(ctx, spec)
	if err != nil {
		return err
	}
	return phase.CheckExit(res)
}

// outside lists the files the commits of branch since base changed outside
// the cone: what the task wrote beyond worktree_sparse_paths, which its
// commits hold as they hold the rest of its work.
func (ts *trees) outside(ctx context.Context, base, branch string) []string {
	if len(ts.sparse) == 0 {
		return nil
	}
	res, err := ts.git.Run(ctx, "diff", "--name-only", "-z", "--no-renames", base, branch, "--")
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range strings.Split(res.Stdout, "\x00") {
		if p != "" && !ts.sparse.holds(p) {
			out = append(out, p)
		}
	}
	return out
}

// sparseFolders are the folders of the cone a worktree's git folder holds
// (its info/sparse-checkout, in cone mode), read without running git; none
// for a full checkout. Cone mode writes, for each folder, its own pattern
// and its parents' followed by a negation of their subfolders: a folder
// whose subfolders are not negated is one of the set.
func sparseFolders(gitdir string) []string {
	data, err := safefs.ReadFile(filepath.Join(gitdir, "info", "sparse-checkout"), 1<<20)
	if err != nil {
		return nil
	}
	var folders []string
	negated := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if p, ok := strings.CutPrefix(line, "!/"); ok {
			negated[strings.TrimSuffix(p, "*/")] = true
		} else if p, ok := strings.CutPrefix(line, "/"); ok && p != "*" && strings.HasSuffix(p, "/") {
			folders = append(folders, p)
		}
	}
	var out []string
	for _, f := range folders {
		if !negated[f] {
			// Cone mode escapes the characters of a pattern with \.
			out = append(out, strings.TrimSuffix(unescapePattern(f), "/"))
		}
	}
	return out
}

// unescapePattern drops the backslashes that escape the characters of a
// pattern of git's ignore syntax.
func unescapePattern(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' && i+1 < len(p) {
			i++
		}
		b.WriteByte(p[i])
	}
	return b.String()
}
