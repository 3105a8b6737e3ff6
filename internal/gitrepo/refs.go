package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// What keeping the user's history needs of git: the user's refs as they
// are, each put back where it was, the work tree's files moved between two
// states of a tree, and a commit made of a tree without touching the
// index.

// Refs are the branches and tags of the repository (refs/heads/...,
// refs/tags/...) but those whose names start with one of skip (peal's own
// branch namespaces, "refs/heads/peal-kept/"), each with the object it
// names.
func (g *Repo) Refs(ctx context.Context, skip ...string) (map[string]string, error) {
	out, err := g.Command("for-each-ref", "--format=%(objectname) %(refname)", "refs/heads", "refs/tags").Run(ctx)
	if err != nil {
		return nil, err
	}
	refs := map[string]string{}
	for _, line := range lines(out) {
		id, name, ok := strings.Cut(line, " ")
		if !ok || strings.ContainsFunc(name, func(r rune) bool { return r < ' ' }) {
			continue
		}
		if !hasAnyPrefix(name, skip) {
			refs[name] = id
		}
	}
	return refs, nil
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// HeadRef is the branch HEAD names (refs/heads/main); "" when HEAD is
// detached.
func (g *Repo) HeadRef(ctx context.Context) (string, error) {
	out, err := g.Command("symbolic-ref", "-q", "HEAD").Run(ctx)
	if Exited(err, 1) {
		return "", nil
	}
	return strings.TrimSpace(out), err
}

// PutRef makes ref name id, whatever it names now ("" deletes it); HEAD
// when ref is "HEAD" (detached, not followed to its branch).
func (g *Repo) PutRef(ctx context.Context, ref, id string) error {
	args := []string{"update-ref", "--no-deref", "-m", "peal: put back as it was before the task"}
	if id == "" {
		args = append(args, "-d", ref)
	} else {
		args = append(args, ref, id)
	}
	_, err := g.Command(args...).Run(ctx)
	return err
}

// PointHead makes HEAD name the branch ref (refs/heads/main), as a
// checkout of it would, without touching the files or the index.
func (g *Repo) PointHead(ctx context.Context, ref string) error {
	_, err := g.Command("symbolic-ref", "-m", "peal: put back as it was before the task", "HEAD", ref).Run(ctx)
	return err
}

// CommitTree is a new commit of tree with parents (none: a root commit)
// and message msg, made without touching the index or any ref; the
// identity is the Repo's (Identity) or git's configuration.
func (g *Repo) CommitTree(ctx context.Context, tree, msg string, parents ...string) (string, error) {
	args := []string{"commit-tree", tree, "-m", msg}
	for _, p := range parents {
		if p != "" {
			args = append(args, "-p", p)
		}
	}
	out, err := g.Command(args...).Run(ctx)
	return strings.TrimSpace(out), err
}

// IndexPath is the file of the work tree's index, absolute.
func (g *Repo) IndexPath(ctx context.Context) (string, error) {
	if gitDir, _ := g.GitDir(); gitDir != "" && !g.plain {
		return filepath.Join(gitDir, "index"), nil // pinned: every command names this folder
	}
	out, err := g.Command("rev-parse", "--path-format=absolute", "--git-path", "index").Run(ctx)
	return strings.TrimSpace(out), err
}

// HeadAndRefs is the commit HEAD points at ("" before the first commit),
// the branch it names ("" detached) and the branches and tags but skip
// (see Refs), in as few commands as it takes.
func (g *Repo) HeadAndRefs(ctx context.Context, skip ...string) (head, branch string, refs map[string]string, err error) {
	if branch, err = g.HeadRef(ctx); err != nil {
		return "", "", nil, err
	}
	if refs, err = g.Refs(ctx, skip...); err != nil {
		return "", "", nil, err
	}
	if id, ok := refs[branch]; ok && branch != "" {
		return id, branch, refs, nil
	}
	head, err = g.HeadOrNone(ctx)
	return head, branch, refs, err
}

// SnapshotWith is Snapshot with the files of also (paths from the top,
// files git ignores: a .env) staged too, whatever the ignore rules say.
func (g *Repo) SnapshotWith(ctx context.Context, index string, also []string) (string, error) {
	if err := g.stageAll(ctx, index); err != nil {
		return "", err
	}
	env := "GIT_INDEX_FILE=" + index
	if len(also) > 0 {
		args := append([]string{"add", "-f", "--"}, literal(also)...)
		if _, err := g.Command(args...).Dir(g.top).Env(env).Run(ctx); err != nil {
			return "", err
		}
	}
	tree, err := g.Command("write-tree").Env(env).Run(ctx)
	return strings.TrimSpace(tree), err
}

// literal are paths as pathspecs taken literally, from the top.
func literal(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = ":(top,literal)" + p
	}
	return out
}

// SwitchFiles makes the files of the work tree go from tree from, which
// index holds as the files are now (a SnapshotWith), to tree to: what
// differs is written, what to lacks removed, what neither names (the
// folders git ignores) left alone. The repository's own index is not
// touched.
func (g *Repo) SwitchFiles(ctx context.Context, index, from, to string) error {
	_, err := g.Command("read-tree", "-m", "-u", from, to).Dir(g.top).Env("GIT_INDEX_FILE=" + index).Run(ctx)
	if err != nil {
		return fmt.Errorf("putting the work tree's files back: %w", err)
	}
	return nil
}

// SaveIndex copies the work tree's index to the file to (none when the
// work tree has no index yet: to is removed).
func (g *Repo) SaveIndex(ctx context.Context, to string) error {
	own, err := g.IndexPath(ctx)
	if err != nil {
		return err
	}
	return copyFile(own, to)
}

// RestoreIndex makes the work tree's index the copy from (SaveIndex),
// replaced at once, as git replaces it; no copy removes the index.
func (g *Repo) RestoreIndex(ctx context.Context, from string) error {
	own, err := g.IndexPath(ctx)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(from); errors.Is(err, fs.ErrNotExist) {
		if err := os.Remove(own); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return copyFile(from, own)
}

// KeepTree is a tree that holds only paths of tree from, as from holds
// them (an index of the caller's, index, is used to make it).
func (g *Repo) KeepTree(ctx context.Context, index, from string, paths []string) (string, error) {
	env := "GIT_INDEX_FILE=" + index
	if _, err := g.Command("read-tree", "--empty").Env(env).Run(ctx); err != nil {
		return "", err
	}
	listing, err := g.Command(append([]string{"ls-tree", "-r", "-z", from, "--"}, paths...)...).Env("GIT_LITERAL_PATHSPECS=1").Dir(g.top).Run(ctx)
	if err != nil {
		return "", err
	}
	if _, err := g.Command("update-index", "-z", "--index-info").Stdin([]byte(listing)).Env(env).Run(ctx); err != nil {
		return "", err
	}
	out, err := g.Command("write-tree").Env(env).Run(ctx)
	return strings.TrimSpace(out), err
}

// PathsTree is a tree that holds only the files of paths as the work tree
// holds them now (files git ignores too), staged in index, which it
// leaves holding them.
func (g *Repo) PathsTree(ctx context.Context, index string, paths []string) (string, error) {
	env := "GIT_INDEX_FILE=" + index
	if _, err := g.Command("read-tree", "--empty").Env(env).Run(ctx); err != nil {
		return "", err
	}
	if len(paths) > 0 {
		if _, err := g.Command(append([]string{"add", "-f", "--"}, literal(paths)...)...).Dir(g.top).Env(env).Run(ctx); err != nil {
			return "", err
		}
	}
	out, err := g.Command("write-tree").Env(env).Run(ctx)
	return strings.TrimSpace(out), err
}

// IndexTree is the tree of what the work tree's index holds.
func (g *Repo) IndexTree(ctx context.Context) (string, error) {
	out, err := g.Command("write-tree").Run(ctx)
	return strings.TrimSpace(out), err
}

// TreeOfIndex writes what the index file holds (a copy, SaveIndex) as a
// tree and returns its id.
func (g *Repo) TreeOfIndex(ctx context.Context, file string) (string, error) {
	out, err := g.Command("write-tree").Env("GIT_INDEX_FILE=" + file).Run(ctx)
	return strings.TrimSpace(out), err
}

// ChangedAndAdded are the files that differ between commits a and b, and
// those of them b holds and a does not, in one command (renames counted as
// a deletion and an addition).
func (g *Repo) ChangedAndAdded(ctx context.Context, a, b string) (changed, added []string, err error) {
	out, err := g.Command("diff", "--name-status", "-z", "--no-renames", a, b, "--").Run(ctx)
	if err != nil {
		return nil, nil, err
	}
	recs := strings.Split(out, "\x00")
	for i := 0; i+1 < len(recs); i += 2 {
		status, path := recs[i], recs[i+1]
		changed = append(changed, path)
		if status == "A" {
			added = append(added, path)
		}
	}
	return changed, added, nil
}
