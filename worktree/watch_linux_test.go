package worktree

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestChangeWatch: the watch of a tree says whether a process changed
// anything there since it was last asked: a file written in a folder made
// after the watch began, a file removed, a link made; reading changes
// nothing; what happens in a linked folder is not the tree's.
func TestChangeWatch(t *testing.T) {
	t.Parallel()
	root, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("a\n"), 0o644)
	os.Symlink(outside, filepath.Join(root, "linked"))
	w := watchTree(root)
	if w == nil {
		t.Skip("no inotify here")
	}
	defer w.Close()
	if w.broken {
		// A watch could not be made: the inotify watches and instances
		// are the user's, shared with every process it runs (other test
		// packages, other jobs on a loaded machine). Then the tree may
		// have changed whatever happens, which is all there is to check.
		for range 2 { // asked again: still
			if !w.Changed() {
				t.Fatal("a broken watch says the tree did not change")
			}
		}
		t.Skip("a watch of the tree could not be made: this user's inotify watches are used up here")
	}
	sh := func(script string) {
		t.Helper()
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v %s", script, err, out)
		}
	}
	if w.Changed() {
		t.Fatal("changed before anything ran")
	}
	for _, c := range []struct {
		script string
		want   bool
	}{
		{"cat a.txt > /dev/null; ls -R > /dev/null", false},
		{"echo x > linked/out.txt", false},
		{"mkdir -p new/deep", true},
		{"echo x > new/deep/f.txt", true},
		{"rm a.txt", true},
		{"ln -s a.txt l", true},
		{"true", false},
	} {
		sh(c.script)
		if got := w.Changed(); got != c.want {
			t.Errorf("%q: changed %v, want %v", c.script, got, c.want)
		}
	}
}
