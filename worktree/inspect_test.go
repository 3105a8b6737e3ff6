package worktree

import (
	"os"
	"path/filepath"
	"testing"
)

// TestInspectNow: a worktree that exists now is read with the
// branch its git folder names, whether its .git file names that folder by
// an absolute path or, as git does under worktree.useRelativePaths, by a
// path relative to the worktree.
func TestInspectNow(t *testing.T) {
	t.Parallel()
	stateDir := t.TempDir()
	gitdirs := filepath.Join(stateDir, "repo", ".git", "worktrees")
	for task, link := range map[int]string{
		1: filepath.Join(gitdirs, "task-1"),
		2: filepath.Join("..", "..", "repo", ".git", "worktrees", "task-2"),
	} {
		path := treePath(stateDir, task)
		gitdir := filepath.Join(gitdirs, filepath.Base(path))
		for dir, file := range map[string]string{path: ".git", gitdir: "HEAD"} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			content := "gitdir: " + link + "\n"
			if file == "HEAD" {
				content = "ref: refs/heads/peal-x/" + filepath.Base(path) + "\n"
			}
			if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		st, ok := Inspect(stateDir, task)
		if !ok || st.Path != path || st.Branch != "peal-x/"+filepath.Base(path) || st.Sparse != nil {
			t.Errorf("task %d (.git: %s): %+v %v", task, link, st, ok)
		}
	}
}
