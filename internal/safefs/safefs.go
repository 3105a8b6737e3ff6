// Package safefs reads and writes the files peal keeps on disk without
// trusting what it finds there. Only regular files are read: a named pipe, a
// device or a socket is refused without waiting on it, and reads stop at a
// size cap. Inside a folder opened with OpenDir, links are never followed
// and nothing escapes the folder. Every write is atomic (a temporary file,
// fsynced, renamed over the old one), respects the umask for a new file and
// keeps the mode of the file it replaces.
package safefs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// NotRegularError is returned for an entry that exists but is not a regular
// file (or, for Sub and OpenDir, not a folder).
type NotRegularError struct {
	Path string
	Kind string // what it is, e.g. "a named pipe (FIFO)", "a symbolic link"
	Want string // what it should be: "" for a regular file, or "a folder"
}

func (e *NotRegularError) Error() string { return e.Path + " " + e.what() }

// what is the message without the path: "is a socket, not a regular file".
func (e *NotRegularError) what() string {
	want := e.Want
	if want == "" {
		want = "a regular file"
	}
	return fmt.Sprintf("is %s, not %s", e.Kind, want)
}

// TooLargeError is returned for a file larger than the cap of its reader.
type TooLargeError struct {
	Path  string
	Limit int64
}

func (e *TooLargeError) Error() string { return e.Path + " " + e.what() }

func (e *TooLargeError) what() string {
	return fmt.Sprintf("is larger than %s, more than such a file can be", size(e.Limit))
}

// ErrChanged is wrapped when a file was replaced between the check of what it
// is and its opening: someone else is changing the folder.
var ErrChanged = errors.New("it changed while being opened")

func size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// kind names what a non-regular file is, for messages.
func kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a folder"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "an irregular file"
}

// ReadFile reads the file at path, following links, as long as it is a
// regular file of at most limit bytes. Errors name the path; a missing file
// gives an error wrapping fs.ErrNotExist.
func ReadFile(path string, limit int64) ([]byte, error) {
	// Stat first, so that a device is never opened at all.
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, &NotRegularError{Path: path, Kind: kind(info.Mode())}
	}
	// Without O_NONBLOCK, opening a named pipe put there after the Stat
	// would wait for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|nonblock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readOpened(f, path, info, limit)
}

// OpenAppend opens the regular file at path for appending, creating it (and
// its folder) when missing. A named pipe or a device there is refused
// rather than waited on: the open does not block, and the file must be
// regular.
func OpenAppend(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if info, err := os.Stat(path); err == nil && !info.Mode().IsRegular() {
		return nil, &NotRegularError{Path: path, Kind: kind(info.Mode())}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|nonblock, 0o644)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = &NotRegularError{Path: path, Kind: kind(info.Mode())}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// readOpened reads f, which must still be the file described by want.
func readOpened(f *os.File, path string, want fs.FileInfo, limit int64) ([]byte, error) {
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, &NotRegularError{Path: path, Kind: kind(info.Mode())}
	}
	if !os.SameFile(want, info) {
		return nil, fmt.Errorf("%s: %w", path, ErrChanged)
	}
	return readChecked(f, path, info, limit)
}

// readChecked reads f, a regular file described by info (a stat of f
// itself), of at most limit bytes.
func readChecked(f *os.File, path string, info fs.FileInfo, limit int64) ([]byte, error) {
	if info.Size() > limit {
		return nil, &TooLargeError{Path: path, Limit: limit}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{Path: path, Limit: limit}
	}
	return data, nil
}

// WriteFile writes data to path atomically and durably: the folder is
// created if needed (folders as files obey the umask), the file is written
// through a temporary file and the folder is synced. A link at path is
// replaced, not followed.
func WriteFile(path string, data []byte) error {
	d, err := OpenDir(filepath.Dir(path), true)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.WriteFile(filepath.Base(path), data); err != nil {
		return err
	}
	return d.Sync()
}

// Reason is err without the path its message names, for a caller that
// names the file itself: "it is a named pipe (FIFO), not a regular file",
// "permission denied". errors.Is and errors.As still see err.
func Reason(err error) error {
	var nr *NotRegularError
	var tl *TooLargeError
	var pe *fs.PathError
	switch {
	case errors.As(err, &nr):
		return &reason{"it " + nr.what(), err}
	case errors.As(err, &tl):
		return &reason{"it " + tl.what(), err}
	case errors.As(err, &pe):
		return &reason{pe.Err.Error(), err}
	}
	return err
}

type reason struct {
	msg string
	err error
}

func (r *reason) Error() string { return r.msg }
func (r *reason) Unwrap() error { return r.err }

// Same reports whether a and b name one file or folder: the same path once
// cleaned, or two paths to it (through a link, say) that both exist.
func Same(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	ia, err := os.Stat(a)
	if err != nil {
		return false
	}
	ib, err := os.Stat(b)
	return err == nil && os.SameFile(ia, ib)
}

// Within reports whether path is dir or inside it, comparing the names as
// given (clean both first; no link is followed).
func Within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}
