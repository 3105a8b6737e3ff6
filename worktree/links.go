package worktree

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

// CheckLinks refuses a worktree_link path the work tree cannot lend to the
// worktrees: one it does not have, or one git tracks (a tracked folder comes
// with every checkout; a link in its place would be committed as the
// deletion of its files). paths are relative to the repository folder.
func (s *Set) CheckLinks(ctx context.Context, paths []string) error {
	for _, p := range paths {
		src := filepath.Join(s.git.Dir(), p)
		if _, err := os.Lstat(src); err != nil {
			return fmt.Errorf("worktree_link %s: %s does not exist in the work tree: make it there before the run (e.g. install the dependencies), or drop it from worktree_link", p, src)
		}
		tracked, err := s.git.Tracked(ctx, p)
		if err != nil {
			return fmt.Errorf("worktree_link %s: %w", p, err)
		}
		if tracked != "" {
			return fmt.Errorf("worktree_link %s: git tracks %s: link only paths git ignores (node_modules, .venv, a build cache); tracked files come with every worktree", p, tracked)
		}
	}
	return nil
}

// Prepare gives the new worktree t what git does not: the copy paths from
// the work tree, then the link paths as links to the work tree's (both
// relative to the repository folder). The work tree is clean when a block
// starts, so a copied path is either ignored there (and in the worktree) or
// tracked and the same: no copy is ever committed as a task's work; a link
// is kept out of commits by the block's info/exclude section (Exclude).
func (s *Set) Prepare(t *Tree, copies, links []string) error {
	for _, p := range copies {
		if err := copyPath(s.git.Dir(), p, t.Dir); err != nil {
			return fmt.Errorf("worktree_copy %s: %w", p, err)
		}
	}
	for _, p := range links {
		if err := linkPath(s.git.Dir(), p, t.Dir); err != nil {
			return fmt.Errorf("worktree_link %s: %w", p, err)
		}
	}
	return nil
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

// copyPath copies the file or folder rel of the work tree repo to the same
// place under dst, refusing links, even in a folder of rel, and special
// files (a named pipe would block the copy; a link could reach outside the
// repository). In dst the folders on the way are made refusing a link
// among them, and each file is put in place whole, replacing whatever is
// there, never written through a link (safefs.Dir.Put): a link the
// worktree checked out cannot take the copy outside it.
func copyPath(repo, rel, dst string) error {
	d, name, err := openParent(repo, rel, false)
	if err != nil {
		return copyError(err)
	}
	defer d.Close()
	out, _, err := openParent(dst, rel, true)
	if err != nil {
		return err
	}
	defer out.Close()
	return copyEntry(d, name, out)
}

// openParent opens the folder of root that holds rel (made on the way when
// create is set), refusing a link among the folders, and returns it with
// rel's last name.
func openParent(root, rel string, create bool) (*safefs.Dir, string, error) {
	d, err := safefs.OpenDir(root, false)
	if err != nil {
		return nil, "", err
	}
	parts := strings.Split(filepath.Clean(rel), string(filepath.Separator))
	for _, part := range parts[:len(parts)-1] {
		sub, err := d.Sub(part, create)
		d.Close()
		if err != nil {
			return nil, "", err
		}
		d = sub
	}
	return d, parts[len(parts)-1], nil
}

// copyEntry copies the entry name of d, a file or a folder, to the entry
// of the same name in out.
func copyEntry(d *safefs.Dir, name string, out *safefs.Dir) error {
	info, err := d.Lstat(name)
	if err != nil {
		return copyError(err)
	}
	if info.IsDir() {
		sub, err := d.Sub(name, false)
		if err != nil {
			return copyError(err)
		}
		defer sub.Close()
		to, err := out.Sub(name, true)
		if err != nil {
			return err
		}
		defer to.Close()
		// The names are read by path; each entry is then reached through
		// sub, which refuses a link.
		entries, err := os.ReadDir(sub.Path())
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := copyEntry(sub, e.Name(), to); err != nil {
				return err
			}
		}
		return nil
	}
	in, info, err := d.Open(name)
	if err != nil {
		return copyError(err)
	}
	defer in.Close()
	return out.Put(name, in, info.Mode().Perm(), "")
}

// copyError words an error of copyPath for the user.
func copyError(err error) error {
	var nr *safefs.NotRegularError
	var pe *fs.PathError
	switch {
	case errors.As(err, &nr) && nr.Kind != "a regular file":
		return fmt.Errorf("%s is %s: only files and folders are copied", nr.Path, nr.Kind)
	case errors.Is(err, fs.ErrNotExist) && errors.As(err, &pe):
		return fmt.Errorf("%s does not exist in the work tree", pe.Path)
	}
	return err
}

// The section of the repository's info/exclude that names the linked paths
// while a block of a run on this state folder has worktrees. A `folder/`
// pattern of .gitignore matches folders only, never the link that stands in
// for one in a worktree; info/exclude is shared by every worktree of the
// repository, so its `/folder` (which matches a link too) keeps the links of
// every task out of every commit, peal's and the agent's own.
func (s *Set) excludeStart() string {
	return "# " + strings.TrimSuffix(s.prefix, "/") + ": worktree_link paths of a running parallel block"
}
func (s *Set) excludeEnd() string { return "# end " + strings.TrimSuffix(s.prefix, "/") }

// maxExclude bounds what is read of info/exclude: a file of patterns a
// person keeps, far below this.
const maxExclude = 4 << 20

// excludeFile is the repository's info/exclude, shared by its worktrees.
func (s *Set) excludeFile(ctx context.Context) (string, error) {
	dir, err := s.git.CommonDir(ctx)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "info", "exclude"), nil
}

// Exclude names paths (relative to the repository folder) in the section
// of this state folder's runs in info/exclude, replacing what the section
// held.
func (s *Set) Exclude(ctx context.Context, paths []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The worktrees folder tells the next run that there may be something
	// to sweep: the section is written only once it exists.
	if err := os.MkdirAll(s.root, 0o755); err != nil {
		return fmt.Errorf("worktrees folder %s: %w", s.root, err)
	}
	var block []string
	for _, p := range paths {
		block = append(block, filepath.ToSlash(filepath.Join(s.rel, p)))
	}
	return s.writeSection(ctx, block)
}

// OpenBlock readies the worktrees of a block, made from base, before its
// first task starts: git is checked for sparse worktrees (CheckGit), the
// disk asked how many of want it holds at once (Fits), the links checked
// and named in info/exclude (CheckLinks, Exclude). It returns how many
// run at once; the error says why none can.
func (s *Set) OpenBlock(ctx context.Context, base string, want int, links []string, disk func(dir string) (Space, error)) (int, error) {
	if s.Sparse() {
		if err := s.CheckGit(ctx); err != nil {
			return 0, err
		}
	}
	slots, err := s.Fits(ctx, base, want, disk)
	if err == nil && len(links) > 0 {
		if err = s.CheckLinks(ctx, links); err == nil {
			err = s.Exclude(ctx, links)
		}
	}
	return slots, err
}

// CloseBlock removes a block's links from info/exclude once its
// worktrees are gone (Unexclude); what it cannot do is said in a line, and
// the next run does it.
func (s *Set) CloseBlock(ctx context.Context) {
	cctx, cancel := s.CleanupContext(ctx)
	defer cancel()
	if err := s.Unexclude(cctx); err != nil {
		s.log.Warn("could not remove the worktree_link paths from info/exclude; the next run removes them", "err", err)
	}
}

// Unexclude leaves in the section of this state folder's runs in
// info/exclude only what the home worktree links, once a block's
// worktrees are gone (the section goes when there is nothing left).
func (s *Set) Unexclude(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeSection(ctx, nil)
}

// unexclude removes the section of this state folder's runs from
// info/exclude. Callers hold mu.
func (s *Set) unexclude(ctx context.Context) error {
	return s.rewriteExclude(ctx, nil)
}

// writeSection writes the section of this state folder's runs with the
// folders the home worktree links and block (paths from the top, slash
// form); none of either removes it. Callers hold mu.
func (s *Set) writeSection(ctx context.Context, block []string) error {
	paths := append(append([]string(nil), s.homeLinks...), block...)
	if len(paths) == 0 {
		return s.rewriteExclude(ctx, nil)
	}
	lines := []string{s.excludeStart()}
	for _, p := range paths {
		lines = append(lines, "/"+escapePattern(p))
	}
	return s.rewriteExclude(ctx, append(lines, s.excludeEnd()))
}

// rewriteExclude writes info/exclude with the section of this state
// folder's runs replaced by section (removed when it is empty); the rest
// of the file stays as it is. The file is replaced at once, so that a git
// of a running task reads it whole.
func (s *Set) rewriteExclude(ctx context.Context, section []string) error {
	file, err := s.excludeFile(ctx)
	if err != nil {
		return err
	}
	data, err := safefs.ReadFile(file, maxExclude)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return safefs.Reason(err)
	}
	var kept []string
	in := false
	found := false
	for _, line := range strings.SplitAfter(string(data), "\n") {
		switch bare := strings.TrimRight(line, "\r\n"); {
		case bare == s.excludeStart():
			in, found = true, true
		case in && bare == s.excludeEnd():
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
	return safefs.WriteFile(file, []byte(text))
}
