// Package owndir creates the folders peal keeps its own files in, so that a
// folder inside a git work tree never shows up in `git status` or in a
// `git add -A`: the topmost folder it creates gets a .gitignore holding "*".
package owndir

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"

	"peal/internal/safefs"
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
	// The topmost new folder is made under a temporary name with its
	// .gitignore inside, then renamed into place: a crash never leaves it
	// without one (a later run would take it for the user's and leave it so).
	tmp := filepath.Join(filepath.Dir(top), fmt.Sprintf(".%s.tmp-%d", filepath.Base(top), rand.Int64()))
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return err
	}
	if err := safefs.WriteFile(filepath.Join(tmp, ".gitignore"), []byte(Ignore)); err != nil {
		os.RemoveAll(tmp)
		if full := (*safefs.FullError)(nil); errors.As(err, &full) {
			// The folder asked for is the one to name, not its temporary.
			return &safefs.FullError{Dir: abs, Err: full.Err}
		}
		return err
	}
	if err := os.Rename(tmp, top); err != nil {
		os.RemoveAll(tmp)
		if _, serr := os.Stat(top); serr != nil { // not another maker's folder
			return err
		}
	}
	return os.MkdirAll(abs, 0o755)
}

// Owned reports whether dir holds the .gitignore Make writes: a folder peal
// created for its own files, which git ignores whole.
func Owned(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, ".gitignore"))
	return err == nil && string(data) == Ignore
}
