package owndir_test

import (
	"os"
	"path/filepath"
	"testing"

	"peal/internal/owndir"
	"peal/internal/testkit/testgit"
)

func TestMake(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	testgit.Init(t, repo)
	// A folder of the user's that already exists is left alone.
	mine := filepath.Join(repo, "mine")
	os.MkdirAll(mine, 0o755)
	os.WriteFile(filepath.Join(mine, "notes.txt"), []byte("x"), 0o644)

	state := filepath.Join(repo, ".peal", "sub", "deeper")
	if err := owndir.Make(state); err != nil {
		t.Fatal(err)
	}
	if err := owndir.Make(filepath.Join(mine, "peal")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(state, "state.json"), filepath.Join(mine, "peal", "state.json")} {
		os.WriteFile(f, []byte("{}"), 0o644)
	}
	if data, err := os.ReadFile(filepath.Join(repo, ".peal", ".gitignore")); err != nil || string(data) != owndir.Ignore {
		t.Fatalf("topmost created folder's .gitignore: %q, %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(mine, ".gitignore")); err == nil {
		t.Fatal("a .gitignore was written into a folder peal did not create")
	}
	if err := owndir.Make(state); err != nil {
		t.Fatalf("an existing folder: %v", err)
	}
	if got := testgit.Git(t, repo, "status", "--porcelain", "--untracked-files=all"); got != "?? mine/notes.txt" {
		t.Fatalf("git status shows %q, want only the user's file", got)
	}
}
