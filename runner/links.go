package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"peal/internal/safefs"
)

// checkLinks refuses a worktree_link path the work tree cannot lend to the
// worktrees: one it does not have, or one git tracks (a tracked folder comes
// with every checkout; a link in its place would be committed as the
// deletion of its files).
func (r *run) checkLinks(ctx context.Context) error {
	for _, p := range r.cfg.WorktreeLink {
		src := filepath.Join(r.cfg.RepoPath, p)
		if _, err := os.Lstat(src); err != nil {
			return fmt.Errorf("worktree_link %s: %s does not exist in the work tree: make it there before the run (e.g. install the dependencies), or drop it from worktree_link", p, src)
		}
		res, err := r.git.Run(ctx, "ls-files", "-z", "--", ":(literal)"+filepath.ToSlash(filepath.Clean(p)))
		if err != nil {
			return fmt.Errorf("worktree_link %s: git ls-files: %w", p, err)
		}
		if tracked, _, _ := strings.Cut(res.Stdout, "\x00"); tracked != "" {
			return fmt.Errorf("worktree_link %s: git tracks %s: link only paths git ignores (node_modules, .venv, a build cache); tracked files come with every worktree", p, tracked)
		}
	}
	return nil
}

// blockHasWorktrees reports whether a run of tasks may run a parallel block
// in worktrees: the only time worktree_link is used.
func (r *run) blockHasWorktrees(tasks []Task) bool {
	if r.cfg.ParallelIsolation != "worktree" {
		return false
	}
	for _, seg := range Segments(tasks) {
		if r.runsAsBlock(seg, seg.Tasks) {
			return true
		}
	}
	return false
}

// linkPath makes rel in the worktree folder dir a symbolic link to rel of
// the work tree repo (an absolute link: the worktree lies elsewhere). The
// folders on the way are made in dir, refusing a link among them, so that
// the new link cannot land outside the worktree.
func linkPath(repo, rel, dir string) error {
	src := filepath.Join(repo, rel)
	if _, err := os.Lstat(src); err != nil {
		return fmt.Errorf("%s does not exist in the work tree", src)
	}
	d, name, err := openParent(dir, rel, true)
	var nr *safefs.NotRegularError
	if errors.As(err, &nr) {
		return fmt.Errorf("%s is %s in the worktree: a link goes in a folder", nr.Path, nr.Kind)
	}
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Symlink(src, name); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s already exists in the worktree (a tracked path, or one made by worktree_copy)", filepath.Join(dir, rel))
		}
		if runtime.GOOS == "windows" {
			return fmt.Errorf("%w (Windows makes symbolic links only in Developer Mode or with the privilege to create them: turn one on, or use worktree_copy)", err)
		}
		return err
	}
	return nil
}

// endLinks removes the block's section of info/exclude once its worktrees
// are gone.
func (r *run) endLinks(ctx context.Context) {
	cctx, cancel := r.trees.cleanupContext(ctx)
	defer cancel()
	r.trees.mu.Lock()
	defer r.trees.mu.Unlock()
	if err := r.trees.unexclude(cctx); err != nil {
		r.log.Warn("could not remove the worktree_link paths from info/exclude; the next run removes them", "err", err)
	}
}

// The section of the repository's info/exclude that names the linked paths
// while a block of a run on this state folder has worktrees. A `folder/`
// pattern of .gitignore matches folders only, never the link that stands in
// for one in a worktree; info/exclude is shared by every worktree of the
// repository, so its `/folder` (which matches a link too) keeps the links of
// every task out of every commit, peal's and the agent's own.
func (ts *trees) excludeStart() string {
	return "# " + strings.TrimSuffix(ts.prefix, "/") + ": worktree_link paths of a running parallel block"
}
func (ts *trees) excludeEnd() string { return "# end " + strings.TrimSuffix(ts.prefix, "/") }

// excludeFile is the repository's info/exclude, shared by its worktrees.
func (ts *trees) excludeFile(ctx context.Context) (string, error) {
	res, err := ts.git.Run(ctx, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return "", fmt.Errorf("git rev-parse --git-common-dir: %w", err)
	}
	return filepath.Join(strings.TrimSpace(res.Stdout), "info", "exclude"), nil
}

// exclude names paths (relative to repo_path) in the section of this state
// folder's runs in info/exclude, replacing what the section held.
func (ts *trees) exclude(ctx context.Context, paths []string) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	// The worktrees folder tells the next run that there may be something
	// to sweep: the section is written only once it exists.
	if err := os.MkdirAll(ts.root, 0o755); err != nil {
		return fmt.Errorf("worktrees folder %s: %w", ts.root, err)
	}
	lines := []string{ts.excludeStart()}
	for _, p := range paths {
		lines = append(lines, "/"+escapePattern(filepath.ToSlash(filepath.Join(ts.rel, p))))
	}
	return ts.rewriteExclude(ctx, append(lines, ts.excludeEnd()))
}

// unexclude removes the section of this state folder's runs from
// info/exclude. Callers hold mu.
func (ts *trees) unexclude(ctx context.Context) error {
	return ts.rewriteExclude(ctx, nil)
}

// rewriteExclude writes info/exclude with the section of this state
// folder's runs replaced by section (removed when it is empty); the rest
// of the file stays as it is. The file is replaced at once, so that a git
// of a running task reads it whole.
func (ts *trees) rewriteExclude(ctx context.Context, section []string) error {
	file, err := ts.excludeFile(ctx)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var kept []string
	in := false
	found := false
	for _, line := range strings.SplitAfter(string(data), "\n") {
		switch bare := strings.TrimRight(line, "\r\n"); {
		case bare == ts.excludeStart():
			in, found = true, true
		case in && bare == ts.excludeEnd():
			in = false
		case !in && line != "":
			kept = append(kept, line)
		}
	}
	if !found && len(section) == 0 {
		return nil
	}
	text := strings.Join(kept, "")
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	if len(section) > 0 {
		text += strings.Join(section, "\n") + "\n"
	}
	if text == "" {
		// The file held the section only: it was made for it.
		return os.Remove(file)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return safefs.WriteFile(file, []byte(text))
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
