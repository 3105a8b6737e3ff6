package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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

// directWrite finds, in Go source, a call that writes a file or makes an
// entry on disk without internal/safefs: the os functions that write,
// make, rename, link or change a mode, and an open (os, unix, syscall)
// whose flags let it write.
var directWrite = regexp.MustCompile(`\b(?:(os\.(?:WriteFile|CreateTemp|Create|Rename|Symlink|Link|Chmod|Chown|Lchown|Truncate|MkdirAll|MkdirTemp|Mkdir))\(|(ioutil\.WriteFile)\(|(os\.OpenFile|unix\.Open|syscall\.Open)\(([^\n]*))`)

// writeFlags are the flags of an open that may write.
var writeFlags = regexp.MustCompile(`O_(?:WRONLY|RDWR|CREATE?|APPEND|TRUNC)\b`)

// writesOf are the direct writes of a Go file's text: each call's name
// and line.
func writesOf(src string) map[string][]int {
	out := map[string][]int{}
	for i, line := range strings.Split(src, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "//") {
			continue
		}
		for _, m := range directWrite.FindAllStringSubmatch(line, -1) {
			call := m[1] + m[2]
			if m[3] != "" {
				if !writeFlags.MatchString(m[4]) {
					continue // opened to read
				}
				call = m[3]
			}
			out[call] = append(out[call], i+1)
		}
	}
	return out
}

// TestWritesThroughSafefs: every file peal writes goes through
// internal/safefs, or is a row of the section of docs/architecture.md that
// says, case by case, why not. A direct write in a file of peal's (the
// tests and their packages aside) that no row names fails, and so does a
// row whose write is no longer there.
func TestWritesThroughSafefs(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Files written outside internal/safefs\n")
	if !ok {
		t.Fatal("docs/architecture.md has no section \"Files written outside internal/safefs\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	type row struct{ files, calls []string }
	var rows []row
	code := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, " | ")
		if !strings.HasPrefix(line, "| `") || len(cells) < 4 {
			continue
		}
		var r row
		for _, m := range code.FindAllStringSubmatch(cells[0], -1) {
			r.files = append(r.files, m[1])
		}
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			r.calls = append(r.calls, m[1])
		}
		rows = append(rows, r)
	}
	if len(rows) < 5 {
		t.Fatalf("read only %d rows from the section of docs/architecture.md", len(rows))
	}
	allowed := func(file, call string) bool {
		for _, r := range rows {
			if slices.Contains(r.files, file) && slices.Contains(r.calls, call) {
				return true
			}
		}
		return false
	}
	found := map[string]map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() && ((strings.HasPrefix(d.Name(), ".") && rel != ".") || rel == "internal/safefs" || slices.ContainsFunc(testSupport, func(s string) bool { return rel == s })) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for call, lines := range writesOf(string(data)) {
			if found[rel] == nil {
				found[rel] = map[string]bool{}
			}
			found[rel][call] = true
			if !allowed(rel, call) {
				t.Errorf("%s:%d: %s writes without internal/safefs: route it through safefs, or give it a row in the section \"Files written outside internal/safefs\" of docs/architecture.md saying why", rel, lines[0], call)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		for _, f := range r.files {
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(f))); err != nil {
				t.Errorf("docs/architecture.md names %s among the files written outside internal/safefs, and there is no such file", f)
				continue
			}
			if !slices.ContainsFunc(r.calls, func(c string) bool { return found[f][c] }) {
				t.Errorf("docs/architecture.md says %s writes outside internal/safefs with %s, and it no longer does: remove the row", f, strings.Join(r.calls, ", "))
			}
		}
		for _, c := range r.calls {
			if !slices.ContainsFunc(r.files, func(f string) bool { return found[f][c] }) {
				t.Errorf("docs/architecture.md names %s for %s, and none of them calls it: remove it from the row", c, strings.Join(r.files, ", "))
			}
		}
	}
}

// TestWritesOf: what the scan of TestWritesThroughSafefs takes for a
// direct write, and what it leaves (an open to read, a comment, safefs's
// own calls).
func TestWritesOf(t *testing.T) {
	t.Parallel()
	src := `
	os.WriteFile(p, data, 0o644)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o644)
	r, err := os.OpenFile(p, os.O_RDONLY, 0)
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_APPEND, 0)
	fd, err = syscall.Open(p, syscall.O_RDONLY, 0)
	// os.Rename(a, b) in a comment
	err = os.MkdirAll(dir, 0o755); os.Rename(a, b)
	safefs.WriteFile(p, data)
	d.WriteFile("x", data)
	os.Remove(p)
`
	got := writesOf(src)
	want := map[string][]int{"os.WriteFile": {2}, "os.OpenFile": {3}, "unix.Open": {5}, "os.MkdirAll": {8}, "os.Rename": {8}}
	if len(got) != len(want) {
		t.Fatalf("found %v, want %v", got, want)
	}
	for call, lines := range want {
		if !slices.Equal(got[call], lines) {
			t.Errorf("%s on lines %v, want %v", call, got[call], lines)
		}
	}
}

// declared are the names a package's non-test files declare at the top
// level, with each type's methods and struct fields as Type.Name.
func declared(t *testing.T, dir string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				name := d.Name.Name
				if d.Recv != nil && len(d.Recv.List) == 1 {
					typ := d.Recv.List[0].Type
					if star, ok := typ.(*ast.StarExpr); ok {
						typ = star.X
					}
					if id, ok := typ.(*ast.Ident); ok {
						name = id.Name + "." + name
					}
				}
				names[name] = true
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						names[s.Name.Name] = true
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, fl := range st.Fields.List {
								for _, n := range fl.Names {
									names[s.Name.Name+"."+n.Name] = true
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names[n.Name] = true
						}
					}
				}
			}
		}
	}
	return names
}

// TestArchitectureTrue: docs/architecture.md and README's layout say where
// things live, and it holds: every Go file they name exists (a bare name in
// a row of the floors' table, in that row's packages), every pkg.Name they
// name is declared there (a function, a type, its method or field, a
// constant, a variable), and the layout names every package of peal.
func TestArchitectureTrue(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// The packages, by path and by name.
	dirs := map[string]string{} // name → path; "" when two share it
	var pkgs []string
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && rel != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		if slices.Contains(pkgs, pkg) {
			return nil
		}
		pkgs = append(pkgs, pkg)
		name := filepath.Base(pkg)
		if _, twice := dirs[name]; twice {
			dirs[name] = ""
		} else {
			dirs[name] = pkg
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	decls := map[string]map[string]bool{}
	files, symbols := 0, 0 // what was checked
	tick := regexp.MustCompile("`([^`\n]+)`")
	goFile := regexp.MustCompile(`^[\w./-]+\.go$`)
	symbol := regexp.MustCompile(`^([a-z]+)((?:\.[A-Z]\w*)(?:\.[A-Za-z]\w*)?)(?:\(.*\))?$`)
	check := func(doc, line string, near []string) {
		for _, m := range tick.FindAllStringSubmatch(line, -1) {
			tok := m[1]
			switch {
			case goFile.MatchString(tok) && strings.Contains(tok, "/"):
				files++
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(tok))); err != nil {
					t.Errorf("%s names %s, which does not exist", doc, tok)
				}
			case goFile.MatchString(tok):
				files++
				in := near
				if len(in) == 0 {
					in = pkgs
				}
				if !slices.ContainsFunc(in, func(p string) bool {
					_, err := os.Stat(filepath.Join(root, filepath.FromSlash(p), tok))
					return err == nil
				}) {
					where := "in no package"
					if len(near) > 0 {
						where = "in none of " + strings.Join(near, ", ")
					}
					t.Errorf("%s names %s, which is %s", doc, tok, where)
				}
			case symbol.MatchString(tok):
				sm := symbol.FindStringSubmatch(tok)
				dir, ok := dirs[sm[1]]
				if !ok || dir == "" {
					continue // not a package's name
				}
				symbols++
				if decls[dir] == nil {
					decls[dir] = declared(t, filepath.Join(root, filepath.FromSlash(dir)))
				}
				if name := strings.TrimPrefix(sm[2], "."); !decls[dir][name] {
					t.Errorf("%s names %s, which package %s does not declare", doc, tok, dir)
				}
			}
		}
	}
	arch, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`^\| (?:\d+|—) \| (.*?) \|`)
	for _, line := range strings.Split(string(arch), "\n") {
		var near []string
		if m := row.FindStringSubmatch(line); m != nil {
			for _, p := range tick.FindAllStringSubmatch(m[1], -1) {
				near = append(near, p[1])
			}
		}
		check("docs/architecture.md", line, near)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if files < 20 || symbols < 40 {
		t.Fatalf("checked only %d files and %d names of docs/architecture.md", files, symbols)
	}
	_, layout, ok := strings.Cut(string(readme), "\nLayout: ")
	if !ok {
		t.Fatal("README.md has no paragraph that starts \"Layout: \"")
	}
	layout, _, _ = strings.Cut(layout, "\n\n")
	check("README.md's layout", layout, nil)
	named := map[string]bool{}
	for _, m := range tick.FindAllStringSubmatch(layout, -1) {
		named[strings.TrimSuffix(m[1], "/")] = true
	}
	for _, p := range pkgs {
		if strings.HasPrefix(p, "testdata/") || strings.HasPrefix(p, "internal/testkit/mockllm/cmd") {
			continue // the fakes' programs: testdata/ and mockllm's command
		}
		if !named[p] && !named[filepath.Base(p)] {
			t.Errorf("README.md's layout does not name package %s", p)
		}
	}
}
