package testgit

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// GeneratedRepo makes a repository of files small files spread over
// folders folders (see PkgName), one commit, packed as a clone is, under
// parent; it returns its path and head. The benchmarks of large
// repositories run on it.
func GeneratedRepo(b testing.TB, parent string, files, folders int) (string, string) {
	b.Helper()
	repo := filepath.Join(parent, "repo")
	for i := range files {
		dir := filepath.Join(repo, PkgName(i%folders, folders))
		if i < folders {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file%05d.go", i)), []byte(fmt.Sprintf("package pkg\n\nconst C%d = %d\n", i, i)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	Git(b, repo, "init", "-q")
	Git(b, repo, "add", "-A")
	Git(b, repo, "commit", "-q", "-m", "root")
	// Packed, as a clone is: 10 000 loose objects (a tree just added)
	// would make every checkout open and inflate 10 000 files.
	Git(b, repo, "repack", "-a", "-d", "-q")
	return repo, Git(b, repo, "rev-parse", "HEAD")
}

// PkgName is the name of folder i of a generated repository of folders
// folders: pkg00, pkg01, … or pkg000, … from 100 folders on.
func PkgName(i, folders int) string {
	if folders > 100 {
		return fmt.Sprintf("pkg%03d", i)
	}
	return fmt.Sprintf("pkg%02d", i)
}
