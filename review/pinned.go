package review

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/pelletier/go-toml/v2"

	"peal/internal/gitrepo"
	"peal/internal/safefs"
)

// What stet reads of the task's tree, and how peal keeps it to what the
// user made. stet (measured on its source and with strace) reads, besides
// the diff of the commits it reviews and the files its hunks name:
//
//   - its git, which it runs with PATH and HOME alone (GIT_DIR cannot be
//     given to it): that git would find its folder through the tree's .git,
//     which a call may rewrite, and would run the repository's hooks. stet's
//     commands find, first on their PATH, a git of peal's (gitShim) that
//     names the tree's git folder, as peal's own git does, and runs no hook;
//   - its settings: ~/.config/stet/config.toml, then the tree's
//     .review/config.toml, then STET_* variables. The tree's file is a
//     call's to write, and it would choose the review's model, its host
//     (where the diff goes) and how strict it is. peal reads the work
//     tree's own .review/config.toml once, before any agent call, and gives
//     stet its settings as STET_* variables (which win over any file; the
//     user's own variables win over them); and a task's tree whose
//     .review/config.toml is not the work tree's (made, changed, a link, a
//     pipe) gets no stet: the task's review is refused with one line naming
//     the path (ConfigError), and the file is put back as it was.

// settingsFile is where stet reads the settings of a repository, from the
// top of its work tree.
var settingsFile = filepath.Join(".review", "config.toml")

// maxSettings bounds what is read of a settings file.
const maxSettings = 1 << 20

// settings are the user's review settings: the work tree's
// .review/config.toml as it was when the run started, shared by the run's
// reviewers.
type settings struct {
	mu      sync.Mutex
	noted   bool
	mainTop string   // the work tree's top
	file    []byte   // nil: the work tree had none
	env     []string // STET_* from the file, those peal's environment does not set
}

// vars are the STET_* variables of the user's settings.
func (st *settings) vars() []string {
	if st == nil {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.env
}

// ConfigError: a task's tree holds a .review/config.toml that is not the
// work tree's, which stet would read; no stet runs there. The task's
// review fails (whatever on_stet_fail says: its settings are not the
// user's).
type ConfigError struct {
	Path string
	What string // made, changed, "a link", …
	Put  string // what peal did to it: removed, or restored
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%s was %s in the task's tree (stet would read its settings: the review's model, its host, how strict it is): peal runs no stet on it, and %s it; make review settings outside a run, in the work tree",
		e.Path, e.What, e.Put)
}

// NoteSettings reads, before any agent call, the review settings the user
// keeps in the work tree (.review/config.toml), which stet's commands get
// as STET_* variables. A file that cannot be read, or is no TOML, is an
// error naming it.
func (rv *Reviewer) NoteSettings() error {
	if !rv.Builtin() {
		return nil
	}
	st := rv.settings
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.noted {
		return nil
	}
	st.mainTop = rv.git.Top()
	path := filepath.Join(st.mainTop, settingsFile)
	data, err := safefs.ReadFile(path, maxSettings)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		st.noted = true
		return nil
	case err != nil:
		return fmt.Errorf("stet's settings %s: %w", path, safefs.Reason(err))
	}
	env, err := settingsEnv(data, os.LookupEnv)
	if err != nil {
		return fmt.Errorf("stet's settings %s: %w", path, err)
	}
	st.file, st.env, st.noted = data, env, true
	return nil
}

// settingKey is a key stet reads, whose variable is STET_ and the key in
// capitals.
var settingKey = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// settingsEnv are the STET_* variables of the settings in data: each
// top-level key that holds a string, a number or a boolean, but those
// lookup finds set already (the user's own win, as they do in stet).
func settingsEnv(data []byte, lookup func(string) (string, bool)) ([]string, error) {
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	var env []string
	for _, k := range slices.Sorted(keys(doc)) {
		if !settingKey.MatchString(k) {
			continue
		}
		name := "STET_" + strings.ToUpper(k)
		if v, ok := lookup(name); ok && v != "" {
			continue
		}
		switch v := doc[k].(type) {
		case string, bool, int64, float64:
			env = append(env, fmt.Sprintf("%s=%v", name, v))
		}
	}
	return env, nil
}

func keys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// checkTree refuses a tree whose .review/config.toml is not the work
// tree's as the run noted it, and puts it back: removed, or, in the work
// tree itself, written again as the user had it.
func (st *settings) checkTree(top string) error {
	if st == nil {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.noted {
		return nil // no run noted the user's: nothing to hold the tree's to
	}
	mainTop := st.mainTop
	path := filepath.Join(top, settingsFile)
	info, err := os.Lstat(path)
	var what string
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if st.file == nil || top != mainTop {
			return nil
		}
		what = "removed"
	case err != nil:
		what = "made unreadable"
	case !info.Mode().IsRegular():
		what = "made " + kindOf(info.Mode())
	default:
		data, err := safefs.ReadFile(path, maxSettings)
		switch {
		case err != nil:
			what = "made unreadable"
		case st.file != nil && bytes.Equal(data, st.file):
			return nil
		case st.file == nil:
			what = "made"
		case top == mainTop:
			what = "changed"
		default:
			what = "made or changed"
		}
	}
	e := &ConfigError{Path: path, What: what, Put: "removed"}
	if top == mainTop && st.file != nil {
		e.Put = "restored"
		os.RemoveAll(path)
		if err := safefs.WriteFile(path, st.file); err != nil {
			e.Put = "could not restore (" + safefs.Reason(err).Error() + ")"
		}
	} else if err := os.RemoveAll(path); err != nil {
		e.Put = "could not remove (" + err.Error() + ")"
	}
	return e
}

// kindOf names what a settings file that is no file is.
func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a link"
	case m.IsDir():
		return "a folder"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	}
	return "a special file"
}

// gitShim writes, once, in dir (a folder of peal's review folder, which no
// call may write), the git that stet's commands find first on their PATH:
// in the task's tree it names the tree's git folder (GIT_DIR,
// GIT_WORK_TREE, GIT_COMMON_DIR), never read from the tree's .git; in
// stet's own worktrees (worktrees) git finds them there, in peal's
// folders; anywhere else it refuses to run. It runs with the settings of
// peal's own git (gitrepo.SafeArgs: no hook, no file system monitor, no
// look into a submodule), and its diffs without textconv, as peal reads
// the lines stet reviews (gitrepo.Repo.Covered). It returns
// the folder to put first on PATH, "" where there is no such git (Windows,
// or git not found): stet then runs git as it finds it, under the guard.
func gitShim(dir string, git *gitrepo.Repo, worktrees string) (string, error) {
	if runtime.GOOS == "windows" {
		return "", nil
	}
	gitDir, common := git.GitDir()
	if gitDir == "" {
		return "", nil
	}
	real, err := exec.LookPath("git")
	if err != nil {
		return "", nil
	}
	if abs, err := filepath.Abs(real); err == nil {
		real = abs
	}
	top := git.Top()
	if r, err := filepath.EvalSymlinks(top); err == nil {
		top = r
	}
	if r, err := filepath.EvalSymlinks(worktrees); err == nil {
		worktrees = r
	}
	script := fmt.Sprintf(`#!/bin/sh
# peal's git for stet's commands: in the task's tree it names the tree's git
# folder (never read from the tree's .git, which an agent may rewrite); in
# stet's own worktrees git finds them in peal's folders; it runs with the
# settings of peal's own git: no hook, no file system monitor, no look into
# a submodule.
top=%s
here=$(pwd -P)
case "$here/" in
%s/*)
	unset GIT_DIR GIT_WORK_TREE GIT_COMMON_DIR ;;
"$top"/*)
	GIT_DIR=%s GIT_WORK_TREE="$top" GIT_COMMON_DIR=%s
	export GIT_DIR GIT_WORK_TREE GIT_COMMON_DIR ;;
*)
	echo "peal: stet ran git in $here, outside the task's tree and stet's worktrees: refused" >&2
	exit 128 ;;
esac
# A diff is of the files as they are, as peal's own reads it.
if [ "$1" = diff ]; then
	shift
	set -- diff --no-textconv "$@"
fi
exec %s %s "$@"
`, shQuote(top), shQuote(worktrees), shQuote(gitDir), shQuote(common), shQuote(real), shArgs(gitrepo.SafeArgs()))
	d, err := safefs.OpenDir(dir, true)
	if err != nil {
		return "", err
	}
	defer d.Close()
	if now, err := d.ReadFile("git", 1<<16); err == nil && string(now) == script {
		return dir, nil
	}
	// Put in place whole and executable at once: stet never finds half a
	// script, or one it may not run.
	return dir, d.Put("git", strings.NewReader(script), 0o755, "")
}

// shArgs quotes each of args for sh, space-separated.
func shArgs(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shQuote(a)
	}
	return strings.Join(quoted, " ")
}

// shQuote quotes s for sh.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
