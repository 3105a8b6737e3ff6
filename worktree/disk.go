package worktree

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
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
