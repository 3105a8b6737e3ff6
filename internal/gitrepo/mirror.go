package gitrepo

import (
	"context"
	"fmt"
	"peal/internal/text"
	"strings"
)

// What a worktree that mirrors the work tree (the run's worktree of a
// confined run) needs of git: the state of a tree as one tree object, the
// paths that changed between two states with the object each held before,
// and the work tree's HEAD moved to a commit made in the mirror.

// Change is one path that changed between two states of a tree: what it
// held before (Old: the id of its object, "" when it was not there), and
// whether it is gone now. What it holds now is read from the files.
type Change struct {
	Path    string // slash form, from the top of the tree
	Old     string
	Deleted bool
	// Gitlink: a submodule's commit, which is no file to bring.
	Gitlink bool
}

// zeroID is git's id of no object (in update-ref: "must not exist").
func zeroID(like string) string { return strings.Repeat("0", max(len(like), 40)) }

// EmptyTree is the id of the empty tree, written to the object store.
func (g *Repo) EmptyTree(ctx context.Context) (string, error) {
	out, err := g.Command("hash-object", "-t", "tree", "-w", "--stdin").Stdin([]byte{}).Run(ctx)
	return strings.TrimSpace(out), err
}

// State is the tree of everything the work tree holds but peal's and stet's
// folders and what git ignores, staged in its index first (git add -A): its
// HEAD and its uncommitted changes. A repository embedded in it that is not
// the user's is an *EmbeddedError, and nothing is staged.
func (g *Repo) State(ctx context.Context) (string, error) {
	add := []string{"add", "-A"}
	if g.sparse {
		add = append(add, "--sparse")
	}
	exclude, err := g.addExcludes(ctx)
	if err != nil {
		return "", err
	}
	if exclude, err = g.stageable(ctx, exclude, false); err != nil {
		return "", err
	}
	if _, err := g.Command(append(append(add, "--"), exclude...)...).Run(ctx); err != nil {
		return "", err
	}
	out, err := g.Command("write-tree").Run(ctx)
	return strings.TrimSpace(out), err
}

// TreeChanges are the paths that differ between two trees (or commits),
// each with its object in from.
func (g *Repo) TreeChanges(ctx context.Context, from, to string) ([]Change, error) {
	out, err := g.Command("diff-tree", "-r", "-z", "--no-renames", "--raw", from, to, "--").Run(ctx)
	if err != nil {
		return nil, err
	}
	var changes []Change
	recs := strings.Split(out, "\x00")
	for i := 0; i+1 < len(recs); i += 2 {
		// :oldmode newmode oldsha newsha status, then the path
		f := strings.Fields(strings.TrimPrefix(recs[i], ":"))
		if len(f) != 5 {
			return nil, fmt.Errorf("git diff-tree printed a line peal cannot read: %q", recs[i])
		}
		c := Change{Path: recs[i+1], Deleted: f[1] == "000000", Gitlink: f[0] == "160000" || f[1] == "160000"}
		if f[0] != "000000" {
			c.Old = f[2]
		}
		changes = append(changes, c)
	}
	return changes, nil
}

// MoveHead moves the work tree's HEAD (its branch, or HEAD itself when it
// is detached) from old ("" when it has no commit yet) to commit, and makes
// its index commit's tree; the files stay as they are. It fails when HEAD is
// no longer old.
func (g *Repo) MoveHead(ctx context.Context, old, commit string) error {
	ref := "HEAD"
	if out, err := g.Command("symbolic-ref", "-q", "HEAD").Run(ctx); err == nil {
		ref = strings.TrimSpace(out)
	} else if !Exited(err, 1) {
		return err
	}
	if old == "" {
		old = zeroID(commit)
	}
	args := []string{"update-ref", "-m", "peal: the work of the run's worktree", ref, commit, old}
	if ref == "HEAD" {
		args = append([]string{"update-ref", "--no-deref"}, args[1:]...)
	}
	if _, err := g.Command(args...).Run(ctx); err != nil {
		return err
	}
	_, err := g.Command("read-tree", commit).Run(ctx)
	return err
}

// Mirror makes the worktree's HEAD commit (its branch made unborn when
// commit is "") and its index and files tree: tracked files that differ are
// written, those tree does not hold removed, and files neither tracked nor
// ignored removed too. What git ignores stays.
func (g *Repo) Mirror(ctx context.Context, commit, tree string) error {
	ref, err := g.Command("symbolic-ref", "-q", "HEAD").Run(ctx)
	if err != nil {
		return fmt.Errorf("the run's worktree is not on its branch: %w", err)
	}
	ref = strings.TrimSpace(ref)
	if commit == "" {
		_, err = g.Command("update-ref", "-d", ref).Run(ctx)
	} else {
		_, err = g.Command("update-ref", ref, commit).Run(ctx)
	}
	if err == nil {
		_, err = g.Command("read-tree", "--reset", "-u", tree).Run(ctx)
	}
	if err == nil {
		_, err = g.Command("clean", "-f", "-d", "-q").Run(ctx)
	}
	return err
}

// HeadOrNone is the commit HEAD points at, "" when its branch has no commit
// yet (a new repository).
func (g *Repo) HeadOrNone(ctx context.Context) (string, error) {
	head, err := g.Head(ctx)
	if Exited(err, 1) {
		return "", nil
	}
	return head, err
}

// TreeOf is the tree of commit.
func (g *Repo) TreeOf(ctx context.Context, commit string) (string, error) {
	out, err := g.Command("rev-parse", "--verify", "-q", commit+"^{tree}").Run(ctx)
	return strings.TrimSpace(out), err
}

// Status is what git status says of a work tree, in one command.
type Status struct {
	Head string // the commit of HEAD; "" when its branch has none yet
	// Staged: the index differs from HEAD.
	Staged bool
	// Unstaged are the changes the index does not hold: files changed or
	// removed since they were staged, and files neither tracked nor
	// ignored (each Old: what the index holds, "" for those).
	Unstaged []Change
	// Ignored are the entries git ignores (a folder wholly ignored as one
	// entry, with a trailing /), slash form, from the top.
	Ignored []string
	// Embedded are the folders holding a repository of their own that git
	// does not track (with a trailing /), which Unstaged leaves out.
	Embedded []string
}

// Status reads the work tree's Status.
func (g *Repo) Status(ctx context.Context) (Status, error) {
	out, err := g.Command("status", "--porcelain=v2", "-z", "--branch", "--untracked-files=all", "--ignored=matching", "--no-renames").
		Env("GIT_OPTIONAL_LOCKS=0").Run(ctx)
	if err != nil {
		return Status{}, err
	}
	var st Status
	for _, rec := range strings.Split(out, "\x00") {
		switch {
		case strings.HasPrefix(rec, "# branch.oid "):
			if oid := strings.TrimPrefix(rec, "# branch.oid "); oid != "(initial)" {
				st.Head = oid
			}
		case strings.HasPrefix(rec, "? ") && strings.HasSuffix(rec, "/"):
			// Every untracked file is listed alone: a folder is one git
			// does not go into, a repository of its own.
			st.Embedded = append(st.Embedded, rec[2:])
		case strings.HasPrefix(rec, "? "):
			st.Unstaged = append(st.Unstaged, Change{Path: rec[2:]})
		case strings.HasPrefix(rec, "! "):
			st.Ignored = append(st.Ignored, rec[2:])
		case strings.HasPrefix(rec, "1 "):
			// 1 XY sub mH mI mW hH hI path
			f := strings.SplitN(rec, " ", 9)
			if len(f) != 9 || len(f[1]) != 2 {
				return Status{}, fmt.Errorf("git status printed a line peal cannot read: %q", rec)
			}
			if f[1][0] != '.' {
				st.Staged = true
			}
			if f[1][1] != '.' {
				st.Unstaged = append(st.Unstaged, Change{Path: f[8], Old: f[7], Deleted: f[5] == "000000", Gitlink: f[4] == "160000" || f[5] == "160000"})
			}
		case strings.HasPrefix(rec, "u "), strings.HasPrefix(rec, "2 "):
			return Status{}, fmt.Errorf("the worktree %s holds a merge or rename git status cannot list as changes: %q", g.top, text.Snippet(rec, 80))
		}
	}
	return st, nil
}
