package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"peal/internal/owndir"
	"peal/internal/safefs"
	"peal/internal/text"
	"peal/internal/unidiff"
)

// exclude are the pathspecs `git add -A` leaves out: the folders of stet and
// peal, so that nothing of theirs is ever committed. A folder inside one that
// peal's .gitignore already hides is left out through that one: naming an
// ignored path in a pathspec makes git add fail.
func (g *Repo) exclude() []string {
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

// addExcludes are the pathspecs `git add -A` leaves out (exclude), but
// those of the folders the work tree's own ignore rules hide (a
// .gitignore that lists .review/): git add fails on an ignored path a
// pathspec names, even one it excludes, and adds nothing of an ignored
// folder but the files git already tracks there. A folder that is not
// there costs nothing; those that are are asked of git in one command.
func (g *Repo) addExcludes(ctx context.Context) ([]string, error) {
	all := g.exclude()
	var present []string
	for _, ps := range all {
		rel := strings.TrimPrefix(ps, ":(top,exclude)")
		if _, err := os.Lstat(filepath.Join(g.top, filepath.FromSlash(rel))); err == nil {
			present = append(present, rel)
		}
	}
	if len(present) == 0 {
		return all, nil
	}
	out, err := g.Command(append([]string{"check-ignore", "--no-index", "--"}, present...)...).Dir(g.top).Run(ctx)
	if err != nil && !Exited(err, 1) {
		return nil, err
	}
	ignored := lines(out)
	if len(ignored) == 0 {
		return all, nil
	}
	return slices.DeleteFunc(all, func(ps string) bool {
		return slices.Contains(ignored, strings.TrimPrefix(ps, ":(top,exclude)"))
	}), nil
}

// Head is the commit HEAD points at; an error when there is none yet.
func (g *Repo) Head(ctx context.Context) (string, error) {
	out, err := g.Command("rev-parse", "--verify", "--quiet", "HEAD^{commit}").Run(ctx)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// Resolve is the commit rev names, abbreviated to short hex digits (0: in
// full); an error when it names none.
func (g *Repo) Resolve(ctx context.Context, rev string, short int) (string, error) {
	args := []string{"rev-parse", "-q", "--verify"}
	if short > 0 {
		args = append(args, "--short="+strconv.Itoa(short))
	}
	out, err := g.Command(append(args, rev+"^{commit}")...).Run(ctx)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// Changes are the paths `git status --porcelain` lists apart from peal's
// and stet's folders: the uncommitted changes that are not peal's own.
func (g *Repo) Changes(ctx context.Context) ([]string, error) {
	return g.status(ctx, g.exclude()...)
}

// AnyChanges reports whether `git status --porcelain` lists anything, peal's
// folders included: what stet calls uncommitted changes.
func (g *Repo) AnyChanges(ctx context.Context) (bool, error) {
	paths, err := g.status(ctx)
	return len(paths) > 0, err
}

func (g *Repo) status(ctx context.Context, pathspecs ...string) ([]string, error) {
	args := []string{"status", "--porcelain"}
	if len(pathspecs) > 0 {
		args = append(append(args, "--"), pathspecs...)
	}
	// Only reading: git must not refresh the index as it would, taking its
	// lock from an agent that runs git at the same time (a parallel block).
	out, err := g.Command(args...).Env("GIT_OPTIONAL_LOCKS=0").Run(ctx)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, line := range strings.Split(out, "\n") {
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
func (g *Repo) Covered(ctx context.Context, base, file string, line int) (bool, error) {
	out, err := g.Command("diff", "--no-color", "--no-ext-diff", "--no-textconv", base+"..HEAD", "--", ":(top,literal)"+file).Run(ctx)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(unidiff.Parse([]byte(out)), func(h unidiff.Hunk) bool { return h.Covers(line) }), nil
}

// IsAncestor reports whether commit a is an ancestor of (or is) commit b.
// An error other than "it is not" counts as not.
func (g *Repo) IsAncestor(ctx context.Context, a, b string) bool {
	_, err := g.Command("merge-base", "--is-ancestor", a, b).Run(ctx)
	return err == nil
}

// Commit records everything in the work tree but peal's and stet's folders
// as one commit "peal: task N - what" ("tasks 2, 3 - what" for a parallel
// block; "peal: task N" when what is blank); what is cut to its first line,
// at most 80 characters. "Nothing to commit" is not an error; committed
// reports whether a commit was made.
func (g *Repo) Commit(ctx context.Context, tasks []int, what string) (committed bool, err error) {
	msg := "peal: " + commitSubject(tasks)
	if what = firstLine(what, 80); what != "" {
		msg += " - " + what
	}
	if committed, err = g.CommitMessage(ctx, msg); err != nil {
		return false, err
	}
	if committed {
		g.log.Info("committed", "tasks", tasks, "message", msg)
	} else {
		g.log.Info("nothing to commit", "tasks", tasks)
	}
	return committed, nil
}

// CommitMessage records everything in the work tree but peal's and stet's
// folders as one commit of message msg; "nothing to commit" is not an
// error. A repository embedded in the work tree that is not the user's
// (NoteEmbedded) is an *EmbeddedError, and nothing is committed.
func (g *Repo) CommitMessage(ctx context.Context, msg string) (committed bool, err error) {
	add := []string{"add", "-A"}
	if g.sparse {
		add = append(add, "--sparse")
	}
	exclude, err := g.addExcludes(ctx)
	if err != nil {
		return false, err
	}
	if exclude, err = g.stageable(ctx, exclude, false); err != nil {
		return false, err
	}
	if _, err := g.Command(append(append(add, "--"), exclude...)...).Run(ctx); err != nil {
		return false, err
	}
	// Nothing staged is not an error. Asked of git by its exit status, not
	// read from its message, which git translates. A submodule's new
	// commit counts (git compares the recorded commits, and enters no
	// submodule for it).
	if _, err = g.Command("diff", "--cached", "--quiet", "--ignore-submodules=dirty").Run(ctx); err == nil {
		return false, nil
	} else if !Exited(err, 1) {
		return false, err
	}
	hooked, err := g.hasHooks(ctx, "pre-commit", "prepare-commit-msg", "commit-msg", "post-commit")
	if err != nil {
		return false, err
	}
	if hooked {
		err = g.commitHooked(ctx, msg, "message")
	} else {
		_, err = g.Command("commit", "-q", "-m", msg).Run(ctx)
	}
	var refused *HookError
	if errors.As(err, &refused) {
		return false, err
	}
	// Only a git that ran and failed may lack an identity: a git that
	// could not start says why itself.
	var failed *Error
	if errors.As(err, &failed) {
		return false, fmt.Errorf("%w (check git user.name/user.email in the repo)", err)
	}
	if err != nil {
		return false, err
	}
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

// firstLine is the first non-blank line of s, cleaned of control
// characters and terminal codes (an agent's output can hold any byte, and a
// NUL is no argument a program can be given), its blanks collapsed, at
// most n characters: a longer line keeps its first n-3 and ends in "...",
// as Peal cut it.
func firstLine(s string, n int) string {
	for _, line := range strings.Split(strings.ReplaceAll(s, "\r", "\n"), "\n") {
		if line = strings.Join(strings.Fields(text.Clean(line)), " "); line != "" {
			if rs := []rune(line); len(rs) > n {
				return string(rs[:max(n-3, 0)]) + "..."
			}
			return line
		}
	}
	return ""
}

// ListPaths is paths as one line names them: the first n, then how many
// more.
func ListPaths(paths []string, n int) string {
	if len(paths) <= n {
		return strings.Join(paths, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(paths[:n], ", "), len(paths)-n)
}

// Snapshot writes what the work tree holds as a tree object and returns
// its id: the files of HEAD as they are now, and those git neither tracks
// nor ignores, but peal's and stet's folders and the repositories embedded
// in it (what CommitMessage would commit). It stages them in index, a file of the caller's that it fills
// from a copy of the repository's index (so that git hashes again only
// what changed); the repository's own index is not touched.
func (g *Repo) Snapshot(ctx context.Context, index string) (string, error) {
	if err := g.stageAll(ctx, index); err != nil {
		return "", err
	}
	tree, err := g.Command("write-tree").Env("GIT_INDEX_FILE=" + index).Run(ctx)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(tree), nil
}

// stageAll fills index, a file of the caller's, from a copy of the
// repository's index, with what the work tree holds (see Snapshot).
func (g *Repo) stageAll(ctx context.Context, index string) error {
	own, err := g.IndexPath(ctx)
	if err != nil {
		return err
	}
	if err := copyFile(own, index); err != nil {
		return err
	}
	exclude, err := g.addExcludes(ctx)
	if err != nil {
		return err
	}
	// The repositories embedded in the work tree are left out, whoever
	// made them: a snapshot commits nothing.
	if exclude, err = g.stageable(ctx, exclude, true); err != nil {
		return err
	}
	_, err = g.Command(append([]string{"add", "-A", "--"}, exclude...)...).Env("GIT_INDEX_FILE=" + index).Run(ctx)
	return err
}

// CheckOutTree makes the work tree and the index of a clean work tree at
// HEAD hold tree (a Snapshot): the files it changes are written, those it
// does not have removed, untracked and ignored files left alone.
func (g *Repo) CheckOutTree(ctx context.Context, tree string) error {
	_, err := g.Command("read-tree", "-m", "-u", "HEAD", tree).Run(ctx)
	return err
}

// copyFile makes the file to a copy of the regular file from, put in
// place at once (safefs.Dir.Put: never written through a link, a full disk
// said as such); when from does not exist, neither does to afterwards (git
// reads a missing index as an empty one).
func copyFile(from, to string) error {
	src, err := safefs.OpenDir(filepath.Dir(from), false)
	if err != nil {
		return err
	}
	defer src.Close()
	in, _, err := src.Open(filepath.Base(from))
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.Remove(to); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if err != nil {
		return err
	}
	defer in.Close()
	dst, err := safefs.OpenDir(filepath.Dir(to), false)
	if err != nil {
		return err
	}
	defer dst.Close()
	return dst.Put(filepath.Base(to), in, 0o666, "")
}
