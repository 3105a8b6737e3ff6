package gitrepo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"peal/confine"
	"peal/phase"
)

// BenchmarkCommit is one commit of one new file, as peal makes it (git add
// -A, git diff --cached, git commit): without hooks; with a folder of
// peal's in the tree (git asked whether it is ignored); with a pre-commit
// hook that exits at once, run by peal plain and run confined (the
// commit's folder, the copy of the index, a confined start); and, for
// comparison, the same commit made by git alone with the hook run by git.
func BenchmarkCommit(b *testing.B) {
	for _, c := range []struct {
		name          string
		own, hook     bool
		confined, git bool
	}{
		{name: "no-hooks"},
		{name: "own-folder-in-tree", own: true},
		{name: "pre-commit-plain", hook: true},
		{name: "pre-commit-confined", hook: true, confined: true},
		{name: "pre-commit-run-by-git", hook: true, git: true},
	} {
		b.Run(c.name, func(b *testing.B) {
			if c.confined && !confine.Probe().Files {
				b.Skip("this kernel does not confine files")
			}
			dir := b.TempDir()
			repo := filepath.Join(dir, "repo")
			os.MkdirAll(repo, 0o755)
			plain := func(args ...string) {
				if _, err := Plain(repo, testEnv...).Command(args...).Run(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			plain("init", "-q")
			// A tree of 1 000 files, whose index the hooks' room copies.
			for i := range 1000 {
				p := filepath.Join(repo, fmt.Sprintf("d%02d", i%50), fmt.Sprintf("f%d.txt", i))
				os.MkdirAll(filepath.Dir(p), 0o755)
				os.WriteFile(p, []byte("x\n"), 0o644)
			}
			plain("add", "-A")
			plain("commit", "-q", "-m", "root")
			if c.hook {
				os.WriteFile(filepath.Join(repo, ".git", "hooks", "pre-commit"), []byte("#!/bin/sh\nexit 0\n"), 0o755)
			}
			var own []string
			if c.own {
				own = []string{filepath.Join(repo, ".peal")}
				os.MkdirAll(own[0], 0o755)
				os.WriteFile(filepath.Join(own[0], ".gitignore"), []byte("*\n"), 0o644)
			}
			caller := phase.Caller{Dir: repo, Env: testEnv, Limits: phase.Limits{Timeout: time.Minute, KillGrace: time.Second}}
			g := New(caller, nil, time.Minute, repo, own...)
			if c.confined {
				home, _ := os.UserHomeDir()
				g.RunHooks(Hooks{Temp: filepath.Join(dir, "tmp"), Confine: func(spec *phase.Spec, write []string) {
					pol := confine.Base(home)
					pol.Write = append(pol.Write, confine.Paths("work tree", repo)...)
					pol.Write = append(pol.Write, confine.Paths("hooks", write...)...)
					pol.Protect = append(pol.Protect, confine.Paths(confine.KeyGit, filepath.Join(repo, ".git"))...)
					spec.Confine = &confine.Call{Mode: confine.On, Access: pol}
				}})
			}
			ctx := context.Background()
			if err := g.Pin(ctx); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				os.WriteFile(filepath.Join(repo, fmt.Sprintf("new%d.txt", i)), []byte("new\n"), 0o644)
				if c.git {
					plain("add", "-A")
					plain("commit", "-q", "-m", "n")
					continue
				}
				if ok, err := g.CommitMessage(ctx, "n"); err != nil || !ok {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
