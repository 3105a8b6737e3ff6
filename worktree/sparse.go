package worktree

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"peal/internal/gitrepo"
	"peal/internal/safefs"
)

// cone is the sparse set of the worktrees (worktree_sparse_paths) in git's
// cone mode: folders, relative to the top of the work tree, in slash form.
// A worktree holds the files of these folders, the files directly in each
// of their parent folders, and the top-level files; an empty cone is the
// whole tree.
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

// CheckGit refuses a git too old for sparse worktrees: before 2.37 git does
// not notice a file written where a sparse checkout has none (it keeps the
// path marked as not checked out), so a task's write there would be lost
// without a word.
func (s *Set) CheckGit(ctx context.Context) error {
	v, err := s.git.Version(ctx)
	if err != nil {
		return err
	}
	if !gitrepo.AtLeast(v, 2, 37) {
		return fmt.Errorf("worktree_sparse_paths needs git 2.37 or later, and this is %s: update git, or unset worktree_sparse_paths", v)
	}
	return nil
}

// Outside lists the files the commits of branch since base changed outside
// the cone: what the task wrote beyond worktree_sparse_paths, which its
// commits hold as they hold the rest of its work.
func (s *Set) Outside(ctx context.Context, base, branch string) ([]string, error) {
	if len(s.sparse) == 0 {
		return nil, nil
	}
	files, err := s.git.ChangedFiles(ctx, base, branch)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range files {
		if !s.sparse.holds(p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// Status is what `peal status` shows of a worktree that exists now.
type Status struct {
	Path, Branch string
	// Sparse are the folders it checks out (git's cone mode, relative to
	// the top of the work tree); none: the whole tree.
	Sparse []string
}

// Inspect is the worktree of task in stateDir when there is one now (the
// task runs there, or a run that died left it), read from git's files
// without running git.
func Inspect(stateDir string, task int) (Status, bool) { return inspectAt(treePath(stateDir, task)) }

// InspectHome is the run's worktree of the runs on stateDir (home.go) when
// there is one now, read as Inspect reads a task's.
func InspectHome(stateDir string) (Status, bool) {
	return inspectAt(filepath.Join(stateDir, Folder, homeName))
}

// inspectAt is the worktree at p, read from git's files.
func inspectAt(p string) (Status, bool) {
	link, err := safefs.ReadFile(filepath.Join(p, ".git"), 4096)
	if err != nil {
		return Status{}, false
	}
	st := Status{Path: p}
	if gitdir, ok := strings.CutPrefix(strings.TrimSpace(string(link)), "gitdir: "); ok {
		if !filepath.IsAbs(gitdir) {
			gitdir = filepath.Join(p, gitdir) // git's worktree.useRelativePaths
		}
		if head, err := safefs.ReadFile(filepath.Join(gitdir, "HEAD"), 4096); err == nil {
			st.Branch = strings.TrimPrefix(strings.TrimSpace(string(head)), "ref: refs/heads/")
		}
		st.Sparse = sparseFolders(gitdir)
	}
	return st, true
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

// escapePattern escapes the characters of p that git's ignore syntax would
// read as a pattern, so that it matches p alone.
func escapePattern(p string) string {
	var b strings.Builder
	for i, c := range p {
		if strings.ContainsRune(`\*?[`, c) || (c == ' ' && i == len(p)-1) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
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
