// Package testgit is the git of the tests and benchmarks: scratch
// repositories made and driven through the project's git client, and what a
// run may leave behind in one.
package testgit

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing/fstest"

	"peal/internal/gitrepo"
)

// Env lets git work in a scratch repository whatever the machine's git
// config holds: an identity for commits, and no automatic maintenance after
// them (git would start a `git maintenance run --auto` of its own after
// each commit).
var Env = []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
	"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
	"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=maintenance.auto", "GIT_CONFIG_VALUE_0=false"}

// Git runs git in dir with Env and returns its output, trimmed; a git
// that fails fails the test.
func Git(t interface {
	Helper()
	Fatalf(string, ...any)
}, dir string, args ...string) string {
	t.Helper()
	return In(t, dir, "", args...)
}

// In is Git with stdin as git's standard input (hash-object --stdin,
// mktree); none when it is empty.
func In(t interface {
	Helper()
	Fatalf(string, ...any)
}, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := gitrepo.Plain(dir, Env...).Command(args...)
	if stdin != "" {
		cmd.Stdin([]byte(stdin))
	}
	out, err := cmd.Run(context.Background())
	if err != nil {
		t.Fatalf("%v", err)
	}
	return strings.TrimSpace(out)
}

// Init makes dir an empty git repository without the sample hooks and
// files of git's template, which no test reads. git init runs once per
// process, into a folder of its own; every repository after that is a copy
// of the one it made (the same files git init writes), which spares each
// test a git process.
func Init(t interface {
	Helper()
	Fatalf(string, ...any)
}, dir string) {
	t.Helper()
	emptyRepo.once.Do(func() {
		tmp, err := os.MkdirTemp("", "peal-empty-repo-")
		if err != nil {
			emptyRepo.err = err
			return
		}
		defer os.RemoveAll(tmp)
		if _, err := gitrepo.Plain(tmp).Command("init", "-q", "--template=").Run(context.Background()); err != nil {
			emptyRepo.err = err
			return
		}
		emptyRepo.git, emptyRepo.err = readTree(filepath.Join(tmp, ".git"))
	})
	if emptyRepo.err != nil {
		t.Fatalf("%v", emptyRepo.err)
	}
	if err := os.CopyFS(filepath.Join(dir, ".git"), emptyRepo.git); err != nil {
		t.Fatalf("copying an empty repository: %v", err)
	}
}

// emptyRepo is the .git folder every Init copies, held in memory.
var emptyRepo struct {
	once sync.Once
	git  fstest.MapFS
	err  error
}

// readTree reads the folder root, files and modes, into memory.
func readTree(root string) (fstest.MapFS, error) {
	tree := fstest.MapFS{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == root {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		f := &fstest.MapFile{Mode: info.Mode()}
		if !d.IsDir() {
			if f.Data, err = os.ReadFile(path); err != nil {
				return err
			}
		}
		tree[filepath.ToSlash(rel)] = f
		return nil
	})
	return tree, err
}

// WorktreeLeftovers are what a run may leave behind in repo after a
// parallel block in worktrees: worktrees git knows of besides repo itself,
// branches of a run's namespace (peal-<id>/; not peal-kept/, which are
// kept on purpose), git's lock files in the git folder, entries of the
// worktrees folder of stateDir, and a run's section of info/exclude (the
// paths its worktrees link).
func WorktreeLeftovers(t interface {
	Helper()
	Fatalf(string, ...any)
}, repo, stateDir string) []string {
	t.Helper()
	// The run's worktree outlives runs (a confined run's tasks work there):
	// it, its branch, its notes and the lines of info/exclude that name the
	// folders linked into it are no leftovers.
	home := filepath.Join(stateDir, "worktrees", "home")
	var out []string
	for _, line := range strings.Split(Git(t, repo, "worktree", "list", "--porcelain"), "\n") {
		if p, ok := strings.CutPrefix(line, "worktree "); ok && p != repo && p != home {
			out = append(out, "worktree "+p)
		}
	}
	for _, b := range strings.Fields(Git(t, repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/")) {
		if strings.HasPrefix(b, "peal-") && !strings.HasPrefix(b, "peal-kept/") && !strings.HasSuffix(b, "/home") {
			out = append(out, "branch "+b)
		}
	}
	filepath.WalkDir(filepath.Join(repo, ".git"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && p == filepath.Join(repo, ".git", "peal") {
			return filepath.SkipDir // peal's notes: the run lock there is no git lock, and outlives runs
		}
		if err == nil && strings.HasSuffix(p, ".lock") {
			out = append(out, "lock "+p)
		}
		return nil
	})
	entries, _ := os.ReadDir(filepath.Join(stateDir, "worktrees"))
	for _, e := range entries {
		if n := e.Name(); n != "home" && n != "home.brought" && n != "home.links" && n != "home.aside" {
			out = append(out, "folder entry "+n)
		}
	}
	exclude, _ := os.ReadFile(filepath.Join(repo, ".git", "info", "exclude"))
	in, header := false, ""
	for _, line := range strings.Split(string(exclude), "\n") {
		switch {
		case strings.HasPrefix(line, "# end peal-"):
			in = false
		case strings.HasPrefix(line, "# peal-"):
			in, header = true, line
		case in && line != "":
			if fi, err := os.Lstat(filepath.Join(home, filepath.FromSlash(strings.TrimPrefix(line, "/")))); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
				out = append(out, "info/exclude line "+header+": "+line)
			}
		}
	}
	return out
}
