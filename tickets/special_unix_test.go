//go:build unix

package tickets

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSpecialFilesInTheStore: a cloned repository can plant anything in a
// ticketflow store. A named pipe or a link where retry-state.json should be
// is refused at once (a plain read would wait forever, or read /dev/zero
// until memory runs out); a linked lock file or ticket folder is not
// followed, so nothing outside the store is created or written.
func TestSpecialFilesInTheStore(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		plant func(t *testing.T, kdir, outside string)
		want  string
	}{
		"fifo retry state": {func(t *testing.T, kdir, _ string) {
			mkdir(t, ticketDir(kdir, "pt-x"))
			if err := unix.Mkfifo(filepath.Join(ticketDir(kdir, "pt-x"), RetryStateFile), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "retry-state.json is a named pipe (FIFO), not a regular file: peal neither reads it nor writes through it; remove it"},
		"retry state linked to /dev/zero": {func(t *testing.T, kdir, _ string) {
			mkdir(t, ticketDir(kdir, "pt-x"))
			os.Symlink("/dev/zero", filepath.Join(ticketDir(kdir, "pt-x"), RetryStateFile))
		}, "retry-state.json is a symbolic link, not a regular file"},
		"linked lock file": {func(t *testing.T, kdir, outside string) {
			mkdir(t, ticketDir(kdir, "pt-x"))
			os.Symlink(filepath.Join(outside, "created-by-peal"), filepath.Join(ticketDir(kdir, "pt-x"), LockFile))
		}, "retry-state.lock is a symbolic link, not a regular file"},
		"linked ticket folder": {func(t *testing.T, kdir, outside string) {
			mkdir(t, filepath.Join(kdir, "tickets"))
			os.Symlink(outside, ticketDir(kdir, "pt-x"))
		}, "tickets/pt-x is a symbolic link, not a folder: peal does not follow links in the retry-state store"},
		"linked tickets folder": {func(t *testing.T, kdir, outside string) {
			mkdir(t, kdir)
			os.Symlink(outside, filepath.Join(kdir, "tickets"))
		}, "/tickets is a symbolic link, not a folder"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			kdir, outside := filepath.Join(t.TempDir(), "knowledge"), t.TempDir()
			tc.plant(t, kdir, outside)
			done := make(chan error, 1)
			go func() {
				tk, _, err := open(kdir, "pt-x", at(0))
				if err == nil {
					tk.Close()
				}
				done <- err
			}()
			// A named pipe would block a plain open; the answer must come
			// without anyone writing to it.
			err := <-done
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %v, want it to say %q", err, tc.want)
			}
			if _, err := Load(kdir, "pt-x"); err == nil || errors.Is(err, fs.ErrNotExist) && name != "linked lock file" {
				t.Errorf("Load: %v", err)
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 0 {
				t.Errorf("peal created %v outside the store", entries)
			}
		})
	}
}

// TestTicketTemporaryFilesRemoved: what a killed save left in a ticket
// folder goes when the ticket is next locked; tf's own temporary file is
// not peal's to remove.
func TestTicketTemporaryFilesRemoved(t *testing.T) {
	t.Parallel()
	kdir := t.TempDir()
	dir := ticketDir(kdir, "pt-tmp")
	mkdir(t, dir)
	for _, name := range []string{".retry-state.json.tmp-1", ".close-summary.md.tmp-2", "retry-state.tmp"} {
		os.WriteFile(filepath.Join(dir, name), nil, 0o644)
	}
	openTicket(t, kdir, "pt-tmp")
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "retry-state.lock retry-state.tmp" {
		t.Errorf("left %v", names)
	}
}

// TestRetryStateModeKept: a private retry-state.json stays private.
func TestRetryStateModeKept(t *testing.T) {
	t.Parallel()
	kdir := t.TempDir()
	tk := openTicket(t, kdir, "pt-mode")
	tk.Begin(at(0), nil)
	path := filepath.Join(tk.Dir(), RetryStateFile)
	os.Chmod(path, 0o600)
	tk.Complete(at(1), AttemptClosed, nil)
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", info.Mode().Perm())
	}
}
