package owndir_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"peal/internal/owndir"
	"peal/internal/safefs"
	"peal/internal/testkit/testbin"
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

// TestMakeOnAFullDisk: a folder that cannot get its .gitignore for want of
// space is not made, and the error names the folder asked for, as a full
// disk.
func TestMakeOnAFullDisk(t *testing.T) {
	t.Parallel()
	full := testbin.FullDisk(t)
	dir := filepath.Join(full, "state")
	err := owndir.Make(dir)
	var fe *safefs.FullError
	if !errors.As(err, &fe) || fe.Dir != dir {
		t.Fatalf("err %v, want the disk holding %s full", err, dir)
	}
	if entries, _ := os.ReadDir(full); slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.IsDir() }) {
		t.Fatalf("a folder was left on the full disk: %v", entries)
	}
}
