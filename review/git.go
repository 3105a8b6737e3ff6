package review

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"peal/phase"
)

// Git runs the git commands of a run in its repository, each a supervised
// child like any other call: the commits that make a task's work visible to
// its review, and what a review needs to know of the repository.
type Git struct {
	Caller  phase.Caller
	Log     *slog.Logger
	Timeout time.Duration
	// Exclude are pathspecs `git add -A` leaves out: the folders of stet and
	// peal, so that nothing of theirs is ever committed.
	Exclude []string
}

// NewGit is the git of a run in repo; own are peal's folders (state_dir,
// knowledge_dir), excluded from commits when they lie inside the repository.
func NewGit(caller phase.Caller, log *slog.Logger, timeout time.Duration, repo string, own ...string) Git {
	exclude := []string{":(top,exclude).review", ":(top,exclude).peal"}
	repoAbs, err := filepath.Abs(repo)
	for _, dir := range own {
		abs, aerr := filepath.Abs(dir)
		if err != nil || aerr != nil || dir == "" {
			continue
		}
		if rel, err := filepath.Rel(repoAbs, abs); err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") {
			exclude = append(exclude, ":(exclude)"+filepath.ToSlash(rel))
		}
	}
	return Git{Caller: caller, Log: log, Timeout: timeout, Exclude: exclude}
}

// run runs git once in the repository.
func (g Git) run(ctx context.Context, args ...string) (phase.Result, error) {
	spec := g.Caller.Spec("git", phase.NoTask, phase.Attempt{N: 1, Of: 1}, append([]string{"git"}, args...), false)
	spec.Env = g.Caller.Env // no PEAL_* call context: git is not an agent call
	spec.Timeout = g.Timeout
	spec.IdleTimeout = 0
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
	return g.status(ctx, g.Exclude...)
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
	res, err := g.run(ctx, args...)
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
	if _, err := g.run(ctx, append([]string{"add", "-A", "--"}, g.Exclude...)...); err != nil {
		return false, fmt.Errorf("git add -A failed: %w", err)
	}
	msg := "peal: " + commitSubject(tasks)
	if what != "" {
		msg += " - " + what
	}
	res, err := g.run(ctx, "commit", "-m", msg)
	if err != nil {
		if out := res.Stdout + res.Stderr; strings.Contains(out, "nothing to commit") || strings.Contains(out, "nothing added to commit") {
			g.Log.Info("nothing to commit", "tasks", tasks)
			return false, nil
		}
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
