package gitrepo

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// AddWorktree registers a worktree at path on branch, made (or reset) at
// base, without checking its files out (see Populate).
func (g *Repo) AddWorktree(ctx context.Context, path, branch, base string) error {
	_, err := g.Command("worktree", "add", "-q", "--no-checkout", "-B", branch, path, base).Run(ctx)
	return err
}

// Populate checks out the files of the worktree at path from its index's
// commit (HEAD), touching only that worktree.
func (g *Repo) Populate(ctx context.Context, path string) error {
	_, err := g.At(path).Command("read-tree", "--reset", "-u", "HEAD").Run(ctx)
	return err
}

// RemoveWorktree removes the worktree at path, its files and git's record
// of it, even when it holds changes or is locked.
func (g *Repo) RemoveWorktree(ctx context.Context, path string) error {
	_, err := g.Command("worktree", "remove", "--force", "--force", path).Run(ctx)
	return err
}

// PruneWorktrees drops git's records of the worktrees whose folders are
// gone.
func (g *Repo) PruneWorktrees(ctx context.Context) error {
	_, err := g.Command("worktree", "prune").Run(ctx)
	return err
}

// Worktrees are the folders of every worktree git knows of, the work tree
// itself first.
func (g *Repo) Worktrees(ctx context.Context) ([]string, error) {
	out, err := g.Command("worktree", "list", "--porcelain").Run(ctx)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, line := range lines(out) {
		if p, ok := strings.CutPrefix(line, "worktree "); ok {
			paths = append(paths, p)
		}
	}
	return paths, nil
}

// SetSparse makes the worktree at path, registered without its files, a
// sparse checkout of folders in cone mode, with a sparse index: git keeps
// the settings in the worktree's own configuration (the repository gets
// extensions.worktreeConfig, as any `git sparse-checkout` in a worktree
// gives it). The folders go on standard input, so that no name is read as
// an option.
func (g *Repo) SetSparse(ctx context.Context, path string, folders []string) error {
	_, err := g.At(path).Command("sparse-checkout", "set", "--cone", "--sparse-index", "--stdin").
		Stdin([]byte(strings.Join(folders, "\n") + "\n")).Run(ctx)
	if err == nil && g.guard != nil {
		g.guard.Accept() // git turned the worktrees' own configuration on
	}
	return err
}

// Version is what `git version` prints, trimmed.
func (g *Repo) Version(ctx context.Context) (string, error) {
	out, err := g.Command("version").Run(ctx)
	return strings.TrimSpace(out), err
}

// AtLeast reports whether version, as `git version` prints it, is
// major.minor or later.
func AtLeast(version string, major, minor int) bool {
	var maj, min int
	if _, err := fmt.Sscanf(strings.TrimPrefix(strings.TrimSpace(version), "git version "), "%d.%d", &maj, &min); err != nil {
		return false
	}
	return maj > major || maj == major && min >= minor
}

// CommonDir is the git folder the work tree's worktrees share, absolute.
func (g *Repo) CommonDir(ctx context.Context) (string, error) {
	out, err := g.Command("rev-parse", "--path-format=absolute", "--git-common-dir").Run(ctx)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// Tracked is the first path git tracks at or under path (relative to the
// folder, taken literally); "" when it tracks none.
func (g *Repo) Tracked(ctx context.Context, path string) (string, error) {
	out, err := g.Command("ls-files", "-z", "--", ":(literal)"+filepath.ToSlash(filepath.Clean(path))).Run(ctx)
	first, _, _ := strings.Cut(out, "\x00")
	return first, err
}

// ListTree streams `git ls-tree -l -z` of rev to w, the whole tree with
// recursive, else the entries of paths (taken literally, from the top of
// the work tree). A tree of a million files lists more than a result
// keeps: w reads it as it comes.
func (g *Repo) ListTree(ctx context.Context, w io.Writer, rev string, recursive bool, paths ...string) error {
	args := []string{"ls-tree", "-l", "-z"}
	if recursive {
		args = append(args, "-r")
	}
	args = append(args, rev)
	if len(paths) > 0 {
		args = append(append(args, "--"), paths...)
	}
	_, err := g.Command(args...).Dir(g.top).Env("GIT_LITERAL_PATHSPECS=1").StreamTo(w).Run(ctx)
	return err
}

// ChangedFiles are the files that differ between commits (or trees) a and
// b, renames counted as a deletion and an addition; a submodule's path when
// its commit differs (two trees compared: git looks into no submodule).
func (g *Repo) ChangedFiles(ctx context.Context, a, b string) ([]string, error) {
	out, err := g.Command("diff", "--name-only", "-z", "--no-renames", "--ignore-submodules=dirty", a, b, "--").Run(ctx)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, p := range strings.Split(out, "\x00") {
		if p != "" {
			files = append(files, p)
		}
	}
	return files, nil
}

// AddedFiles are the files (and submodules) commit b holds and commit a
// does not.
func (g *Repo) AddedFiles(ctx context.Context, a, b string) ([]string, error) {
	out, err := g.Command("diff", "--name-only", "-z", "--no-renames", "--ignore-submodules=dirty", "--diff-filter=A", a, b, "--").Run(ctx)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, p := range strings.Split(out, "\x00") {
		if p != "" {
			files = append(files, p)
		}
	}
	return files, nil
}

// Branches are the branches whose names start with prefix.
func (g *Repo) Branches(ctx context.Context, prefix string) ([]string, error) {
	out, err := g.Command("for-each-ref", "--format=%(refname:short)", "refs/heads/"+prefix).Run(ctx)
	return lines(out), err
}

// DeleteBranch deletes branch, merged or not.
func (g *Repo) DeleteBranch(ctx context.Context, branch string) error {
	_, err := g.Command("branch", "-q", "-D", branch).Run(ctx)
	return err
}

// RenameBranch renames branch from to to, replacing a branch of that name.
func (g *Repo) RenameBranch(ctx context.Context, from, to string) error {
	_, err := g.Command("branch", "-M", from, to).Run(ctx)
	return err
}

// SetBranch makes branch point at rev, made or moved.
func (g *Repo) SetBranch(ctx context.Context, branch, rev string) error {
	_, err := g.Command("branch", "-f", branch, rev).Run(ctx)
	return err
}

// Merge merges branch into the work tree with a merge commit of message
// msg, or, with ffOnly, moves the work tree's branch forward to it (and
// fails when it cannot); the repository's hooks run as for any merge (see
// hooks.go). It never overwrites a file the work tree ignores: a merge
// that would is refused by git. A merge that fails is an *Error whose
// output says why (a *HookError when a hook refused it); it may be left in
// progress (see MergeInProgress).
func (g *Repo) Merge(ctx context.Context, branch, msg string, ffOnly bool) error {
	if ffOnly {
		if _, err := g.Command("merge", "-q", "--ff-only", "--no-overwrite-ignore", branch).Run(ctx); err != nil {
			return err
		}
		g.afterHook(ctx, "post-merge", "0")
		return nil
	}
	hooked, err := g.hasHooks(ctx, "pre-merge-commit", "prepare-commit-msg", "commit-msg")
	if err != nil {
		return err
	}
	if !hooked {
		if _, err := g.Command("merge", "-q", "--no-ff", "--no-edit", "--no-overwrite-ignore", "-m", msg, branch).Run(ctx); err != nil {
			return err
		}
		g.afterHook(ctx, "post-merge", "0")
		return nil
	}
	// Stopped before its commit, so that the hooks run first.
	if _, err := g.Command("merge", "-q", "--no-ff", "--no-commit", "--no-overwrite-ignore", branch).Run(ctx); err != nil {
		return err
	}
	return g.commitHooked(ctx, msg, "merge")
}

// Unmerged are the files a merge in progress left in conflict.
func (g *Repo) Unmerged(ctx context.Context) ([]string, error) {
	out, err := g.Command("diff", "--name-only", "--diff-filter=U").Run(ctx)
	return lines(out), err
}

// MergeInProgress reports whether a merge has started and not ended.
func (g *Repo) MergeInProgress(ctx context.Context) bool {
	_, err := g.Command("rev-parse", "-q", "--verify", "MERGE_HEAD").Run(ctx)
	return err == nil
}

// AbortMerge ends the merge in progress, the work tree back as it was.
func (g *Repo) AbortMerge(ctx context.Context) error {
	_, err := g.Command("merge", "--abort").Run(ctx)
	return err
}

// ResetKeep moves the work tree's branch back to rev, keeping the changes
// that are not the commits it drops (git reset --keep).
func (g *Repo) ResetKeep(ctx context.Context, rev string) error {
	_, err := g.Command("reset", "-q", "--keep", rev).Run(ctx)
	return err
}
