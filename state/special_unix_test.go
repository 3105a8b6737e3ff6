//go:build unix

package state

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFIFOStateFile: a named pipe at state.json is refused at once, by a run
// and by a reader, instead of blocking them.
func TestFIFOStateFile(t *testing.T) {
	t.Parallel()
	_, p, dir := scratch(t)
	mkdir(t, dir)
	if err := unix.Mkfifo(filepath.Join(dir, FileName), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "state file " + filepath.Join(dir, FileName) + " is a named pipe (FIFO), not a regular file"
	if _, _, err := Open(dir, p, at(0)); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Open: %v", err)
	}
	if _, _, _, err := Peek(dir, p, nil); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Peek: %v", err)
	}
}

// TestSessionsFileANamedPipe: a named pipe where the sessions file should
// be is never read (a read would wait forever): it is kept aside and no
// session is continued.
func TestSessionsFileANamedPipe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := unix.Mkfifo(filepath.Join(dir, SessionsName), 0o644); err != nil {
		t.Fatal(err)
	}
	s, warnings, err := OpenSessions(dir, Plan{Path: "/p/a.md", Repo: "/r"}, sessionsNow)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(warnings) != 1 || !strings.Contains(warnings[0], "a named pipe") {
		t.Fatalf("warnings %q", warnings)
	}
	if info, err := os.Lstat(filepath.Join(dir, SessionsName+".corrupt-20261127T010203Z")); err != nil || info.Mode()&fs.ModeNamedPipe == 0 {
		t.Fatalf("the pipe was not kept aside: %v", err)
	}
}
