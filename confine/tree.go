package confine

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Tree is the file system as the expansion sees it: a real one (OS) or, in
// tests, one made of a table.
type Tree interface {
	// Lstat tells the type of name without following a final link.
	Lstat(name string) (fs.FileMode, error)
	Readlink(name string) (string, error)
	// ReadDir lists a folder's entries with their types, by name.
	ReadDir(name string) ([]Entry, error)
}

// Entry is one entry of a folder.
type Entry struct {
	Name string
	Type fs.FileMode // type bits only
}

// OS is the machine's file system.
var OS Tree = osTree{}

type osTree struct{}

func (osTree) Lstat(name string) (fs.FileMode, error) {
	fi, err := os.Lstat(name)
	if err != nil {
		return 0, err
	}
	return fi.Mode().Type(), nil
}

func (osTree) Readlink(name string) (string, error) { return os.Readlink(name) }

func (osTree) ReadDir(name string) ([]Entry, error) {
	// The types come from the folder itself (d_type): no stat per entry.
	des, err := os.ReadDir(name)
	out := make([]Entry, len(des))
	for i, d := range des {
		out[i] = Entry{Name: d.Name(), Type: d.Type()}
	}
	return out, err
}

// maxLinks bounds the links followed in one path, as the kernel does.
const maxLinks = 40

var errLinkLoop = errors.New("too many levels of symbolic links")

// resolve is the real path of the full path name, as the kernel takes it:
// every link followed, ".." taken from what the path names so far. When a
// part of it does not exist, the rest is appended as written (cleaned) and
// exists is false. The type is that of the real path.
func resolve(t Tree, name string) (real string, typ fs.FileMode, exists bool, err error) {
	todo := strings.Split(name, "/")
	cur := "/"
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur, typ = filepath.Dir(cur), fs.ModeDir
			continue
		}
		next := filepath.Join(cur, c)
		mode, err := t.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotDir) {
			return filepath.Join(append([]string{next}, todo...)...), 0, false, nil
		}
		if err != nil {
			return "", 0, false, err
		}
		if mode&fs.ModeSymlink == 0 {
			cur, typ = next, mode
			continue
		}
		if links++; links > maxLinks {
			return "", 0, false, errLinkLoop
		}
		target, err := t.Readlink(next)
		if err != nil {
			return "", 0, false, err
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
		typ = 0
	}
	if cur == "/" {
		typ = fs.ModeDir
	}
	return cur, typ, true, nil
}

// errNotDir is what a lookup beneath a file fails with (ENOTDIR on Unix);
// for an access it is a path that does not exist.
var errNotDir = notDirError()
