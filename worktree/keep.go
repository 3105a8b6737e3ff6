package worktree

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"peal/internal/gitrepo"
	"peal/internal/safefs"
	"peal/state"
)

// A task's work reaches the user's branch only once the task completed,
// nothing of the user's goes without a copy, and the user's history is only
// added to. Before a task (or a block sharing its work) works at the run's
// home, the work tree is marked (Mark): its HEAD and branch, the user's
// branches and tags, the index, and its files (tracked as they are,
// untracked, and the files git ignores, within a bound) as tree objects.
// When the task ends, Settle compares: a task that rewrote history (moved
// the branch backwards, rewrote a commit, moved or deleted another ref of
// the user's, moved HEAD to another branch) or that did not complete has
// its work kept on a branch and the work tree put back as the mark holds
// it, refs, files and index; a task that completed keeps its work, and
// the files of the user's it removed or replaced (their content was no
// commit's) are kept on a ref of their own. The mark is noted in the
// repository's git folder until the task's outcome is saved (Unmark), so
// that the next run settles a task a kill cut off the same way.

// Bounds of what a mark copies of the files git ignores: an ignored file
// (a .env, a local setting, a small build's output) is at most
// maxIgnoredFile, and all of them together at most maxIgnoredTotal; an
// ignored folder is copied file by file when it holds at most
// maxIgnoredFolder entries, and not at all when it holds more (a
// dependencies folder: what a task does to it is what an install makes
// again). What is not copied is named in a warning, once a run.
const (
	maxIgnoredFile   = 4 << 20
	maxIgnoredTotal  = 64 << 20
	maxIgnoredFolder = 1000
)

// Mark is what the work tree held when a task began.
type Mark struct {
	Tasks  []int  `json:"tasks"`
	Head   string `json:"head"`   // HEAD's commit; "" before the first commit
	Branch string `json:"branch"` // the branch HEAD named (refs/heads/main); "" detached
	// Refs are the user's branches and tags (not peal's), each with its
	// object.
	Refs map[string]string `json:"refs"`
	// Tree is the tree of the files git does not ignore, as they were
	// (tracked, untracked); Files the same with the ignored files of
	// Ignored (within the bounds).
	Tree    string   `json:"tree"`
	Files   string   `json:"files"`
	Ignored []string `json:"ignored,omitempty"`
	// Entries are every entry git ignored (a folder wholly ignored as
	// one, with a trailing /), copied or not: what a task made beyond them
	// is its own, and goes when the work tree is put back.
	Entries []string `json:"ignored_entries,omitempty"`
	// Index: the index was copied beside the note; Staged is the tree it
	// held ("" when none, or when it could not be written: a conflict).
	Index  bool   `json:"index"`
	Staged string `json:"staged,omitempty"`
	// left: an earlier run noted it and died (LeftMark).
	left bool
}

// Settled is what Settle did.
type Settled struct {
	// Landed: the task's work stayed (it completed, history intact).
	Landed bool
	// Rewrote names the refs the task moved where history is only added
	// to (put back since); none when it moved none.
	Rewrote []string
	// Work is the branch that keeps the work that did not land, Files the
	// ref that keeps the files of the user's the task removed or replaced
	// (nil: none).
	Work  *state.Kept
	Files *state.Kept
}

// HistoryError: a task moved refs of the user's where history is only
// added to. They are put back; what the task made is kept on a branch.
type HistoryError struct {
	Task int
	What []string
	Kept *state.Kept // nil: it made nothing to keep
}

func (e *HistoryError) Error() string {
	msg := fmt.Sprintf("rewrote the repository's history (%s): put back where it was", strings.Join(e.What, "; "))
	if e.Kept != nil {
		msg += fmt.Sprintf("; what the task made is kept on branch %s (see it: %s)", e.Kept.Ref, e.Kept.Look)
	}
	return msg
}

// KeptError is the error of a task whose work is kept on a branch: the
// line it ends the run with names the branch.
type KeptError struct {
	Err  error
	Kept *state.Kept
}

func (e *KeptError) Error() string {
	return fmt.Sprintf("%v; its work is kept on branch %s, not on your branch (see it: %s; take it: %s)", e.Err, e.Kept.Ref, e.Kept.Look, e.Kept.Take)
}
func (e *KeptError) Unwrap() error { return e.Err }

// peals starts the branches that are peal's own (peal-<id>/…,
// peal-kept/…), which no task's history check counts.
const peals = "refs/heads/peal-"

// markName is the base name of the mark note of this state folder's runs.
func (s *Set) markName() string { return strings.TrimSuffix(s.prefix, "/") }

// notes is the folder of peal's notes in the repository's git folder.
func (s *Set) notes(ctx context.Context) (string, error) {
	s.keptMu.Lock()
	defer s.keptMu.Unlock()
	if s.notesDir != "" {
		return s.notesDir, nil
	}
	_, common := s.git.GitDir()
	if common == "" {
		var err error
		if common, err = s.git.CommonDir(ctx); err != nil {
			return "", err
		}
	}
	s.notesDir = filepath.Join(common, "peal")
	return s.notesDir, nil
}

// Own names peal's folders (state_dir, knowledge_dir, agent_log_dir,
// absolute): no mark copies them, no work brought back writes there.
func (s *Set) Own(dirs ...string) {
	s.own = nil
	for _, d := range dirs {
		if d != "" {
			s.own = append(s.own, filepath.Clean(d))
		}
	}
}

// Mark marks the work tree before tasks work at the run's home, and notes
// the mark in the repository's git folder.
func (s *Set) Mark(ctx context.Context, tasks []int) (*Mark, error) {
	m := &Mark{Tasks: tasks}
	var err error
	if m.Head, m.Branch, m.Refs, err = s.git.HeadAndRefs(ctx, peals); err != nil {
		return nil, err
	}
	ignored, err := s.ignored(ctx, s.git, "", s.own)
	if err != nil {
		return nil, err
	}
	m.Ignored, m.Entries = s.copiedIgnored(ignored), ignored
	notes, err := s.notes(ctx)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(notes, "marks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	index := filepath.Join(dir, s.markName()+".index")
	if err := s.git.SaveIndex(ctx, index); err != nil {
		return nil, fmt.Errorf("copying the index before the task: %w", err)
	}
	_, err = os.Lstat(index)
	m.Index = err == nil
	if m.Index {
		// What was staged, so that a version staged and then changed in
		// the work tree is not lost to a task's `git add -A`.
		m.Staged, _ = s.git.TreeOfIndex(ctx, index)
	}
	if m.Tree, m.Files, err = s.snapshots(ctx, m.Ignored); err != nil {
		return nil, fmt.Errorf("noting the work tree's files before the task: %w", err)
	}
	data, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if err := safefs.WriteFile(filepath.Join(dir, s.markName()+".json"), append(data, '\n')); err != nil {
		return nil, fmt.Errorf("noting the work tree before the task: %w", safefs.Reason(err))
	}
	s.keptMu.Lock()
	s.marked = m
	s.keptMu.Unlock()
	return m, nil
}

// copiedIgnored are the files and links that a mark copies of the ignored
// entries (as git status lists them, a folder wholly ignored as one):
// within the bounds, in order. Those left out are named in a warning, once
// per run.
func (s *Set) copiedIgnored(ignored []string) []string {
	var out, over []string
	var total int64
	top := s.git.Top()
	take := func(p string, info fs.FileInfo) {
		if !(info.Mode().IsRegular() || info.Mode()&fs.ModeSymlink != 0) {
			return
		}
		if info.Size() > maxIgnoredFile || total+info.Size() > maxIgnoredTotal {
			over = append(over, p)
			return
		}
		total += info.Size()
		out = append(out, p)
	}
	for _, p := range ignored {
		if !strings.HasSuffix(p, "/") {
			if info, err := os.Lstat(filepath.Join(top, filepath.FromSlash(p))); err == nil {
				take(p, info)
			}
			continue
		}
		files, ok := folderFiles(top, p)
		if !ok {
			over = append(over, p)
			continue
		}
		for _, f := range files {
			take(f.path, f.info)
		}
	}
	s.keptMu.Lock()
	defer s.keptMu.Unlock()
	if s.warnedLarge == nil {
		s.warnedLarge = map[string]bool{}
	}
	var news []string
	for _, p := range over {
		if !s.warnedLarge[p] {
			s.warnedLarge[p] = true
			news = append(news, p)
		}
	}
	if len(news) > 0 {
		s.log.Warn(fmt.Sprintf("files git ignores that peal does not copy before a task (over %d MiB each or %d MiB in all, or in a folder of more than %d entries): a task that removes or replaces them leaves no copy",
			maxIgnoredFile>>20, maxIgnoredTotal>>20, maxIgnoredFolder), "files", gitrepo.ListPaths(news, 5))
	}
	return out
}

// ignoredFile is a file of an ignored folder, from the top of the tree.
type ignoredFile struct {
	path string
	info fs.FileInfo
}

// folderFiles are the files and links of the ignored folder dir (slash
// form, with its trailing /, from top), never through a link; false when it
// holds more than maxIgnoredFolder entries.
func folderFiles(top, dir string) ([]ignoredFile, bool) {
	var files []ignoredFile
	n := 0
	err := filepath.WalkDir(filepath.Join(top, filepath.FromSlash(dir)), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // what cannot be read is not copied
		}
		if n++; n > maxIgnoredFolder {
			return fs.SkipAll
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		rel, err := filepath.Rel(top, path)
		if err == nil {
			files = append(files, ignoredFile{path: filepath.ToSlash(rel), info: info})
		}
		return nil
	})
	return files, err == nil && n <= maxIgnoredFolder
}

// snapshots are the trees of what the work tree holds: without what git
// ignores, and with the ignored files of also.
func (s *Set) snapshots(ctx context.Context, also []string) (tree, files string, err error) {
	index, done, err := s.tempIndex()
	if err != nil {
		return "", "", err
	}
	defer done()
	if tree, err = s.git.Snapshot(ctx, index); err != nil {
		return "", "", err
	}
	if len(also) == 0 {
		return tree, tree, nil
	}
	files, err = s.git.SnapshotWith(ctx, index, also)
	return tree, files, err
}

// tempIndex is a new file for a temporary index, and what removes it.
func (s *Set) tempIndex() (string, func(), error) {
	dir := filepath.Join(s.state, "tmp")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	f, err := os.CreateTemp(dir, "mark-index-")
	if err != nil {
		return "", nil, err
	}
	f.Close()
	return f.Name(), func() { os.Remove(f.Name()) }, nil
}

// KeepContext is a context for keeping a task's work and putting the work
// tree back, which must end even once ctx is cancelled: each git command
// is bounded by git's timeout, and the whole by a short grace once ctx is
// done (CleanupContext); a signal that comes meanwhile lets it end.
func (s *Set) KeepContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Err() != nil {
		return s.CleanupContext(ctx)
	}
	return context.WithCancel(context.WithoutCancel(ctx))
}

// Unmark drops the note of the mark once the task's outcome is saved.
func (s *Set) Unmark(ctx context.Context) {
	notes, err := s.notes(ctx)
	if err != nil {
		return
	}
	for _, ext := range []string{".json", ".index"} {
		if err := os.Remove(filepath.Join(notes, "marks", s.markName()+ext)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("could not remove the note of the work tree before a task; the next run reads it and finds the task settled", "err", err)
		}
	}
}

// LeftMark is the mark an earlier run noted and did not drop (it was
// killed during a task, or before its outcome was saved); false when
// there is none, or it cannot be read.
func (s *Set) LeftMark(ctx context.Context) (*Mark, bool) {
	notes, err := s.notes(ctx)
	if err != nil {
		return nil, false
	}
	data, err := safefs.ReadFile(filepath.Join(notes, "marks", s.markName()+".json"), 1<<20)
	var m Mark
	if err != nil || json.Unmarshal(data, &m) != nil || len(m.Tasks) == 0 || m.Tree == "" || m.Files == "" {
		return nil, false
	}
	m.left = true
	s.keptMu.Lock()
	s.left = m.Tasks[0]
	s.keptMu.Unlock()
	return &m, true
}

// Settle ends a mark: completed says whether the task completed (its
// outcome is to be saved as such), inPlace whether it worked in the work
// tree itself (unconfined) rather than in the home worktree, whose work
// the caller kept or brought already; why is how it ended, for what is
// kept. See the comment at the top of the file. What it kept is said in
// a line each. The error is of what could not be put back or kept; the
// work tree is then as the task left it.
//
// A task in the home worktree never wrote the work tree's files but those
// git ignores that are linked there: putting back restores the refs and
// the ignored files the mark copied, and leaves the rest, which is the
// user's (changed meanwhile, or the work brought of a task that
// completed).
func (s *Set) Settle(ctx context.Context, m *Mark, completed, inPlace bool, why string, now time.Time) (out Settled, err error) {
	defer func() {
		s.keptMu.Lock()
		s.marked = nil
		s.keptMu.Unlock()
		for _, k := range []*state.Kept{out.Work, out.Files} {
			if k != nil {
				s.log.Warn(k.Line())
			}
		}
	}()
	head, branch, refs, err := s.git.HeadAndRefs(ctx, peals)
	if err != nil {
		return out, err
	}
	out.Rewrote = s.rewrote(ctx, m, branch, head, refs)
	task := m.Tasks[0]
	if completed && len(out.Rewrote) == 0 {
		out.Landed = true
		out.Files, err = s.keepRemoved(ctx, m, now)
		s.record(ctx, out.Files)
		return out, err
	}
	if len(out.Rewrote) > 0 {
		why = fmt.Sprintf("task %d rewrote history (%s): put back", task, strings.Join(out.Rewrote, "; "))
	}
	if m.left {
		// A run that died may have begun bringing the home worktree's work
		// into the work tree: its files are put back as well (what they
		// hold now kept on the branch first; as the mark has them, nothing
		// changes).
		inPlace = true
	}
	keep := &Mark{Head: m.Head, Branch: m.Branch, Tree: m.Tree}
	if !inPlace {
		// Only the commits the refs moved to: the files are not the task's.
		keep.Tree = ""
	}
	if out.Work, err = s.keepWork(ctx, s.git, keep, task, head, now); err != nil {
		return out, fmt.Errorf("keeping the task's work on a branch: %w", err)
	}
	if out.Work != nil {
		out.Work.Why = why
		s.record(ctx, out.Work)
	}
	if err := s.putRefsBack(ctx, m, branch, refs); err != nil {
		return out, err
	}
	if inPlace {
		err = s.putBack(ctx, m)
	} else {
		err = s.putIgnoredBack(ctx, m)
	}
	if err != nil {
		return out, err
	}
	s.Unmark(ctx)
	return out, nil
}

// MarkRefs marks the user's refs and HEAD's branch before a parallel
// block whose tasks work in worktrees of their own (their files are
// not the work tree's): see RefsBack.
func (s *Set) MarkRefs(ctx context.Context) (*Mark, error) {
	m := &Mark{}
	var err error
	m.Head, m.Branch, m.Refs, err = s.git.HeadAndRefs(ctx, peals)
	return m, err
}

// RefsBack puts back where m has them the user's refs that a task of a
// block moved or deleted, and HEAD on its branch, and names each; the
// branch HEAD names is the block's merges' to move, and is left. The tasks
// of a block share the repository's refs: the first task to end after one
// moved is the one told, one at a time.
func (s *Set) RefsBack(ctx context.Context, m *Mark) ([]string, error) {
	s.refsMu.Lock()
	defer s.refsMu.Unlock()
	head, branch, refs, err := s.git.HeadAndRefs(ctx, peals)
	if err != nil {
		return nil, err
	}
	var moved []string
	for _, what := range s.rewrote(ctx, &Mark{Branch: m.Branch, Head: m.Head, Refs: m.Refs}, branch, head, refs) {
		if !strings.HasPrefix(what, refName(m.Branch, "")+" moved") {
			moved = append(moved, what)
		}
	}
	if len(moved) == 0 {
		return nil, nil
	}
	others := maps.Clone(m.Refs)
	delete(others, m.Branch)
	now := maps.Clone(refs)
	delete(now, m.Branch)
	return moved, s.putRefsBack(ctx, &Mark{Branch: m.Branch, Head: head, Refs: others}, branch, now)
}

// rewrote names what moved since m where history is only added to: the
// branch moved backwards or to a commit that does not hold the one it
// was at, another ref of the user's moved or gone, HEAD on another branch.
// A new branch or tag is an addition, and stays.
func (s *Set) rewrote(ctx context.Context, m *Mark, branch, head string, refs map[string]string) []string {
	var out []string
	if branch != m.Branch {
		out = append(out, fmt.Sprintf("HEAD was moved from %s to %s", refName(m.Branch, m.Head), refName(branch, head)))
	}
	if m.Branch == "" && m.Head != "" && branch == "" && head != m.Head && !s.git.IsAncestor(ctx, m.Head, head) {
		out = append(out, fmt.Sprintf("HEAD moved from %s to %s, which does not hold it", short(m.Head), short(head)))
	}
	for _, ref := range slices.Sorted(maps.Keys(m.Refs)) {
		was, now := m.Refs[ref], refs[ref]
		switch {
		case now == was:
		case now == "":
			out = append(out, refName(ref, "")+" was deleted")
		case ref == m.Branch && s.git.IsAncestor(ctx, was, now):
			// Forward: the task's commits.
		case ref == m.Branch:
			out = append(out, fmt.Sprintf("%s moved from %s to %s, which does not hold it (a reset, an amended or rebased commit)", refName(ref, ""), short(was), short(now)))
		default:
			out = append(out, fmt.Sprintf("%s moved from %s to %s", refName(ref, ""), short(was), short(now)))
		}
	}
	return out
}

// refName is a ref as a person names it (main, tag v1), or commit when
// there is none (detached).
func refName(ref, commit string) string {
	switch {
	case strings.HasPrefix(ref, "refs/heads/"):
		return "branch " + strings.TrimPrefix(ref, "refs/heads/")
	case strings.HasPrefix(ref, "refs/tags/"):
		return "tag " + strings.TrimPrefix(ref, "refs/tags/")
	case ref != "":
		return ref
	case commit == "":
		return "no commit"
	}
	return "commit " + short(commit)
}

func short(id string) string { return id[:min(len(id), 8)] }

// KeepTask keeps what task t did in its worktree, which did not complete
// (why says how it ended), on a branch of its own: its commits since base
// and what it left uncommitted, as one commit on top. Nothing is kept when
// the task made nothing. It runs under KeepContext, and says in a line
// where the work is kept, or why it could not be (noteKept).
func (s *Set) KeepTask(ctx context.Context, t *Tree, base, why string, now time.Time) (*state.Kept, error) {
	ctx, cancel := s.KeepContext(ctx)
	defer cancel()
	k, err := s.keepTask(ctx, t, base, why, now)
	s.noteKept(t.Task, k, err)
	return k, err
}

// noteKept says in a line where the work of task, which did not complete,
// is kept (k; nil: there was none), or why it could not be kept (err).
func (s *Set) noteKept(task int, k *state.Kept, err error) {
	if err != nil {
		s.log.Error("could not keep on a branch the work of a task that did not complete", "task", task, "err", err)
	} else if k != nil {
		s.log.Warn(k.Line())
	}
}

// keepTask is KeepTask's work.
func (s *Set) keepTask(ctx context.Context, t *Tree, base, why string, now time.Time) (*state.Kept, error) {
	git := s.git.At(t.Path)
	head, err := git.HeadOrNone(ctx)
	if err != nil {
		return nil, err
	}
	tree, err := git.TreeOf(ctx, base)
	if err != nil {
		return nil, err
	}
	branch, err := s.git.HeadRef(ctx)
	if err != nil {
		return nil, err
	}
	k, err := s.keepWork(ctx, git, &Mark{Head: base, Tree: tree, Branch: branch}, t.Task, head, now)
	if k != nil {
		k.Why = why
		s.record(ctx, k)
	}
	return k, err
}

// keptMessage is the message of the commit that holds what a task left
// uncommitted when its work is kept on a branch.
func keptMessage(task int) string {
	return fmt.Sprintf("peal: task %d - work kept, not brought to your branch (the task did not complete)", task)
}

// keepWork keeps, on a branch of its own, what the tree of git holds
// beyond what m holds: its commits since (head, its HEAD now) and what it
// holds uncommitted, as one commit on top (under peal's own identity,
// without hooks). Nothing is kept when the tree holds nothing new.
func (s *Set) keepWork(ctx context.Context, git *gitrepo.Repo, m *Mark, task int, head string, now time.Time) (*state.Kept, error) {
	index, done, err := s.tempIndex()
	if err != nil {
		return nil, err
	}
	defer done()
	tree, err := git.Snapshot(ctx, index)
	if err != nil {
		return nil, err
	}
	tip := head
	if m.Tree == "" {
		tree = m.Tree // its commits only
	}
	if m.Tree != "" && (head == "" || !s.sameTree(ctx, git, head, tree)) {
		k := s.keeper(git)
		if tip, err = k.CommitTree(ctx, tree, keptMessage(task), head); err != nil {
			return nil, err
		}
	}
	if tip == "" || tip == m.Head || (head == m.Head && tree == m.Tree) || (m.Head != "" && git.IsAncestor(ctx, tip, m.Head)) {
		return nil, nil // nothing new (a reset leaves only history the branch holds): no branch
	}
	name := keptName(task, short(tip))
	if err := git.SetBranch(ctx, name, tip); err != nil {
		return nil, err
	}
	return &state.Kept{Task: task, What: state.KeptWork, Ref: name, At: now.UTC().Format(time.RFC3339),
		Look: lookCommand(m, name), Take: "git merge " + name}, nil
}

// lookCommand shows what a kept branch holds beyond the user's branch.
func lookCommand(m *Mark, kept string) string {
	if b := strings.TrimPrefix(m.Branch, "refs/heads/"); b != "" && m.Head != "" {
		return "git log -p " + b + ".." + kept
	}
	return "git log -p " + kept
}

// sameTree reports whether commit's tree is tree.
func (s *Set) sameTree(ctx context.Context, git *gitrepo.Repo, commit, tree string) bool {
	t, err := git.TreeOf(ctx, commit)
	return err == nil && t == tree
}

// keeper is git that commits under peal's own identity: what is kept on
// a branch is peal's record, never the user's history.
func (s *Set) keeper(git *gitrepo.Repo) *gitrepo.Repo {
	k := git.At(git.Top())
	k.Identity("peal", "peal@localhost")
	return k
}

// putRefsBack puts the refs the task moved back where m has them (branch
// and refs: as they are now), and HEAD on its branch.
func (s *Set) putRefsBack(ctx context.Context, m *Mark, branch string, refs map[string]string) error {
	for _, ref := range slices.Sorted(maps.Keys(m.Refs)) {
		if refs[ref] != m.Refs[ref] {
			if err := s.git.PutRef(ctx, ref, m.Refs[ref]); err != nil {
				return fmt.Errorf("putting %s back: %w", refName(ref, ""), err)
			}
		}
	}
	if m.Branch != "" && m.Head == "" && refs[m.Branch] != "" {
		// The branch had no commit yet: it is unborn again.
		if err := s.git.PutRef(ctx, m.Branch, ""); err != nil {
			return fmt.Errorf("putting %s back: %w", refName(m.Branch, ""), err)
		}
	}
	switch {
	case m.Branch != "" && branch != m.Branch:
		if err := s.git.PointHead(ctx, m.Branch); err != nil {
			return fmt.Errorf("putting HEAD back on %s: %w", refName(m.Branch, ""), err)
		}
	case m.Branch == "":
		if err := s.git.PutRef(ctx, "HEAD", m.Head); err != nil {
			return fmt.Errorf("putting HEAD back at %s: %w", short(m.Head), err)
		}
	}
	return nil
}

// putBack makes the work tree's files hold what m holds (what git ignores
// beyond the mark's copies left alone), and its index.
func (s *Set) putBack(ctx context.Context, m *Mark) error {
	if err := s.putFilesBack(ctx, m); err != nil {
		return err
	}
	notes, err := s.notes(ctx)
	if err != nil {
		return err
	}
	from := filepath.Join(notes, "marks", s.markName()+".index")
	if !m.Index {
		from = filepath.Join(notes, "marks", s.markName()+".no-index")
	}
	if err := s.git.RestoreIndex(ctx, from); err != nil {
		return fmt.Errorf("putting the index back: %w", err)
	}
	return nil
}

// putFilesBack writes the files of the work tree back as m holds them:
// the entries git ignores that the task made are removed, the files git
// does not ignore and the ignored files m copied are as they were. An
// ignored entry m did not copy (a folder, a large file) stays as it is.
func (s *Set) putFilesBack(ctx context.Context, m *Mark) error {
	ignored, err := s.ignored(ctx, s.git, "", s.own)
	if err != nil {
		return err
	}
	top := s.git.Top()
	for _, p := range ignored {
		if slices.Contains(m.Entries, p) {
			continue
		}
		// Made by the task (a build's output, dependencies installed).
		if err := os.RemoveAll(filepath.Join(top, filepath.FromSlash(strings.TrimSuffix(p, "/")))); err != nil {
			return fmt.Errorf("removing %s, which the task made: %w", p, err)
		}
	}
	var also []string
	for _, p := range m.Ignored {
		if _, err := os.Lstat(filepath.Join(top, filepath.FromSlash(p))); err == nil {
			also = append(also, p)
		}
	}
	index, done, err := s.tempIndex()
	if err != nil {
		return err
	}
	defer done()
	now, err := s.git.SnapshotWith(ctx, index, also)
	if err != nil {
		return err
	}
	if now == m.Files {
		return nil
	}
	return s.git.SwitchFiles(ctx, index, now, m.Files)
}

// putIgnoredBack writes back the ignored files m copied that the work
// tree no longer holds as they were (a task in the home worktree writes
// them through their links), and nothing else.
func (s *Set) putIgnoredBack(ctx context.Context, m *Mark) error {
	if len(m.Ignored) == 0 {
		return nil
	}
	// From the mark's files to its tree without them: Old is each copy.
	changes, err := s.git.TreeChanges(ctx, m.Files, m.Tree)
	if err != nil {
		return err
	}
	top := s.git.Top()
	var changed, present []string
	for _, c := range changes {
		if !slices.Contains(m.Ignored, c.Path) || c.Old == "" {
			continue
		}
		e, err := entryOf(top, filepath.FromSlash(c.Path))
		if err == nil && e.is(c.Old) {
			continue
		}
		changed = append(changed, c.Path)
		if err == nil && e != nil {
			present = append(present, c.Path)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	index, done, err := s.tempIndex()
	if err != nil {
		return err
	}
	defer done()
	// The switch sees only those paths: from what they hold now to what
	// they held.
	before, err := s.git.KeepTree(ctx, index, m.Files, changed)
	if err != nil {
		return err
	}
	now, err := s.git.PathsTree(ctx, index, present)
	if err != nil {
		return err
	}
	return s.git.SwitchFiles(ctx, index, now, before)
}

// keepRemoved keeps, on a ref of their own, the files of the user's that
// the task removed or replaced: those whose content in m was no commit's
// (changed and not committed, untracked, ignored) and that the work tree
// no longer holds as they were. The ref's commit holds only them.
func (s *Set) keepRemoved(ctx context.Context, m *Mark, now time.Time) (*state.Kept, error) {
	base := m.Head
	if base == "" {
		empty, err := s.git.EmptyTree(ctx)
		if err != nil {
			return nil, err
		}
		base = empty
	}
	// From the mark's files to the commit: Old is the content the user
	// had, "" where the user had removed a file of the commit.
	changes, err := s.git.TreeChanges(ctx, m.Files, base)
	if err != nil {
		return nil, err
	}
	top := s.git.Top()
	var gone []string
	for _, c := range changes {
		if c.Old == "" || c.Gitlink {
			continue // the user's own removal, or a submodule: no content to lose
		}
		if e, err := entryOf(top, filepath.FromSlash(c.Path)); err == nil && e.is(c.Old) {
			continue
		}
		gone = append(gone, c.Path)
	}
	files, err := s.keepOf(ctx, m.Tasks[0], m.Files, gone, false, fmt.Sprintf("task %d removed or replaced them, and no commit held them", m.Tasks[0]), now)
	if err != nil {
		return nil, err
	}
	staged, err := s.stagedGone(ctx, m, base)
	if err != nil || len(staged) == 0 {
		return files, err
	}
	// Kept apart from the files: a path's staged version and its work
	// tree's are two versions, each put back where it was.
	k, err := s.keepOf(ctx, m.Tasks[0], m.Staged, staged, true, fmt.Sprintf("you had staged them, and task %d's work took their place", m.Tasks[0]), now)
	if err == nil && files != nil {
		s.record(ctx, k)
		return files, nil
	}
	return k, err
}

// stagedGone are the paths whose version staged when m was taken was
// neither HEAD's (base) nor the work tree's, and that neither the index nor
// the work tree holds any more: a version only the index held.
func (s *Set) stagedGone(ctx context.Context, m *Mark, base string) ([]string, error) {
	if m.Staged == "" {
		return nil, nil
	}
	fromHead, err := s.git.TreeChanges(ctx, m.Staged, base)
	if err != nil {
		return nil, err
	}
	fromFiles, err := s.git.TreeChanges(ctx, m.Staged, m.Files)
	if err != nil {
		return nil, err
	}
	index, err := s.git.IndexTree(ctx)
	if err != nil {
		return nil, err
	}
	fromNow, err := s.git.TreeChanges(ctx, m.Staged, index)
	if err != nil {
		return nil, err
	}
	changed := func(cs []gitrepo.Change, path string) bool {
		return slices.ContainsFunc(cs, func(c gitrepo.Change) bool { return c.Path == path })
	}
	top := s.git.Top()
	var gone []string
	for _, c := range fromHead {
		if c.Old == "" || c.Gitlink || !changed(fromFiles, c.Path) || !changed(fromNow, c.Path) {
			continue // a staged removal, HEAD's or the work tree's version, or still staged
		}
		if e, err := entryOf(top, filepath.FromSlash(c.Path)); err == nil && e.is(c.Old) {
			continue
		}
		gone = append(gone, c.Path)
	}
	return gone, nil
}

// keepOf keeps the files paths as tree holds them (nil: none), on a ref
// of their own: see keptFiles.
func (s *Set) keepOf(ctx context.Context, task int, tree string, paths []string, staged bool, why string, now time.Time) (*state.Kept, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	index, done, err := s.tempIndex()
	if err != nil {
		return nil, err
	}
	defer done()
	kept, err := s.git.KeepTree(ctx, index, tree, paths)
	if err != nil {
		return nil, err
	}
	return s.keptFiles(ctx, task, kept, paths, staged, why, now)
}

// keptFiles keeps tree, which holds the files paths, on a ref of its own
// as one commit, and returns its Kept. staged: they are versions the index
// held, which their commands put back in the index (else in the work tree).
func (s *Set) keptFiles(ctx context.Context, task int, tree string, paths []string, staged bool, why string, now time.Time) (*state.Kept, error) {
	kind, what, where := "files", "your files", "--worktree"
	if staged {
		kind, what, where = "staged", "what you had staged", "--staged"
	}
	msg := fmt.Sprintf("peal: %s as it was before %s removed or replaced it\n\n%s\n", what, taskName(task), strings.Join(paths, "\n"))
	commit, err := s.keeper(s.git).CommitTree(ctx, tree, msg)
	if err != nil {
		return nil, err
	}
	ref := fmt.Sprintf("refs/%s%s/task-%d-%s", KeptPrefix, kind, task, short(commit))
	if task < 0 {
		ref = fmt.Sprintf("refs/%s%s/run-%s", KeptPrefix, kind, short(commit))
	}
	if err := s.git.PutRef(ctx, ref, commit); err != nil {
		return nil, err
	}
	k := &state.Kept{Task: task, What: state.KeptFiles, Ref: ref, At: now.UTC().Format(time.RFC3339), Look: "git show --stat " + ref, Why: why}
	for _, p := range paths {
		k.Files = append(k.Files, state.KeptFile{Path: p, Restore: "git restore --source=" + ref + " " + where + " -- " + shellWord(p)})
	}
	return k, nil
}

func taskName(task int) string {
	if task < 0 {
		return "the run"
	}
	return fmt.Sprintf("task %d", task)
}

// keepFiles keeps the files paths of the work tree as they are now on a
// ref of their own, before they go (why says why), notes them and returns
// their Kept.
func (s *Set) keepFiles(ctx context.Context, task int, paths []string, why string) (*state.Kept, error) {
	index, done, err := s.tempIndex()
	if err != nil {
		return nil, err
	}
	defer done()
	tree, err := s.git.PathsTree(ctx, index, paths)
	if err != nil {
		return nil, err
	}
	k, err := s.keptFiles(ctx, task, tree, paths, false, why, time.Now())
	s.record(ctx, k)
	return k, err
}

// markHolds reports whether the mark of the task now running holds a copy
// of the ignored file rel.
func (s *Set) markHolds(rel string) bool {
	s.keptMu.Lock()
	defer s.keptMu.Unlock()
	return s.marked != nil && slices.Contains(s.marked.Ignored, rel)
}

// shellWord is path as one word of a shell command.
func shellWord(path string) string {
	if path != "" && !strings.ContainsFunc(path, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) {
		return path
	}
	return "'" + strings.ReplaceAll(path, "'", `'\''`) + "'"
}

// record notes k (nil: nothing) in the repository's git folder, where it
// outlives the state folder, and among what this run kept.
func (s *Set) record(ctx context.Context, k *state.Kept) {
	if k == nil {
		return
	}
	s.keptMu.Lock()
	s.kept = append(s.kept, *k)
	s.keptMu.Unlock()
	notes, err := s.notes(ctx)
	if err == nil {
		err = state.NoteKept(filepath.Join(notes, "kept"), *k)
	}
	if err != nil {
		s.log.Warn("could not note in the repository's git folder what peal kept: peal status will not list it", "ref", k.Ref, "err", err)
	}
}

// leftTask is the task of the mark an earlier run left (LeftMark); -1
// when none was read.
func (s *Set) leftTask() int {
	s.keptMu.Lock()
	defer s.keptMu.Unlock()
	return s.left
}

// Kept is what this run kept for the user, in order.
func (s *Set) Kept() []state.Kept {
	s.keptMu.Lock()
	defer s.keptMu.Unlock()
	return slices.Clone(s.kept)
}
