package worktree

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"peal/internal/text"
)

// Space is what a file system has free, as the system tells it (StatDisk).
type Space struct {
	Free  uint64 // bytes an unprivileged process may still write
	Block uint64 // the unit a file's size is rounded up to
	Files uint64 // files (inodes) that can still be made; 0: not told
}

// Size is what one worktree holds on disk: its checked-out files and
// folders, and its index.
type Size struct {
	Bytes, Files uint64
}

// Reserve is the space the worktrees of a block leave free, beyond
// themselves, for what their tasks write (builds, caches, logs).
const Reserve = 64 << 20

// Fits is how many worktrees made from base, up to want, the file system
// of the worktrees holds at once, leaving Reserve free (fewer than want is
// warned of); 0, with the error that says what to do, when not even one
// fits. disk tells the free space (nil: StatDisk); a system that does not
// tell its free space is trusted.
func (s *Set) Fits(ctx context.Context, base string, want int, disk func(dir string) (Space, error)) (int, error) {
	where := s.root
	if _, err := os.Stat(where); err != nil {
		where = filepath.Dir(where) // the state folder: the worktrees folder is made in it
	}
	if disk == nil {
		disk = StatDisk
	}
	space, err := disk(where)
	if err != nil {
		s.log.Debug("no disk check before the block", "worktrees", where, "err", err)
		return want, nil
	}
	// stet makes no worktree of its own here: a task's review session
	// starts at the commit its worktree starts from, where stet has
	// nothing to check out.
	per, err := s.Size(ctx, base, space.Block)
	if err != nil {
		return 0, err
	}
	fits := 0
	if space.Free > Reserve {
		fits = int(min((space.Free-Reserve)/per.Bytes, uint64(want)))
	}
	if space.Files > 0 {
		fits = min(fits, int(min(space.Files/per.Files, uint64(want))))
	}
	dir := filepath.Dir(s.root)
	switch {
	case fits == 0:
		files := ""
		if space.Files > 0 {
			files = fmt.Sprintf(" and %d files", space.Files)
		}
		return 0, fmt.Errorf("not enough disk space for one task's worktree in %s: a worktree takes about %s in %d files and folders, and %s%s are free, of which %s stay free for the tasks' own writes; free some space, set worktree_sparse_paths, or set parallel_isolation = shared",
			dir, text.Bytes(per.Bytes), per.Files, text.Bytes(space.Free), files, text.Bytes(Reserve))
	case fits < want:
		s.log.Warn("not enough disk space for every task of the block at once: fewer run at a time", "at_once", fits, "would_run", want,
			"per_task", text.Bytes(per.Bytes), "per_task_files", per.Files, "free", text.Bytes(space.Free), "free_files", space.Files, "worktrees", dir)
	}
	return fits, nil
}

// indexEntry is about what one path takes in a worktree's index (git's
// entry of 62 bytes, its name, padding).
const indexEntry = 72

// Size is what a worktree of base would hold: the blobs of base in the
// cone (or the whole tree), each rounded up to the file system's block, one
// block per folder, and its index (a sparse worktree's lists the folders it
// does not check out as one entry each). A file of base where the cone
// names a folder is an error: cone mode checks out folders only.
func (s *Set) Size(ctx context.Context, base string, block uint64) (Size, error) {
	lt := &lsTree{cone: s.sparse, block: max(block, 1), folders: map[string]bool{}}
	if len(s.sparse) == 0 {
		if err := s.git.ListTree(ctx, lt, base, true); err != nil {
			return Size{}, err
		}
	} else {
		// Only what the worktree holds is listed: every file of the cone's
		// folders, then the entries of the top and of the folders above
		// the cone's.
		if err := s.git.ListTree(ctx, lt, base, true, s.sparse...); err != nil {
			return Size{}, err
		}
		above := []string{"./"}
		for _, f := range s.sparse {
			for d := path.Dir(f); d != "."; d = path.Dir(d) {
				above = append(above, d+"/")
			}
		}
		lt.above = true
		if err := s.git.ListTree(ctx, lt, base, false, above...); err != nil {
			return Size{}, err
		}
	}
	if lt.notFolder != "" {
		return Size{}, fmt.Errorf("worktree_sparse_paths names %s, a file at the block's base commit: cone mode checks out folders (their files, and the files of the folders above them)", lt.notFolder)
	}
	return Size{Bytes: lt.bytes + uint64(len(lt.folders)+1)*lt.block + roundUp(lt.index, lt.block), Files: lt.files + uint64(len(lt.folders)) + 1}, nil
}

// lsTree adds up, as git ls-tree -l -z writes it, what a worktree of the
// cone holds.
type lsTree struct {
	cone  cone
	block uint64
	// above: the entries listed are those of the top and of the folders
	// above the cone's: a file of a cone folder was counted already, and a
	// folder is one entry of a sparse index.
	above        bool
	rest         []byte // a record not yet ended
	bytes, files uint64
	index        uint64
	folders      map[string]bool
	notFolder    string
}

func (lt *lsTree) Write(p []byte) (int, error) {
	n := len(p)
	for {
		i := bytes.IndexByte(p, 0)
		if i < 0 {
			lt.rest = append(lt.rest, p...)
			return n, nil
		}
		rec := p[:i]
		if len(lt.rest) > 0 {
			rec = append(lt.rest, rec...)
			lt.rest = lt.rest[:0]
		}
		lt.record(rec)
		p = p[i+1:]
	}
}

// record counts one entry, "<mode> SP <type> SP <object> SP+ <size> TAB
// <path>"; a submodule ("commit", size "-") is not checked out.
func (lt *lsTree) record(rec []byte) {
	meta, name, ok := bytes.Cut(rec, []byte{'\t'})
	fields := bytes.Fields(meta)
	if !ok || len(fields) != 4 {
		return
	}
	p := string(name)
	switch kind := string(fields[1]); {
	case kind == "tree" && lt.above:
		if !lt.cone.within(p) && !slices.ContainsFunc(lt.cone, func(f string) bool { return f == p || strings.HasPrefix(f, p+"/") }) {
			lt.index += indexEntry + uint64(len(p))
		}
		return
	case kind != "blob", lt.above && lt.cone.within(p):
		return
	}
	lt.index += indexEntry + uint64(len(p))
	if slices.Contains(lt.cone, p) && lt.notFolder == "" {
		lt.notFolder = p
	}
	if !lt.cone.holds(p) {
		return
	}
	n, _ := strconv.ParseUint(string(fields[3]), 10, 64) // a blob's size is a number
	lt.bytes += roundUp(n, lt.block)
	lt.files++
	for d := path.Dir(p); d != "." && !lt.folders[d]; d = path.Dir(d) {
		lt.folders[d] = true
	}
}

// roundUp is n rounded up to a multiple of unit; a file takes a block even
// when it is empty.
func roundUp(n, unit uint64) uint64 {
	return max(1, (n+unit-1)/unit) * unit
}
