package review

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"peal/internal/owndir"
	"peal/internal/unidiff"
	"peal/phase"
)

// Git runs the git commands of a run in its repository, each a supervised
// child like any other call: the commits that make a task's work visible to
// its review, and what a review needs to know of the repository.
type Git struct {
	Caller  phase.Caller
	Log     *slog.Logger
	Timeout time.Duration
	// Sparse: the work tree is a sparse checkout (a task's worktree under
	// worktree_sparse_paths). Commits then stage what the task wrote
	// outside the checked-out folders too, which a plain `git add -A`
	// refuses.
	Sparse bool
	// top is the top of the work tree; own are peal's folders in it (see
	// Exclude).
	top string
	own []string
}

// NewGit is the git of a run in repo; own are peal's folders (state_dir,
// knowledge_dir, agent_log_dir), excluded from commits when they lie inside
// the work tree (`git add -A` stages the whole work tree, not only repo).
func NewGit(caller phase.Caller, log *slog.Logger, timeout time.Duration, repo string, own ...string) Git {
	g := Git{Caller: caller, Log: log, Timeout: timeout, top: workTreeTop(repo)}
	for _, dir := range own {
		abs, err := filepath.Abs(dir)
		if err != nil || dir == "" {
			continue
		}
		if rel, err := filepath.Rel(g.top, abs); err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") {
			g.own = append(g.own, rel)
		}
	}
	return g
}

// Exclude are the pathspecs `git add -A` leaves out: the folders of stet and
// peal, so that nothing of theirs is ever committed. A folder inside one that
// peal's .gitignore already hides is left out through that one: naming an
// ignored path in a pathspec makes git add fail.
func (g Git) Exclude() []string {
	exclude := []string{":(top,exclude).review", ":(top,exclude).peal"}
	for _, rel := range g.own {
		parts := strings.Split(filepath.ToSlash(rel), "/")
		for i := 1; i < len(parts); i++ {
			if owndir.Owned(filepath.Join(g.top, filepath.FromSlash(strings.Join(parts[:i], "/")))) {
				parts = parts[:i]
				break
			}
		}
		exclude = append(exclude, ":(top,exclude)"+strings.Join(parts, "/"))
	}
	return exclude
}

// workTreeTop is the top of the git work tree around dir: the nearest folder
// holding .git (a folder, or a file in a linked worktree); dir itself when
// none is found.
func workTreeTop(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return abs
		}
	}
}

// run runs git once in the repository.
func (g Git) run(ctx context.Context, args ...string) (phase.Result, error) {
	return g.runEnv(ctx, nil, args...)
}

// Run runs git once in the repository with args; a non-zero exit is an
// error (the result still holds what git printed).
func (g Git) Run(ctx context.Context, args ...string) (phase.Result, error) {
	return g.run(ctx, args...)
}

// Top is the top of the work tree the commands run in.
func (g Git) Top() string { return g.top }

// runEnv runs git once in the repository with env added to its environment.
func (g Git) runEnv(ctx context.Context, env []string, args ...string) (phase.Result, error) {
	spec := g.Caller.Command("git", append([]string{"git"}, args...), g.Timeout)
	spec.Env = append(slices.Clone(spec.Env), env...)
	res, err := phase.Run(ctx, spec)
	if err != nil {
		return res, err
	}
	return res, phase.CheckExit(res)
}

// Head is the commit HEAD points at; an error when there is none yet.
func (g Git) Head(ctx context.Context) (string, error) {
	res, err := g.run(ctx, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(res.Stdout), nil
}

// Changes are the paths `git status --porcelain` lists apart from peal's
// and stet's folders: the uncommitted changes that are not peal's own.
func (g Git) Changes(ctx context.Context) ([]string, error) {
	return g.status(ctx, g.Exclude()...)
}

// AnyChanges reports whether `git status --porcelain` lists anything, peal's
// folders included: what stet calls uncommitted changes.
func (g Git) AnyChanges(ctx context.Context) (bool, error) {
	paths, err := g.status(ctx)
	return len(paths) > 0, err
}

func (g Git) status(ctx context.Context, pathspecs ...string) ([]string, error) {
	args := []string{"status", "--porcelain"}
	if len(pathspecs) > 0 {
		args = append(append(args, "--"), pathspecs...)
	}
	// Only reading: git must not refresh the index as it would, taking its
	// lock from an agent that runs git at the same time (a parallel block).
	res, err := g.runEnv(ctx, []string{"GIT_OPTIONAL_LOCKS=0"}, args...)
	if err != nil {
		return nil, fmt.Errorf("git status failed: %w", err)
	}
	var paths []string
	for _, line := range strings.Split(res.Stdout, "\n") {
		if len(line) > 3 {
			paths = append(paths, line[3:])
		}
	}
	return paths, nil
}

// Covered reports whether line of file (relative to the top of the work
// tree) lies in a hunk of `git diff base..HEAD`, the diff stet reviews:
// between the new-side start and end of the hunk's header, context lines
// included, as stet counts them.
func (g Git) Covered(ctx context.Context, base, file string, line int) (bool, error) {
	res, err := g.run(ctx, "diff", "--no-color", "--no-ext-diff", base+"..HEAD", "--", ":(top,literal)"+file)
	if err != nil {
		return false, fmt.Errorf("git diff failed: %w", err)
	}
	return slices.ContainsFunc(unidiff.Parse([]byte(res.Stdout)), func(h unidiff.Hunk) bool { return h.Covers(line) }), nil
}

// IsAncestor reports whether commit a is an ancestor of (or is) commit b.
func (g Git) IsAncestor(ctx context.Context, a, b string) bool {
	_, err := g.run(ctx, "merge-base", "--is-ancestor", a, b)
	return err == nil
}

// Commit records everything in the work tree but the excluded folders as
// one commit "peal: task N - what" ("tasks 2, 3 - what" for a parallel
// block; "peal: task N" when what is empty). "Nothing to commit" is not an error; committed reports whether a
// commit was made.
func (g Git) Commit(ctx context.Context, tasks []int, what string) (committed bool, err error) {
	add := []string{"add", "-A"}
	if g.Sparse {
		add = append(add, "--sparse")
	}
	if _, err := g.run(ctx, append(append(add, "--"), g.Exclude()...)...); err != nil {
		return false, fmt.Errorf("git add -A failed: %w", err)
	}
	// Nothing staged is not an error. Asked of git by its exit status, not
	// read from its message, which git translates.
	if res, err := g.run(ctx, "diff", "--cached", "--quiet"); err == nil {
		g.Log.Info("nothing to commit", "tasks", tasks)
		return false, nil
	} else if res.ExitCode != 1 {
		return false, fmt.Errorf("git diff --cached failed: %w", err)
	}
	msg := "peal: " + commitSubject(tasks)
	if what != "" {
		msg += " - " + what
	}
	if _, err := g.run(ctx, "commit", "-m", msg); err != nil {
		return false, fmt.Errorf("git commit failed (check git user.name/user.email and hooks in the repo): %w", err)
	}
	g.Log.Info("committed", "tasks", tasks, "message", msg)
	return true, nil
}

// commitSubject names the tasks of a commit: "task 2" for one task, "tasks
// 2, 3, 5" for a parallel block.
func commitSubject(tasks []int) string {
	if len(tasks) == 1 {
		return fmt.Sprintf("task %d", tasks[0])
	}
	parts := make([]string, len(tasks))
	for i, t := range tasks {
		parts[i] = strconv.Itoa(t)
	}
	return "tasks " + strings.Join(parts, ", ")
}

// FirstLine is the first non-blank line of s, at most n characters: a
// longer line keeps its first n-3 and ends in "...", as Peal cut it.
func FirstLine(s string, n int) string {
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			if rs := []rune(line); len(rs) > n {
				return string(rs[:max(n-3, 0)]) + "..."
			}
			return line
		}
	}
	return ""
}
