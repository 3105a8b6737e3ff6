package policy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"peal/agent"
	"peal/confine"
	"peal/phase"
	"peal/policy/secrets"
)

// TestTokenFiles: a home folder holding one of each known token file
// (policy/secrets), some inside folders a call reads (cargo's folder, a
// toolchain on PATH; Go's settings, a toolchain's; the cache folder) or
// writes (a build cache): neither an agent call nor a check reads any of
// them, by the policy's rules and, run confined, by the kernel's, while the
// files beside them in those folders stay readable.
func TestTokenFiles(t *testing.T) {
	t.Parallel()
	// The folders of the list hold a token each; the rest are files.
	folders := map[string]bool{".ssh": true, ".gnupg": true, ".aws": true, ".azure": true, ".config/gcloud": true, ".kube": true,
		".config/gh": true, ".config/hub": true, ".config/glab-cli": true, ".config/doctl": true, ".fly": true,
		".config/rclone": true, ".password-store": true, ".local/share/keyrings": true, ".local/share/uv/credentials": true}
	var files, entries []string
	for _, f := range secrets.Files {
		rel, ok := strings.CutPrefix(mustExpand(t, f.Path, "/h"), "/h/")
		if !ok {
			t.Fatalf("%s: %q is not in the home folder", f.Tool, f.Path)
		}
		if folders[rel] {
			rel += "/token"
		}
		files = append(files, rel)
		entries = append(entries, rel)
	}
	// Beside them: what calls read and write there.
	beside := []string{".cargo/bin/cargo", ".cargo/registry/index/x", ".config/go/telemetry/x", ".cache/pip/x", ".docker/buildx/x"}
	entries = append(entries, beside...)
	home := fakeHome(t, entries...)
	for _, rel := range files {
		os.WriteFile(filepath.Join(home, rel), []byte("TOKEN-PLANTED\n"), 0o600)
	}
	os.Chmod(filepath.Join(home, ".cargo/bin/cargo"), 0o755)
	cfg := configOf(t, "PEAL_CONFINE=auto")
	path := filepath.Join(home, ".cargo", "bin") + ":/usr/bin:/bin"
	c, err := newRulesOn(cfg, nil, confine.Probe(), false, machine{home: home, getenv: envOf("PATH=" + path), euid: os.Geteuid()})
	if err != nil {
		t.Fatal(err)
	}
	claude, _ := agent.Lookup("claude")
	site := Site{Tree: cfg.RepoPath}
	for _, kind := range []*agent.Kind{claude, nil} {
		call := c.ForCall(site, kind, nil)
		plan, err := confine.Expand(call.Access, confine.OS)
		if err != nil {
			t.Fatal(err)
		}
		for _, rel := range files {
			if read, _ := covered(plan, filepath.Join(home, rel)); read {
				t.Errorf("agent call %v: ~/%s is readable", kind != nil, rel)
			}
		}
		for _, rel := range []string{".cargo/bin/cargo", ".cargo/registry/index/x", ".cache/pip/x"} {
			if read, _ := covered(plan, filepath.Join(home, rel)); !read {
				t.Errorf("agent call %v: ~/%s is not readable", kind != nil, rel)
			}
		}
		if !confine.Probe().Files {
			continue
		}
		// The kernel's word: one confined shell reads each.
		script := "for f in \"$@\"; do cat \"$f\" 2>/dev/null && echo \"READ $f\"; done; cat .cargo/bin/cargo >/dev/null && echo BESIDE-READ"
		argv := append([]string{"/bin/sh", "-c", script, "sh"}, files...)
		res, err := phase.Run(context.Background(), phase.Spec{Phase: "execute", Argv: argv, Dir: home, Timeout: time.Minute,
			KillGrace: time.Second, CombinedOutput: true, Confine: call})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(res.Stdout, "READ ") || strings.Contains(res.Stdout, "TOKEN-PLANTED") || !strings.Contains(res.Stdout, "BESIDE-READ") {
			t.Errorf("agent call %v, confined:\n%s", kind != nil, res.Stdout)
		}
	}
}

func mustExpand(t *testing.T, p, home string) string {
	t.Helper()
	full, ok := secrets.Expand(p, home, func(string) string { return "" })
	if !ok {
		t.Fatalf("%q does not expand", p)
	}
	return full
}
