package gitrepo

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"peal/phase"
)

// TestEveryCommandIsSafe: every git command a Repo runs, over a tree that
// holds a repository a call made (its file system monitor and filter are
// programs) and a submodule whose files changed (its configuration names a
// monitor too), gets peal's settings on its command line and none of
// peal's tokens: a git first on PATH notes each command's arguments and
// environment, and the planted programs never run. The commit refuses the
// call's repository; a snapshot leaves it out. (Not parallel: it puts its
// git first on peal's PATH.)
func TestEveryCommandIsSafe(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	planted := filepath.Join(dir, "planted.sh")
	os.WriteFile(planted, []byte("#!/bin/sh\necho \"$0 $*\" >> "+marker+"\ncat\n"), 0o755)

	// The submodule, from a repository beside the work tree.
	lib := filepath.Join(dir, "lib")
	testGit(t, dir)("init", "-q", lib)
	os.WriteFile(filepath.Join(lib, "l.txt"), []byte("l\n"), 0o644)
	testGit(t, lib)("add", "l.txt")
	testGit(t, lib)("commit", "-q", "-m", "lib")
	repo := filepath.Join(dir, "repo")
	git := testGit(t, dir)
	git("init", "-q", repo)
	git = testGit(t, repo)
	os.WriteFile(filepath.Join(repo, "a.txt"), []byte("a\n"), 0o644)
	git("add", "a.txt")
	git("commit", "-q", "-m", "root")
	git("-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "sub")
	git("commit", "-q", "-m", "sub")
	testGit(t, filepath.Join(repo, "sub"))("config", "core.fsmonitor", planted)
	os.WriteFile(filepath.Join(repo, "sub", "l.txt"), []byte("changed\n"), 0o644)

	// git first on PATH, noting what it was given.
	shim := filepath.Join(dir, "shim")
	os.Mkdir(shim, 0o755)
	real, err := lookGit()
	if err != nil {
		t.Skip(err)
	}
	log := filepath.Join(dir, "commands")
	os.WriteFile(filepath.Join(shim, "git"), []byte("#!/bin/sh\n{ printf 'ARGS'; for a in \"$@\"; do printf ' [%s]' \"$a\"; done; echo; env | sed 's/^/ENV /'; } >> "+log+"\nexec "+real+" \"$@\"\n"), 0o755)
	t.Setenv("PATH", shim+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("GITHUB_TOKEN", "ghp_planted_token_0123456789")
	// The test's own git, from now on: the real one.
	git = func(args ...string) string {
		t.Helper()
		cmd := exec.Command(real, args...)
		cmd.Dir, cmd.Env = repo, append(os.Environ(), testEnv...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %q: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	in := func(dir string) func(...string) string {
		return func(args ...string) string { return git(append([]string{"-C", dir}, args...)...) }
	}

	caller := phase.Caller{Dir: repo, Env: testEnv, Limits: phase.Limits{Timeout: time.Minute, KillGrace: time.Second}}
	g := New(caller, nil, time.Minute, repo)
	if err := g.Pin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.NoteEmbedded(ctx); err != nil {
		t.Fatal(err)
	}
	// The call's repository, with a commit, its monitor, a filter of its
	// own for its files, and a file it changed since.
	evil := filepath.Join(repo, "evil")
	git("init", "-q", evil)
	os.WriteFile(filepath.Join(evil, ".gitattributes"), []byte("* filter=x diff=x\n"), 0o644)
	os.WriteFile(filepath.Join(evil, "f"), []byte("f\n"), 0o644)
	in(evil)("add", "f", ".gitattributes")
	in(evil)("commit", "-q", "-m", "x")
	for k, v := range map[string]string{"core.fsmonitor": planted, "filter.x.clean": planted, "filter.x.smudge": planted, "diff.x.textconv": planted} {
		in(evil)("config", k, v)
	}
	os.WriteFile(filepath.Join(evil, "f"), []byte("g\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "b.txt"), []byte("b\n"), 0o644)

	if _, err := g.Status(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Changes(ctx); err != nil {
		t.Fatal(err)
	}
	index := filepath.Join(dir, "index")
	tree, err := g.Snapshot(ctx, index)
	if err != nil {
		t.Fatal(err)
	}
	if files := git("ls-tree", "--name-only", tree); files != ".gitmodules\na.txt\nb.txt\nsub" {
		t.Fatalf("the snapshot holds %q", files)
	}
	_, err = g.Commit(ctx, []int{1}, "work")
	var embedded *EmbeddedError
	if !errors.As(err, &embedded) || !slices.Equal(embedded.Paths, []string{"evil/"}) || !strings.Contains(err.Error(), "a git repository that a call made (evil/") {
		t.Fatalf("the commit of a tree holding the call's repository: %v", err)
	}
	if staged := git("diff", "--cached", "--name-only"); staged != "" {
		t.Fatalf("staged after the refusal: %q", staged)
	}
	if err := g.Unembed(embedded.Paths); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Commit(ctx, []int{1}, "work"); err != nil {
		t.Fatal(err)
	}
	if files := git("show", "--name-only", "--format=", "HEAD"); files != "b.txt\nevil/.gitattributes\nevil/f" {
		t.Fatalf("committed %q", files)
	}
	if data, err := os.ReadFile(marker); err == nil {
		t.Fatalf("peal's git ran a program of the tree's repositories:\n%s", data)
	}

	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	commands := strings.Split(strings.TrimPrefix(string(data), "ARGS"), "\nARGS")
	if len(commands) < 8 {
		t.Fatalf("only %d commands noted", len(commands))
	}
	for _, c := range commands {
		args, env, _ := strings.Cut(c, "\nENV ")
		if strings.Contains(env, "GITHUB_TOKEN") {
			t.Errorf("git got peal's token: %s", args)
		}
		for _, s := range safeSettings {
			if !strings.Contains(args, "[-c] ["+s+"]") && !(strings.HasPrefix(s, "core.hooksPath=") && strings.Contains(args, "[--git-path] [hooks]")) {
				t.Errorf("git ran without %s: %s", s, args)
			}
		}
	}
}

// lookGit is the git on PATH, as a full path.
func lookGit() (string, error) {
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		p := filepath.Join(d, "git")
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("no git on PATH")
}

// TestOneCommandBuilder: within the package, git starts in one place
// (Cmd.Run, and runPlain for the programs that are not peal), and nothing
// else starts a process but the hooks (hookRoom.hook): a command that
// escaped the builder would escape peal's settings.
func TestOneCommandBuilder(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("*.go")
	allowed := map[string][]string{
		"phase.Run":           {"Cmd.Run", "hookRoom.hook"},
		"exec.Command":        {},
		"exec.CommandContext": {"Cmd.runPlain"},
		"os.StartProcess":     {},
		"syscall.Exec":        {},
	}
	seen := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name := fn.Name.Name
			if fn.Recv != nil && len(fn.Recv.List) == 1 {
				typ := fn.Recv.List[0].Type
				if star, ok := typ.(*ast.StarExpr); ok {
					typ = star.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					name = id.Name + "." + name
				}
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, ok := sel.X.(*ast.Ident)
				if !ok {
					return true
				}
				callee := pkg.Name + "." + sel.Sel.Name
				if in, listed := allowed[callee]; listed {
					seen[callee+" in "+name] = true
					if !slices.Contains(in, name) {
						t.Errorf("%s: %s calls %s: git starts only in Cmd.Run (its settings and environment), hooks only in hookRoom.hook", f, name, callee)
					}
				}
				return true
			})
		}
	}
	if !seen["phase.Run in Cmd.Run"] {
		t.Fatalf("found no phase.Run in Cmd.Run: %v", seen)
	}
}
