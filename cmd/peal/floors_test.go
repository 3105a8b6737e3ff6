package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// testSupport are the packages of the tests: no package of peal itself may
// import them.
var testSupport = []string{"internal/testkit", "integration", "testdata"}

// TestFloors: every package of peal is on a floor of docs/architecture.md's
// table, and its code imports only packages of lower floors (a higher
// number) or leaves (—), which import only leaves; none imports the tests'
// packages.
func TestFloors(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	floors := map[string]int{} // -1: a leaf
	row := regexp.MustCompile(`(?m)^\| (\d+|—) \| (.*?) \|`)
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		floor := -1
		if m[1] != "—" {
			floor, _ = strconv.Atoi(m[1])
		}
		for _, name := range regexp.MustCompile("`([a-z/]+)`").FindAllStringSubmatch(m[2], -1) {
			floors[name[1]] = floor
		}
	}
	if len(floors) < 15 {
		t.Fatalf("read only %d packages from the table of docs/architecture.md", len(floors))
	}
	imports := map[string]map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && rel != ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		if imports[pkg] == nil {
			imports[pkg] = map[string]bool{}
		}
		for _, imp := range f.Imports {
			if p, ok := strings.CutPrefix(strings.Trim(imp.Path.Value, `"`), "peal/"); ok {
				imports[pkg][p] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	isSupport := func(pkg string) bool {
		for _, s := range testSupport {
			if pkg == s || strings.HasPrefix(pkg, s+"/") {
				return true
			}
		}
		return false
	}
	for pkg, deps := range imports {
		if isSupport(pkg) {
			continue
		}
		floor, ok := floors[pkg]
		if !ok {
			t.Errorf("package %s is on no floor of docs/architecture.md", pkg)
			continue
		}
		for dep := range deps {
			df, known := floors[dep]
			switch {
			case isSupport(dep):
				t.Errorf("%s imports %s, a package of the tests", pkg, dep)
			case !known:
				t.Errorf("%s imports %s, which is on no floor of docs/architecture.md", pkg, dep)
			case floor == -1 && df != -1:
				t.Errorf("%s is a leaf but imports %s (floor %d)", pkg, dep, df)
			case floor != -1 && df != -1 && df <= floor:
				t.Errorf("%s (floor %d) imports %s (floor %d): imports go down only", pkg, floor, dep, df)
			}
		}
	}
}

// TestOneGitClient: no file of the module but the git client's starts git
// itself, the tests' included.
func TestOneGitClient(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	starts := regexp.MustCompile(`exec\.Command(Context)?\(([^,()]+, *)?"git"`)
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != root {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasPrefix(filepath.ToSlash(rel), "internal/gitrepo/") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if loc := starts.FindIndex(data); loc != nil {
			t.Errorf("%s starts git itself (%s): use internal/gitrepo", rel, data[loc[0]:loc[1]])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
