package runner

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
)

// diskSpace is what a file system has free, as the system tells it.
type diskSpace struct {
	free  uint64 // bytes an unprivileged process may still write
	block uint64 // the unit a file's size is rounded up to
	files uint64 // files (inodes) that can still be made; 0: not told
}

// diskReserve is the space a block leaves free, beyond its worktrees, for
// what its tasks write (builds, caches, logs).
const diskReserve = 64 << 20

// treeSize is what one worktree of a block holds on disk: its checked-out
// files and folders, and its index.
type treeSize struct {
	bytes, files uint64
}

// indexEntry is about what one path takes in a worktree's index (git's
// entry of 62 bytes, its name, padding).
const indexEntry = 72

// size is what a worktree of base would hold: the blobs of base in the cone
// (or the whole tree), each rounded up to the file system's block, one block
// per folder, and its index (a sparse worktree's lists the folders it does
// not check out as one entry each). A file of base where the cone names a
// folder is an error: cone mode checks out folders only.
func (ts *trees) size(ctx context.Context, base string, block uint64) (treeSize, error) {
	lt := &lsTree{cone: ts.sparse, block: max(block, 1), folders: map[string]bool{}}
	if len(ts.sparse) == 0 {
		if err := ts.lsTree(ctx, lt, base, "-r"); err != nil {
			return treeSize{}, err
		}
	} else {
		// Only what the worktree holds is listed: every file of the cone's
		// folders, then the entries of the top and of the folders above
		// the cone's.
		if err := ts.lsTree(ctx, lt, base, append([]string{"-r", "--"}, ts.sparse...)...); err != nil {
			return treeSize{}, err
		}
		above := []string{"--", "./"}
		for _, f := range ts.sparse {
			for d := path.Dir(f); d != "."; d = path.Dir(d) {
				above = append(above, d+"/")
			}
		}
		lt.above = true
		if err := ts.lsTree(ctx, lt, base, above...); err != nil {
			return treeSize{}, err
		}
	}
	if lt.notFolder != "" {
		return treeSize{}, fmt.Errorf("worktree_sparse_paths names %s, a file at the block's base commit: cone mode checks out folders (their files, and the files of the folders above them)", lt.notFolder)
	}
	size := treeSize{bytes: lt.bytes + uint64(len(lt.folders)+1)*lt.block + roundUp(lt.index, lt.block), files: lt.files + uint64(len(lt.folders)) + 1}
	return size, nil
}

// lsTree adds to lt what git ls-tree -l lists of base with args (its
// options, then its paths, taken literally, from the top of the work tree).
// The listing is read as it comes: a tree of a million files lists more
// than a call's output keeps.
func (ts *trees) lsTree(ctx context.Context, lt *lsTree, base string, args ...string) error {
	argv := []string{"git", "-C", ts.git.Top(), "ls-tree", "-l", "-z"}
	if len(args) > 0 && args[0] == "-r" {
		argv, args = append(argv, "-r"), args[1:]
	}
	spec := ts.git.Caller.Command("git", append(append(argv, base), args...), ts.git.Timeout)
	spec.Env = append(spec.Env, "GIT_LITERAL_PATHSPECS=1")
	spec.StdoutSink = lt
	if err := runGit(ctx, spec); err != nil {
		return fmt.Errorf("git ls-tree %s: %w", base, err)
	}
	return nil
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
	n, _ := strconv.ParseUint(string(fields[3]), 10, 64)
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

// setUpBlock readies an isolated block before its first task starts: git
// is checked for sparse worktrees, the worktree_link paths are checked and
// named in info/exclude, and the disk is asked how many worktrees it holds. It returns how many tasks run at
// once; when none can start, every task fails with the reason in
// b.setUpErr, before any agent call.
func (r *run) setUpBlock(ctx context.Context, b *block, base string) int {
	want := min(int(r.cfg.MaxParallel), len(b.tasks))
	var err error
	if len(r.trees.sparse) > 0 {
		err = r.trees.checkSparseGit(ctx)
	}
	slots := want
	if err == nil {
		slots, err = r.blockSlots(ctx, base, len(b.tasks))
	}
	if err == nil && len(r.cfg.WorktreeLink) > 0 {
		if err = r.checkLinks(ctx); err == nil {
			err = r.trees.exclude(ctx, r.cfg.WorktreeLink)
		}
	}
	if err != nil {
		r.log.Error("no task of the block can start", "err", err)
		b.setUpErr = err
		return want
	}
	b.diskBound = slots < want
	return slots
}

// blockSlots is how many tasks of a block of n run at once: max_parallel,
// or fewer when the file system of the worktrees cannot hold that many of
// them, leaving diskReserve free; 0, with the error to
// fail the block's tasks with, when not even one fits. A system that does
// not tell its free space is trusted.
func (r *run) blockSlots(ctx context.Context, base string, n int) (int, error) {
	want := min(int(r.cfg.MaxParallel), n)
	where := r.trees.root
	if _, err := os.Stat(where); err != nil {
		where = r.trees.state
	}
	disk := r.disk
	if disk == nil {
		disk = statDisk
	}
	space, err := disk(where)
	if err != nil {
		r.log.Debug("no disk check before the block", "worktrees", where, "err", err)
		return want, nil
	}
	size, err := r.trees.size(ctx, base, space.block)
	if err != nil {
		return 0, err
	}
	// stet makes no worktree of its own here: a task's review session
	// starts at the commit its worktree starts from, where stet has
	// nothing to check out.
	per := size
	fits := 0
	if space.free > diskReserve {
		fits = int(min((space.free-diskReserve)/per.bytes, uint64(want)))
	}
	if space.files > 0 {
		fits = min(fits, int(min(space.files/per.files, uint64(want))))
	}
	dir := filepath.Dir(r.trees.root)
	switch {
	case fits == 0:
		files := ""
		if space.files > 0 {
			files = fmt.Sprintf(" and %d files", space.files)
		}
		return 0, fmt.Errorf("not enough disk space for one task's worktree in %s: a worktree takes about %s in %d files and folders, and %s%s are free, of which %s stay free for the tasks' own writes; free some space, set worktree_sparse_paths, or set parallel_isolation = shared",
			dir, byteSize(per.bytes), per.files, byteSize(space.free), files, byteSize(diskReserve))
	case fits < want:
		r.log.Warn("not enough disk space for every task of the block at once: fewer run at a time", "at_once", fits, "would_run", want,
			"per_task", byteSize(per.bytes), "per_task_files", per.files, "free", byteSize(space.free), "free_files", space.files, "worktrees", dir)
	}
	return fits, nil
}

// byteSize is n bytes for a person to read.
func byteSize(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, suffix := float64(n)/unit, "KiB"
	for _, s := range []string{"MiB", "GiB", "TiB"} {
		if v < unit {
			break
		}
		v, suffix = v/unit, s
	}
	return fmt.Sprintf("%.1f %s", v, suffix)
}
