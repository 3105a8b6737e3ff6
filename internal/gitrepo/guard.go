package gitrepo

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"peal/internal/safefs"
)

// Watch keeps peal's own git, and stet's, from running what a call
// planted. Where the kernel confines files, no call can write the
// repository's hooks or configuration; where it does not (an older kernel
// under confine = auto, macOS, Windows), the guard notes them when the run
// starts and refuses every git and stet command once one of them has
// changed: a hook that was there before the run is honoured as always. It
// also notes the .git pointer of each worktree a task works in, which a
// call may rewrite there (stet's git reads it), and the folders on the way
// from the task's folder to that worktree's top, where a planted .git
// would be found first.
type Watch struct {
	mu      sync.Mutex
	noted   map[string][32]byte // path → its content's hash; the zero hash: absent
	tripped error
}

// plantedError: something a run's call could have written, and that git
// runs or reads, changed under the run. No git or stet runs after it; the
// run ends.
type plantedError struct{ path, what string }

func (e *plantedError) Error() string {
	return fmt.Sprintf("%s was %s since the run started (an agent call or a check can write it): peal runs no git and no stet after that; look at it, restore or remove it, and run again",
		e.path, e.what)
}

// EndsRun: every later task would meet the same refusal.
func (e *plantedError) EndsRun() bool { return true }

// maxNoted bounds what is read of one noted file: hooks and configuration
// files are small; a larger one counts as changed when its size does.
const maxNoted = 4 << 20

// NewWatch notes, through git (before any agent call), the repository's
// hooks folder (core.hooksPath honoured), its configuration files, the
// user's and system's git configuration, and every file they include.
func NewWatch(ctx context.Context, git *Repo) (*Watch, error) {
	g := &Watch{noted: map[string][32]byte{}}
	f, err := git.resolve(ctx)
	if err != nil {
		return nil, err
	}
	hooks, common := f.hooks, f.common
	var files []string
	if entries, err := os.ReadDir(hooks); err == nil {
		for _, e := range entries {
			files = append(files, filepath.Join(hooks, e.Name()))
		}
	}
	// A hook added later is a file not noted: the folder's listing is
	// noted too, as the names it holds.
	files = append(files, hooks,
		filepath.Join(common, "config"), filepath.Join(common, "config.worktree"), filepath.Join(common, "info", "attributes"),
		"/etc/gitconfig")
	if home, err := os.UserHomeDir(); err == nil {
		files = append(files, filepath.Join(home, ".gitconfig"))
		xdg := os.Getenv("XDG_CONFIG_HOME")
		if xdg == "" {
			xdg = filepath.Join(home, ".config")
		}
		files = append(files, filepath.Join(xdg, "git", "config"))
	}
	// Every file the configuration includes, as git lists them: one in
	// the tree (include.path = ../.gitconfig) is a call's to write.
	out, err := git.Command("config", "--includes", "--list", "--show-origin", "-z").Run(ctx)
	if err != nil {
		return nil, err
	}
	for i, field := range strings.Split(out, "\x00") {
		if file, ok := strings.CutPrefix(field, "file:"); ok && i%2 == 0 {
			if !filepath.IsAbs(file) {
				file = filepath.Join(git.Top(), file)
			}
			files = append(files, filepath.Clean(file))
		}
	}
	for _, f := range files {
		g.noted[f] = fingerprint(f)
	}
	return g, nil
}

// Add notes what a call in the worktree at top, working in dir, could
// rewrite there that stet's git would read: the worktree's .git pointer,
// and a .git in any folder from dir up to top.
func (g *Watch) Add(top, dir string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for d := dir; ; d = filepath.Dir(d) {
		g.noted[filepath.Join(d, ".git")] = fingerprint(filepath.Join(d, ".git"))
		if d == top || !safefs.Within(d, top) || filepath.Dir(d) == d {
			break
		}
	}
}

// Accept notes again what peal's own git changed, right after the command
// that Check let through. (Where the kernel does not confine files, a call
// that writes the configuration in those few milliseconds goes unseen.)
func (g *Watch) Accept() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.tripped != nil {
		return
	}
	for p := range g.noted {
		g.noted[p] = fingerprint(p)
	}
}

// Forget stops watching the worktree at top, once peal removed it.
func (g *Watch) Forget(top string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for p := range g.noted {
		if safefs.Within(p, top) {
			delete(g.noted, p)
		}
	}
}

// Check refuses, for good, once anything noted changed.
func (g *Watch) Check() error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.tripped != nil {
		return g.tripped
	}
	paths := make([]string, 0, len(g.noted))
	for p := range g.noted {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		was, now := g.noted[p], fingerprint(p)
		if was == now {
			continue
		}
		what := "changed"
		switch {
		case was == [32]byte{}:
			what = "made"
		case now == [32]byte{}:
			what = "removed"
		}
		g.tripped = &plantedError{path: p, what: what}
		return g.tripped
	}
	return nil
}

// fingerprint is a hash of what path is: its kind, and a file's content, a
// folder's names or a link's target; the zero hash when there is nothing.
func fingerprint(path string) [32]byte {
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return [32]byte{}
	}
	h := sha256.New()
	if err != nil {
		fmt.Fprintf(h, "error %v", err)
		return [32]byte(h.Sum(nil))
	}
	fmt.Fprintf(h, "%s\x00", info.Mode().Type())
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		target, _ := os.Readlink(path)
		h.Write([]byte(target))
	case info.IsDir():
		entries, _ := os.ReadDir(path)
		for _, e := range entries {
			fmt.Fprintf(h, "%s\x00", e.Name())
		}
	case info.Mode().IsRegular():
		fmt.Fprintf(h, "%d %o\x00", info.Size(), info.Mode().Perm())
		if data, err := safefs.ReadFile(path, maxNoted); err == nil {
			h.Write(data)
		} else {
			fmt.Fprintf(h, "%d", info.ModTime().UnixNano())
		}
	}
	return [32]byte(h.Sum(nil))
}
