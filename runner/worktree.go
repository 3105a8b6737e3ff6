package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"peal/check"
	"peal/internal/safefs"
	"peal/phase"
	"peal/review"
)

// WorktreesFolder is the folder of state_dir that holds the worktrees of
// the tasks of parallel blocks (parallel_isolation = worktree), each with
// its review folder beside it.
const WorktreesFolder = "worktrees"

// KeptBranchPrefix starts the branches peal keeps for the user: the work of
// a task whose merge conflicted, or that completed but was not merged
// before an interruption. Nothing of peal deletes them.
const KeptBranchPrefix = "peal-kept/"

// mergingRecord is the file of the worktrees folder that names the branch
// being merged into the work tree, and the commit the tree was at before,
// while the merge runs and, with check_commands, until the merged tree's
// checks have passed and the task is saved as completed: the next run
// undoes a merge a kill left half done, or left unchecked.
const mergingRecord = "merging"

// merging is the content of the merging record.
type merging struct {
	Task   int    `json:"task"`
	Branch string `json:"branch"`
	Before string `json:"before"`
}

// taskTree is the worktree of one task of a parallel block.
type taskTree struct {
	task   int
	path   string // the worktree's top: {state_dir}/worktrees/task-N
	dir    string // where the task's calls run: repo_path's place in the worktree
	branch string // the branch checked out there, made from the block's base
	review string // the task's review folder: {state_dir}/worktrees/task-N.review
}

// trees makes, merges and removes the worktrees of a run's tasks. Its mutex
// serializes the git commands that change what the worktrees share with the
// work tree (adding and removing worktrees, branches, merges), peal's own
// and stet's (a review makes and removes a worktree of its own), so that
// none reads the records of a worktree half made or half removed.
type trees struct {
	mu     *sync.Mutex
	state  string     // state_dir, absolute
	root   string     // {state_dir}/worktrees, absolute
	prefix string     // the branch namespace of this state folder: peal-<scope>/
	git    review.Git // the work tree's git
	rel    string     // repo_path relative to the top of its work tree
	sparse cone       // what each worktree checks out (worktree_sparse_paths); empty: the whole tree
}

// newTrees is the worktrees of the runs on stateDir; their branches are
// named after the state folder, as its runs' calls are (callScope). Each
// checks out the folders sparse (relative to repo), or the whole tree.
func newTrees(stateDir string, git review.Git, repo string, sparse ...string) *trees {
	state, err := filepath.Abs(stateDir)
	if err != nil {
		state = stateDir
	}
	rel, err := filepath.Rel(git.Top(), repo)
	if err != nil || !filepath.IsLocal(rel) {
		rel = "."
	}
	return &trees{mu: &sync.Mutex{}, state: state, root: filepath.Join(state, WorktreesFolder), prefix: "peal-" + callScope(stateDir) + "/", git: git, rel: rel,
		sparse: coneOf(rel, sparse)}
}

// taskTreePath is where the worktree of task is made in stateDir.
func taskTreePath(stateDir string, task int) string {
	return filepath.Join(stateDir, WorktreesFolder, fmt.Sprintf("task-%d", task))
}

// of is the worktree task would get.
func (ts *trees) of(task int) *taskTree {
	path := taskTreePath(ts.state, task)
	return &taskTree{task: task, path: path, dir: filepath.Join(path, ts.rel), branch: ts.prefix + filepath.Base(path), review: path + ".review"}
}

// cleanupContext is a context for peal's own git commands that clean up or
// finish work on worktrees (removals, merges), which must run even once ctx
// is cancelled: bounded by the phase timeout, or by a short grace once ctx
// is done (the work they clean up must not hold the run's exit up).
func (ts *trees) cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	timeout := ts.git.Timeout
	if ctx.Err() != nil {
		timeout = min(timeout, max(ts.git.Caller.Limits.KillGrace, 10*time.Second))
	}
	return context.WithTimeout(context.WithoutCancel(ctx), timeout)
}

// worktreeBase is the commit the worktrees of a block start from: the work
// tree's HEAD, when the tree is clean. why says otherwise why the block
// cannot be isolated.
func (r *run) worktreeBase(ctx context.Context) (base, why string) {
	head, err := r.git.Head(ctx)
	if err != nil {
		return "", "the repository has no commit yet"
	}
	changes, err := r.git.Changes(ctx)
	switch {
	case err != nil:
		return "", err.Error()
	case len(changes) > 0:
		return "", fmt.Sprintf("the work tree has uncommitted changes (%s), which a worktree would not hold", review.ListPaths(changes, 3))
	}
	return head, ""
}

// add makes the worktree of task on a new branch at base. git worktree add
// reads the records of every other worktree, and fails on one that is being
// made or removed ("failed to read .git/worktrees/…"), so the worktree is
// registered one at a time, without its files (a few milliseconds); the
// files, the bulk of the cost on a large tree, are then written outside the
// lock, so that the tasks of a block write theirs at the same time. An add
// that fails removes what it made.
func (ts *trees) add(ctx context.Context, task int, base string) (*taskTree, error) {
	tt, err := ts.register(ctx, task, base)
	if err == nil {
		// read-tree touches only this worktree's index and files. No
		// parallel checkout (checkout.workers): the tasks of a block
		// already write at the same time, and workers of each on top made
		// a block of 4 on 10 000 files several times slower on 2 cores.
		if _, err = ts.git.Run(ctx, "-C", tt.path, "read-tree", "--reset", "-u", "HEAD"); err != nil {
			err = fmt.Errorf("git read-tree in %s: %w", tt.path, err)
		}
	}
	if err != nil {
		ts.discard(ctx, ts.of(task))
		return nil, err
	}
	return tt, nil
}

// discard removes what an add that failed made of tt: an add cut short (a
// signal) may have made the branch, or part of the worktree.
func (ts *trees) discard(ctx context.Context, tt *taskTree) {
	cctx, cancel := ts.cleanupContext(ctx)
	defer cancel()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.forget(cctx, tt)
	ts.git.Run(cctx, "branch", "-q", "-D", tt.branch) // fails when the add made none
}

// register adds the worktree of task, with no files checked out yet, and
// makes it a sparse checkout when worktree_sparse_paths is set (under the
// lock: the first one turns git's per-worktree configuration on in the
// repository's configuration file).
func (ts *trees) register(ctx context.Context, task int, base string) (*taskTree, error) {
	tt := ts.of(task)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if err := os.MkdirAll(ts.root, 0o755); err != nil {
		return nil, fmt.Errorf("worktrees folder %s: %w", ts.root, err)
	}
	if _, err := os.Lstat(tt.path); err == nil {
		// Left by an earlier block of this run that could not remove it.
		ts.forget(ctx, tt)
	}
	if _, err := ts.git.Run(ctx, "worktree", "add", "-q", "--no-checkout", "-B", tt.branch, tt.path, base); err != nil {
		return nil, fmt.Errorf("git worktree add %s: %w", tt.path, err)
	}
	if len(ts.sparse) > 0 {
		if err := ts.setSparse(ctx, tt.path); err != nil {
			return nil, err
		}
	}
	return tt, nil
}

// forget removes the worktree of tt and its review folder (its branch
// stays): git's record of it, then whatever is left on disk; the error is
// of what could not be removed. Callers hold mu.
func (ts *trees) forget(ctx context.Context, tt *taskTree) error {
	ts.git.Run(ctx, "worktree", "remove", "--force", "--force", tt.path)
	err := os.RemoveAll(tt.path)
	if rerr := os.RemoveAll(tt.review); err == nil {
		err = rerr
	}
	// stet's own worktrees lived in the review folder: git forgets them
	// too, with the task's if its removal failed.
	ts.git.Run(ctx, "worktree", "prune")
	return err
}

// remove removes the worktree of tt and its review folder; its branch
// stays. Under the lock the two folders are only moved aside, into a folder
// of the worktrees folder, and git forgets the worktree (prune: its folder
// is gone); their files are deleted after, without the lock, so that a
// merge into the work tree, or another task's worktree, never waits for
// thousands of files to go. What a kill leaves aside, the next run's sweep
// removes with the rest of the worktrees folder.
func (ts *trees) remove(ctx context.Context, tt *taskTree) error {
	ts.mu.Lock()
	aside, err := ts.moveAside(tt)
	if err != nil {
		// Not movable (the folder is gone already, say): removed in place.
		err = ts.forget(ctx, tt)
		ts.mu.Unlock()
		return err
	}
	ts.git.Run(ctx, "worktree", "prune")
	ts.mu.Unlock()
	return os.RemoveAll(aside)
}

// moveAside moves the worktree of tt and its review folder into a new
// folder of the worktrees folder and returns it. Callers hold mu.
func (ts *trees) moveAside(tt *taskTree) (string, error) {
	aside, err := os.MkdirTemp(ts.root, ".removed-")
	if err != nil {
		return "", err
	}
	if err := os.Rename(tt.path, filepath.Join(aside, "tree")); err != nil {
		os.Remove(aside)
		return "", err
	}
	if err := os.Rename(tt.review, filepath.Join(aside, "review")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		os.RemoveAll(tt.review) // the worktree is aside already: the review folder goes in place
	}
	return aside, nil
}

// deleteBranch deletes a task's branch.
func (ts *trees) deleteBranch(ctx context.Context, branch string) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	_, err := ts.git.Run(ctx, "branch", "-q", "-D", branch)
	return err
}

// keep renames a task's branch out of the run's namespace, under a name the
// next run leaves alone, and returns that name.
func (ts *trees) keep(ctx context.Context, task int, branch string) (string, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	res, err := ts.git.Run(ctx, "rev-parse", "--short=8", branch)
	if err != nil {
		return branch, err
	}
	kept := fmt.Sprintf("%stask-%d-%s", KeptBranchPrefix, task, strings.TrimSpace(res.Stdout))
	if _, err := ts.git.Run(ctx, "branch", "-M", branch, kept); err != nil {
		return branch, err
	}
	return kept, nil
}

// ConflictError: the work of a task of a parallel block could not be merged
// into the work tree, or the merged tree failed the project's checks. The
// merge was undone and the task's work kept on Branch.
type ConflictError struct {
	Task   int
	Branch string
	Files  []string // the files both sides changed; none when git refused the merge before starting it
	Detail string   // what git said, when no file conflicted
	// Checks are the checks the merged tree failed (none for a conflict).
	Checks []check.Result
}

func (e *ConflictError) Error() string {
	what := "conflicts in " + review.ListPaths(e.Files, 5)
	switch {
	case len(e.Checks) > 0:
		what = "made the checks fail: " + check.Summaries(e.Checks, 3)
	case len(e.Files) == 0:
		what = "failed: " + e.Detail
	}
	return fmt.Sprintf("merging task %d into the work tree %s; the merge was undone and the task's work is kept on branch %s (parallel_conflict)", e.Task, what, e.Branch)
}

// merge merges branch, the work of task, into the work tree with a merge
// commit, and returns the commit the tree was at before ("" when the task
// changed nothing and there was nothing to merge). A merge that fails is
// undone at once; the error is then a *ConflictError naming the
// conflicting files (its Branch still the task's branch). A merge that
// succeeded leaves its record until mergeDone.
func (ts *trees) merge(ctx context.Context, task int, branch string) (string, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.git.IsAncestor(ctx, branch, "HEAD") {
		return "", nil // the task changed nothing
	}
	before, err := ts.git.Head(ctx)
	if err != nil {
		return "", fmt.Errorf("the work tree's HEAD before merging task %d: %w", task, err)
	}
	record := filepath.Join(ts.root, mergingRecord)
	data, _ := json.Marshal(merging{Task: task, Branch: branch, Before: before})
	if err := os.WriteFile(record, append(data, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("worktrees folder %s: %w", ts.root, err)
	}
	msg := fmt.Sprintf("peal: merge task %d (%s)", task, branch)
	res, err := ts.git.Run(ctx, "merge", "--no-ff", "--no-edit", "-m", msg, branch)
	if err == nil {
		return before, nil
	}
	defer os.Remove(record)
	if ctx.Err() != nil {
		ts.undoMerge(context.WithoutCancel(ctx))
		return "", err
	}
	conflict := &ConflictError{Task: task, Branch: branch}
	if out, derr := ts.git.Run(ctx, "diff", "--name-only", "--diff-filter=U"); derr == nil {
		conflict.Files = strings.Fields(out.Stdout)
	}
	if len(conflict.Files) == 0 {
		conflict.Detail = phase.Snippet(strings.TrimSpace(res.Stderr+"\n"+res.Stdout), 200)
	}
	if uerr := ts.undoMerge(ctx); uerr != nil {
		return "", fmt.Errorf("%v; undoing the merge failed too: %w", conflict, uerr)
	}
	return "", conflict
}

// mergeDone drops the record of a merge whose task is saved as completed.
func (ts *trees) mergeDone() {
	os.Remove(filepath.Join(ts.root, mergingRecord))
}

// unmerge undoes a merge that succeeded, whose merged tree failed the
// checks (or whose checks were cut short): the work tree goes back to
// before, keeping what is not the merge's (git reset --keep). Its record
// goes once it is undone; one that cannot be undone stays for the next run
// to try again.
func (ts *trees) unmerge(ctx context.Context, task int, before string) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if _, err := ts.git.Run(ctx, "reset", "-q", "--keep", before); err != nil {
		return fmt.Errorf("undoing the merge of task %d (git reset --keep %s in the work tree): %w", task, before, err)
	}
	os.Remove(filepath.Join(ts.root, mergingRecord))
	return nil
}

// undoMerge undoes a merge in progress, when there is one.
func (ts *trees) undoMerge(ctx context.Context) error {
	if _, err := ts.git.Run(ctx, "rev-parse", "-q", "--verify", "MERGE_HEAD"); err != nil {
		return nil // git refused the merge before starting it: nothing to undo
	}
	_, err := ts.git.Run(ctx, "merge", "--abort")
	return err
}

// sweep removes what an earlier run on this state folder left when it died
// (SIGKILL) in a parallel block: its worktrees (and stet's inside their
// review folders; sparse or not, their links removed, never followed),
// git's records of them, its branches, its section of info/exclude, and a
// merge it left half done or left unchecked (completed tells which tasks
// are saved as completed). The run holds the state folder, so none of it
// is in use. Like every clean-up, it runs to its end (under a bound) even
// when a signal has come meanwhile.
func (ts *trees) sweep(ctx context.Context, log interface{ Warn(string, ...any) }, completed func(task int) bool) {
	if _, err := os.Lstat(ts.root); err != nil {
		return // no block ever ran on this state folder
	}
	ctx, cancel := ts.cleanupContext(ctx)
	defer cancel()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var removed []string
	if res, err := ts.git.Run(ctx, "worktree", "list", "--porcelain"); err == nil {
		for _, line := range strings.Split(res.Stdout, "\n") {
			path, ok := strings.CutPrefix(line, "worktree ")
			if ok && safefs.Within(path, ts.root) {
				ts.git.Run(ctx, "worktree", "remove", "--force", "--force", path)
				removed = append(removed, path)
			}
		}
	}
	if data, err := os.ReadFile(filepath.Join(ts.root, mergingRecord)); err == nil {
		ts.sweepMerge(ctx, log, data, completed)
	}
	entries, _ := os.ReadDir(ts.root)
	for _, e := range entries {
		os.RemoveAll(filepath.Join(ts.root, e.Name()))
	}
	ts.git.Run(ctx, "worktree", "prune")
	if err := ts.unexclude(ctx); err != nil {
		log.Warn("could not remove the worktree_link paths an earlier run named in info/exclude", "err", err)
	}
	var branches []string
	if res, err := ts.git.Run(ctx, "for-each-ref", "--format=%(refname:short)", "refs/heads/"+ts.prefix); err == nil {
		branches = strings.Fields(res.Stdout)
	}
	for _, b := range branches {
		ts.git.Run(ctx, "branch", "-q", "-D", b)
	}
	if len(removed) > 0 || len(branches) > 0 {
		log.Warn("removed the task worktrees and branches an earlier run left (it died in a parallel block); their tasks run again", "worktrees", len(removed), "branches", branches)
	}
}

// sweepMerge undoes what the merge of an earlier run's task, named by the
// merging record (data), left: a merge half done, or a merge done whose
// task was never saved as completed (the run died while the merged tree's
// checks ran). The work of such a task is kept on a branch first. The
// caller holds mu.
func (ts *trees) sweepMerge(ctx context.Context, log interface{ Warn(string, ...any) }, data []byte, completed func(int) bool) {
	var m merging
	if json.Unmarshal(data, &m) != nil {
		m = merging{Branch: strings.TrimSpace(string(data))} // a record of an earlier version of peal
	}
	if _, err := ts.git.Run(ctx, "rev-parse", "-q", "--verify", "MERGE_HEAD"); err == nil {
		log.Warn("undoing the merge of a task an earlier run left half done", "branch", m.Branch)
		if err := ts.undoMerge(ctx); err != nil {
			log.Warn("could not undo the merge: run git merge --abort in the repository", "err", err)
		}
		return
	}
	if m.Before == "" || completed(m.Task) {
		return
	}
	// Only the merge commit itself is undone: HEAD must be it, on top of
	// the commit the tree was at before.
	parent, err := ts.git.Run(ctx, "rev-parse", "-q", "--verify", "HEAD^1")
	if err != nil || strings.TrimSpace(parent.Stdout) != m.Before {
		if head, herr := ts.git.Head(ctx); herr == nil && head != m.Before {
			log.Warn("an earlier run left the merge of a task unchecked, and the work tree has moved on since: it is left as it is", "task", m.Task, "before", m.Before)
		}
		return
	}
	tip, err := ts.git.Run(ctx, "rev-parse", "--short=8", "HEAD^2")
	if err != nil {
		log.Warn("could not keep the work of a merge an earlier run left unchecked; it is not undone", "task", m.Task, "err", err)
		return
	}
	kept := fmt.Sprintf("%stask-%d-%s", KeptBranchPrefix, m.Task, strings.TrimSpace(tip.Stdout))
	if _, err := ts.git.Run(ctx, "branch", "-f", kept, "HEAD^2"); err != nil {
		log.Warn("could not keep the work of a merge an earlier run left unchecked; it is not undone", "task", m.Task, "err", err)
		return
	}
	log.Warn("undoing the merge of a task an earlier run left before its checks had passed; its work is kept on a branch and the task runs again",
		"task", m.Task, "kept", kept)
	if _, err := ts.git.Run(ctx, "reset", "-q", "--keep", m.Before); err != nil {
		log.Warn("could not undo the merge: run git reset --keep "+m.Before+" in the repository", "err", err)
	}
}

// prepareTree gives a new worktree what git does not: the worktree_copy
// paths from the work tree, the worktree_link paths as links to the work
// tree's, then worktree_setup_command run in it. The work tree is clean
// when a block starts, so a copied path is either ignored there (and in the
// worktree) or tracked and the same: no copy is ever committed as a task's
// work; a link is kept out of commits by the block's info/exclude section.
func (r *run) prepareTree(ctx context.Context, tt *taskTree) error {
	for _, p := range r.cfg.WorktreeCopy {
		if err := copyPath(r.cfg.RepoPath, p, tt.dir); err != nil {
			return fmt.Errorf("worktree_copy %s: %w", p, err)
		}
	}
	for _, p := range r.cfg.WorktreeLink {
		if err := linkPath(r.cfg.RepoPath, p, tt.dir); err != nil {
			return fmt.Errorf("worktree_link %s: %w", p, err)
		}
	}
	argv := strings.Fields(r.cfg.WorktreeSetupCommand)
	if len(argv) == 0 {
		return nil
	}
	r.log.Info("worktree setup command", "task", tt.task, "command", r.cfg.WorktreeSetupCommand, "worktree", tt.path)
	spec := r.caller.Command("setup", argv, r.caller.Limits.Timeout)
	spec.Dir = tt.dir
	spec.Task = tt.task
	if _, err := runCommand(ctx, spec); err != nil {
		if ctx.Err() != nil {
			return &phase.InterruptedError{Phase: "setup", Cause: context.Cause(ctx)}
		}
		return fmt.Errorf("worktree_setup_command %q failed in %s: %w", r.cfg.WorktreeSetupCommand, tt.dir, err)
	}
	return nil
}

// copyPath copies the file or folder rel of the work tree repo to the same
// place under dst, refusing links, even in a folder of rel, and special
// files (a named pipe would block the copy; a link could reach outside the
// repository).
func copyPath(repo, rel, dst string) error {
	d, name, err := openParent(repo, rel, false)
	if err != nil {
		return copyError(err)
	}
	defer d.Close()
	return copyEntry(d, name, filepath.Join(dst, rel))
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

// copyEntry copies the entry name of d, a file or a folder, to dst.
func copyEntry(d *safefs.Dir, name, dst string) error {
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
		if err := os.MkdirAll(dst, info.Mode().Perm()|0o700); err != nil {
			return err
		}
		// The names are read by path; each entry is then reached through
		// sub, which refuses a link.
		entries, err := os.ReadDir(sub.Path())
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := copyEntry(sub, e.Name(), filepath.Join(dst, e.Name())); err != nil {
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
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
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
