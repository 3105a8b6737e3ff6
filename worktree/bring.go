package worktree

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"peal/internal/gitrepo"
	"peal/internal/safefs"
)

// BringError is a path whose change the work tree cannot take: the work
// tree holds there neither what the change started from nor what it made
// (something else changed it since), or it is no file peal writes.
type BringError struct {
	Path, Why string
	// Edited: the person changed the path meanwhile (a concurrent edit).
	Edited bool
}

func (e *BringError) Error() string {
	return fmt.Sprintf("the work tree cannot take the change of %s: %s", e.Path, e.Why)
}

// Bring writes into the work tree the changes of paths made in the home
// worktree: each path gets what the home worktree holds there now (a file,
// executable or not, or a link), or is removed when it is gone there, as git
// would check it out. Every path is checked first: the work tree must hold
// there what the change started from (the object Old, nothing when Old is
// empty) or already what it made; otherwise nothing is written and the
// error is a *BringError naming the path. A folder of the work tree is
// never followed through a link. A submodule's change is not brought, and
// returned in skipped.
func (s *Set) Bring(changes []gitrepo.Change) (skipped []string, err error) {
	from, to := s.Home().Path, s.git.Top()
	var writes, removals []gitrepo.Change
	for _, c := range changes {
		if c.Gitlink {
			skipped = append(skipped, c.Path)
			continue
		}
		rel := filepath.FromSlash(c.Path)
		if !filepath.IsLocal(rel) {
			return skipped, &BringError{Path: c.Path, Why: "it is not a path inside the tree"}
		}
		if why := s.forbidden(c.Path); why != "" {
			return skipped, &BringError{Path: c.Path, Why: why}
		}
		now, err := entryOf(from, rel)
		if err != nil {
			return skipped, &BringError{Path: c.Path, Why: "the run's worktree holds there " + err.Error()}
		}
		if c.Deleted {
			now = nil
		}
		have, err := entryOf(to, rel)
		if err != nil {
			return skipped, &BringError{Path: c.Path, Why: "the work tree holds there " + err.Error()}
		}
		switch {
		case have.same(now):
			continue // taken already (a run that died after bringing it)
		case c.Old == "" && have != nil:
			return skipped, &BringError{Path: c.Path, Why: untrackedWhy}
		case !have.is(c.Old):
			return skipped, &BringError{Path: c.Path, Why: "it changed in the work tree while the run worked on it", Edited: true}
		}
		if now == nil {
			removals = append(removals, c)
		} else {
			writes = append(writes, c)
		}
	}
	// Removals first: a file may give its name to a folder, and a folder
	// to a file.
	slices.Reverse(removals) // a folder's entries before the folder
	for _, c := range removals {
		if err := removeEntry(to, filepath.FromSlash(c.Path)); err != nil {
			return skipped, err
		}
	}
	for _, c := range writes {
		if err := copyInto(from, to, filepath.FromSlash(c.Path)); err != nil {
			return skipped, err
		}
	}
	return skipped, nil
}

// untrackedWhy is why a path the work tree holds but does not track (a
// file git ignores there: .env, a dependency folder) is never written.
const untrackedWhy = "the work tree holds there something git does not track there (a file it ignores, as .env is): peal never overwrites nor removes it"

// InTheWay is the first path the commits from HEAD to rev change that no
// call's work may write (forbidden: peal's own folders, a git folder), or
// the first they add where the
// work tree holds something git does not track there, or below a folder
// of the path that is no folder there (a link, a file): moving the work
// tree to rev would overwrite or remove what the user keeps there
// untracked (an ignored .env, say). It is a *BringError; nil when there is
// none.
func (s *Set) InTheWay(ctx context.Context, rev string) error {
	changed, added, err := s.git.ChangedAndAdded(ctx, "HEAD", rev)
	if err != nil {
		return err
	}
	for _, p := range changed {
		if why := s.forbidden(p); why != "" {
			return &BringError{Path: p, Why: why}
		}
	}
	top := s.git.Top()
	for _, p := range added {
		rel := filepath.FromSlash(p)
		if !filepath.IsLocal(rel) {
			return &BringError{Path: p, Why: "it is not a path inside the tree"}
		}
		if _, err := os.Lstat(filepath.Join(top, rel)); err == nil {
			return &BringError{Path: p, Why: untrackedWhy}
		}
		for dir := filepath.Dir(rel); dir != "."; dir = filepath.Dir(dir) {
			if info, err := os.Lstat(filepath.Join(top, dir)); err == nil && !info.IsDir() {
				return &BringError{Path: p, Why: "the work tree holds " + filepath.ToSlash(dir) + " there, which is no folder and which git does not track: peal never overwrites nor removes it"}
			}
		}
	}
	return nil
}

// entry is a file or link of a tree, as git holds it: its content (a
// link's target) and whether it is executable; nil when there is nothing
// there.
type entry struct {
	path   string // full path, to read a file's content
	link   bool
	exec   bool
	size   int64
	target string // a link's
}

// entryOf describes rel under root, without following a link among its
// folders; nil when it is not there. A folder, a named pipe or a device is
// an error: git holds none of them as a file.
func entryOf(root, rel string) (*entry, error) {
	d, name, err := openParent(root, rel, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var nr *safefs.NotRegularError
	if errors.As(err, &nr) {
		return nil, fmt.Errorf("%s among its folders", nr.Kind)
	}
	if err != nil {
		return nil, err
	}
	defer d.Close()
	info, err := d.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	e := &entry{path: d.Join(name), size: info.Size()}
	switch m := info.Mode(); {
	case m&fs.ModeSymlink != 0:
		e.link = true
		if e.target, err = d.Readlink(name); err != nil {
			return nil, err
		}
	case m.IsRegular():
		e.exec = m.Perm()&0o100 != 0
	case m.IsDir():
		return nil, errors.New("a folder")
	default:
		return nil, errors.New("a special file")
	}
	return e, nil
}

// same reports whether e and o hold the same (both nil: nothing).
func (e *entry) same(o *entry) bool {
	switch {
	case e == nil || o == nil:
		return e == o
	case e.link || o.link:
		return e.link == o.link && e.target == o.target
	case e.exec != o.exec || e.size != o.size:
		return false
	}
	a, err := os.ReadFile(e.path)
	if err != nil {
		return false
	}
	b, err := os.ReadFile(o.path)
	return err == nil && bytes.Equal(a, b)
}

// is reports whether e holds git's object id ("": nothing).
func (e *entry) is(id string) bool {
	if e == nil || id == "" {
		return e == nil && id == ""
	}
	var h hash.Hash
	switch len(id) {
	case 40:
		h = sha1.New()
	case 64:
		h = sha256.New()
	default:
		return false
	}
	if e.link {
		fmt.Fprintf(h, "blob %d\x00%s", len(e.target), e.target)
	} else {
		f, err := os.Open(e.path)
		if err != nil {
			return false
		}
		defer f.Close()
		info, err := f.Stat()
		if err != nil || !info.Mode().IsRegular() {
			return false
		}
		h.Write([]byte("blob " + strconv.FormatInt(info.Size(), 10) + "\x00"))
		if n, err := io.Copy(h, f); err != nil || n != info.Size() {
			return false
		}
	}
	return hex.EncodeToString(h.Sum(nil)) == id
}

// removeEntry removes rel from root, and then the folders it leaves empty,
// as git does.
func removeEntry(root, rel string) error {
	d, name, err := openParent(root, rel, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	err = d.Remove(name)
	d.Close()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for dir := filepath.Dir(rel); dir != "."; dir = filepath.Dir(dir) {
		p, n, err := openParent(root, dir, false)
		if err != nil {
			break
		}
		err = p.Remove(n) // fails, and stops, on a folder that is not empty
		p.Close()
		if err != nil {
			break
		}
	}
	return nil
}

// copyInto writes rel of root from into the same place under to: a file
// with its executable bit, or a link. The folders on the way are made.
func copyInto(from, to, rel string) error {
	src, name, err := openParent(from, rel, false)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, _, err := openParent(to, rel, true)
	var nr *safefs.NotRegularError
	if errors.As(err, &nr) {
		return &BringError{Path: filepath.ToSlash(rel), Why: "the work tree holds " + nr.Kind + " among its folders"}
	}
	if err != nil {
		return err
	}
	defer dst.Close()
	info, err := src.Lstat(name)
	if err != nil {
		return err
	}
	if info.Mode()&fs.ModeSymlink != 0 {
		target, err := src.Readlink(name)
		if err != nil {
			return err
		}
		return dst.Put(name, nil, 0, target)
	}
	f, _, err := src.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	perm := fs.FileMode(0o666)
	if info.Mode().Perm()&0o100 != 0 {
		perm = 0o777
	}
	return dst.Put(name, f, perm, "")
}

// BringIgnored brings into the work tree what a task did, in the home
// worktree, to the entries git ignores (ignored: as git status lists them
// there): a linked entry whose link is gone was removed, and is removed
// from the work tree; an entry that is not one of the links (made by the
// task: a build's output, a dependency folder made again) is moved to the
// work tree, in place of the entry there, and linked back. What it moves
// is data only (dataOnly), every entry checked before any moves: else the
// error is a *BringError naming the first that is not, and nothing is
// brought. It returns the entries linked into the home worktree now, and
// whether it brought any.
func (s *Set) BringIgnored(ctx context.Context, ignored []string) (linked []string, brought bool, err error) {
	h, top := s.Home(), s.git.Top()
	links := s.readLinks()
	name := func(p string) string { return strings.TrimSuffix(p, "/") }
	var gone, made []string
	for _, p := range links {
		if _, err := os.Lstat(filepath.Join(h.Path, filepath.FromSlash(name(p)))); !errors.Is(err, fs.ErrNotExist) {
			linked = append(linked, p)
		} else {
			gone = append(gone, p)
		}
	}
	for _, p := range ignored {
		rel := filepath.FromSlash(name(p))
		if name(p) == ".review" || strings.HasPrefix(p, ".review/") || linkedTo(filepath.Join(top, rel), filepath.Join(h.Path, rel)) {
			continue
		}
		if err := s.dataOnly(h.Path, rel); err != nil {
			return links, false, err
		}
		made = append(made, p)
	}
	for _, p := range gone {
		if err := s.discardIgnored(ctx, filepath.FromSlash(name(p))); err != nil {
			return links, brought, err
		}
		brought = true
	}
	for _, p := range made {
		rel := filepath.FromSlash(name(p))
		was := slices.IndexFunc(linked, func(l string) bool { return name(l) == name(p) })
		if was >= 0 {
			// The task made again what it had through the link.
			if err := s.discardIgnored(ctx, rel); err != nil {
				return links, brought, err
			}
		}
		if err := moveInto(h.Path, top, rel); err != nil {
			return links, brought, err
		}
		if err := linkPath(top, rel, h.Path); err != nil {
			return links, brought, fmt.Errorf("linking %s back into the run's worktree: %w", p, err)
		}
		if was >= 0 {
			linked = slices.Delete(linked, was, was+1)
		}
		linked, brought = append(linked, p), true
	}
	if brought {
		err = s.NoteLinks(ctx, linked)
	}
	return linked, brought, err
}

// dataOnly checks that the entry rel of the tree root, and everything a
// folder holds, may come back to the work tree: what comes back from a
// call is data only. Files, links and folders come; a set-uid, set-gid or
// sticky bit, a named pipe, a socket or a device does not (a set-uid copy
// of a shell in an ignored build/ would run as its owner for anyone), nor
// anything in peal's own folders or a git folder (forbidden). The error is
// a *BringError naming the first entry that may not come.
func (s *Set) dataOnly(root, rel string) error {
	if why := s.forbidden(filepath.ToSlash(rel)); why != "" {
		return &BringError{Path: filepath.ToSlash(rel), Why: why}
	}
	return filepath.WalkDir(filepath.Join(root, rel), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r, rerr := filepath.Rel(root, p)
		if rerr != nil {
			return rerr
		}
		if strings.EqualFold(d.Name(), ".git") {
			return &BringError{Path: filepath.ToSlash(r), Why: "it is a git folder, which no call's work brings (git would run what it holds)"}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch m := info.Mode(); {
		case m&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0:
			return &BringError{Path: filepath.ToSlash(r), Why: fmt.Sprintf("it is set-uid, set-gid or sticky (mode %s): what comes back from a call is data only", m)}
		case !m.IsRegular() && !m.IsDir() && m&fs.ModeSymlink == 0:
			return &BringError{Path: filepath.ToSlash(r), Why: "it is a named pipe, a socket or a device: what comes back from a call is data only"}
		}
		return nil
	})
}

// forbidden says why no call's work may write the path rel (slash form,
// from the top of the work tree): a git folder among its names, or peal's
// own folders (state_dir, knowledge_dir, agent_log_dir, stet's .review) at
// it, within it or below it; "" when it may.
func (s *Set) forbidden(rel string) string {
	parts := strings.Split(rel, "/")
	if slices.ContainsFunc(parts, func(p string) bool { return strings.EqualFold(p, ".git") }) {
		return "it is in a git folder, which no call's work writes (git would run what it holds)"
	}
	top := s.git.Top()
	full := filepath.Join(top, filepath.FromSlash(rel))
	for _, own := range append([]string{filepath.Join(top, ".review")}, s.own...) {
		if safefs.Same(own, top) {
			continue // a folder of peal's that is the whole tree guards nothing in it
		}
		if safefs.Within(full, own) || safefs.Within(own, full) {
			where, err := filepath.Rel(top, own)
			if err != nil {
				where = own
			}
			return "it is, or holds, peal's own folder " + filepath.ToSlash(where) + ", which no call's work writes"
		}
	}
	return ""
}

// asideName is the folder, in the worktrees folder, where an older peal
// kept the files git ignores that a task removed or replaced; a sweep
// leaves it.
const asideName = homeName + ".aside"

// discardIgnored takes out of the work tree the entry rel that git ignores
// there, which a task in the home worktree removed or made anew: a folder
// (a build's output, dependencies) goes; a file or a link (a .env, a
// setting of the user's) goes too once a copy of it is kept: the task's
// mark of the work tree holds one (Mark), or it is kept now on a ref of
// its own, noted and named.
func (s *Set) discardIgnored(ctx context.Context, rel string) error {
	path := filepath.Join(s.git.Top(), rel)
	info, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case info.IsDir():
		return os.RemoveAll(path)
	}
	if !s.markHolds(filepath.ToSlash(rel)) {
		kept, err := s.keepFiles(ctx, -1, []string{filepath.ToSlash(rel)}, "the run's checks removed or replaced it in the run's worktree")
		if err != nil {
			return fmt.Errorf("keeping %s before it goes: %w", rel, err)
		}
		s.log.Warn(kept.Line())
	}
	return os.Remove(path)
}

// moveInto moves rel of from to the same place under to, where nothing may
// be. A move across file systems copies.
func moveInto(from, to, rel string) error {
	dst := filepath.Join(to, rel)
	if _, err := os.Lstat(dst); err == nil {
		return &BringError{Path: filepath.ToSlash(rel), Why: "the work tree made it too while the run worked", Edited: true}
	}
	d, _, err := openParent(to, rel, true)
	var nr *safefs.NotRegularError
	if errors.As(err, &nr) {
		return &BringError{Path: filepath.ToSlash(rel), Why: "the work tree holds " + nr.Kind + " among its folders"}
	}
	if err != nil {
		return err
	}
	d.Close()
	src := filepath.Join(from, rel)
	if err := os.Rename(src, dst); err == nil {
		return nil
	}
	if err := copyTree(src, dst); err != nil {
		return err
	}
	return os.RemoveAll(src)
}

// copyTree copies the file, link or folder src to dst: links as links,
// special files left out.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		info, err := e.Info()
		if err != nil {
			return err
		}
		switch m := info.Mode(); {
		case m.IsDir():
			return os.Mkdir(out, m.Perm()|0o700)
		case m&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(target, out)
		case m.IsRegular():
			in, err := os.Open(path)
			if err != nil {
				return err
			}
			defer in.Close()
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, m.Perm())
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, in); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		}
		return nil // a named pipe, a socket, a device: not brought
	})
}
