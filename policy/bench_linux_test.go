package policy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"peal/agent"
	"peal/config"
	"peal/confine"
	"peal/internal/testkit/testgit"
)

// benchRules are the rules of a run on a machine whose home folder is shaped
// like a developer's (100 entries, a .config of 30, the secrets, Go and
// Cargo on PATH, a git configuration), its repository outside it.
func benchRules(b *testing.B, euid int) (*Rules, Site) {
	root := b.TempDir()
	home, repo := filepath.Join(root, "home"), filepath.Join(root, "repo")
	for i := range 100 {
		os.MkdirAll(filepath.Join(home, fmt.Sprintf(".tool%d", i)), 0o755)
	}
	for i := range 30 {
		os.MkdirAll(filepath.Join(home, ".config", fmt.Sprintf("app%d", i)), 0o755)
	}
	for _, d := range []string{".ssh", ".aws", ".config/gh", ".kube", ".docker", "go/bin", ".cargo/bin", ".rustup", ".claude", ".cache"} {
		os.MkdirAll(filepath.Join(home, d), 0o755)
	}
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = b\n"), 0o644)
	os.MkdirAll(repo, 0o755)
	testgit.Init(b, repo)
	for i := range 20 {
		os.WriteFile(filepath.Join(repo, fmt.Sprintf("file%d", i)), nil, 0o644)
	}
	os.WriteFile(filepath.Join(root, "plan.md"), []byte("## Task 1\nA\n"), 0o644)
	cfg, err := config.Load(config.Inputs{Env: []string{"PEAL_PLAN_PATH=" + filepath.Join(root, "plan.md"), "PEAL_REPO_PATH=" + repo,
		"PEAL_STATE_DIR=" + filepath.Join(root, "state"), "PEAL_KNOWLEDGE_DIR=" + filepath.Join(root, "knowledge"), "PEAL_AGENT_KIND=claude"}})
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(home, "go", "bin") + string(os.PathListSeparator) + filepath.Join(home, ".cargo", "bin") + string(os.PathListSeparator) + "/usr/bin"
	c, err := newRulesOn(cfg, nil, confine.Probe(), false, machine{home: home, getenv: envOf("PATH=" + path), euid: euid})
	if err != nil {
		b.Fatal(err)
	}
	return c, Site{Tree: repo}
}

// BenchmarkPrepare is what peal does before a confined agent call starts
// (the expansion of its policy, the Landlock ruleset, the status pipe),
// for the policy a run gives it (the home folder read by allow list) and,
// beside it, for the same policy without the allow list (every file of
// the home folder but the secrets readable): what the allow list costs or
// saves a call; and as root, whose calls are also denied the files only
// root reads (/etc/shadow, …), which narrows /etc.
func BenchmarkPrepare(b *testing.B) {
	if !confine.Probe().Files {
		b.Skip("no Landlock")
	}
	claude, _ := agent.Lookup("claude")
	for _, c := range []struct {
		name  string
		euid  int
		allow bool
	}{{"allow-list", 1000, true}, {"secrets-only", 1000, false}, {"allow-list-root", 0, true}} {
		rules, site := benchRules(b, c.euid)
		call := rules.ForCall(site, claude, nil)
		if !c.allow {
			call.Access.Hide = nil
			call.Access.Read = confine.Paths(confine.KeySystem, "/")
		}
		name := c.name
		b.Run(name, func(b *testing.B) {
			plan, err := confine.Expand(call.Access, confine.OS)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				cmd := exec.Command("/bin/true")
				cmd.Dir = site.Tree
				l, err := call.Prepare(cmd, "b", "")
				if err != nil {
					b.Fatal(err)
				}
				l.Close()
			}
			b.ReportMetric(float64(len(plan.Rules)), "rules")
		})
	}
}

// BenchmarkRules is what the rules of a run cost once, when the run
// starts: the home folders, the toolchains of PATH and the variables.
func BenchmarkRules(b *testing.B) {
	c, _ := benchRules(b, os.Geteuid())
	cfg := &config.Config{Confine: "on", ConfineTCP: "proxy", Sources: map[string]config.Source{}}
	m := machine{home: c.home, getenv: c.getenv, euid: os.Geteuid()}
	for b.Loop() {
		if _, err := newRulesOn(cfg, nil, confine.Probe(), false, m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStart starts /bin/true and waits for it: plain, and confined
// under the policies of BenchmarkPrepare (the launcher, peal's binary,
// applies the rules and runs it): what a confined call costs over an
// unconfined one, the allow list included.
func BenchmarkStart(b *testing.B) {
	if !confine.Probe().Files {
		b.Skip("no Landlock")
	}
	claude, _ := agent.Lookup("claude")
	for _, c := range []struct {
		name  string
		euid  int
		allow bool
	}{{"plain", 1000, true}, {"allow-list", 1000, true}, {"secrets-only", 1000, false}, {"allow-list-root", 0, true}} {
		rules, site := benchRules(b, c.euid)
		call := rules.ForCall(site, claude, nil)
		if !c.allow {
			call.Access.Hide = nil
			call.Access.Read = confine.Paths(confine.KeySystem, "/")
		}
		if c.name == "plain" {
			call = nil
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				cmd := exec.Command("/bin/true")
				cmd.Dir = site.Tree
				cmd.Env = []string{"PATH=/usr/bin:/bin"}
				var l *confine.Launch
				if call != nil {
					var err error
					if l, err = call.Prepare(cmd, "b", ""); err != nil {
						b.Fatal(err)
					}
				}
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				if l != nil {
					if err := l.Wait(); err != nil {
						b.Fatal(err)
					}
					l.Close()
				}
				if err := cmd.Wait(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
