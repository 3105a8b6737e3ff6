// Package owndir creates the folders peal keeps its own files in, so that a
// folder inside a git work tree never shows up in `git status` or in a
// `git add -A`: the topmost folder it creates gets a .gitignore holding "*".
package owndir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Ignore is the content of the .gitignore peal writes: every file of the
// folder, the .gitignore itself included, is ignored.
const Ignore = "*\n"

// Make creates dir and its missing parents. When it creates any, the
// topmost of them gets a .gitignore holding "*". A folder that already
// exists is left as it is: it may be the user's.
func Make(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	top := ""
	for d := abs; ; d = filepath.Dir(d) {
		_, err := os.Stat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		top = d
		if filepath.Dir(d) == d {
			break
		}
	}
	if top == "" {
		return nil
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(top, ".gitignore"), []byte(Ignore), 0o644)
}
