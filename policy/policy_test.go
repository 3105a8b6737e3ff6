package policy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"peal/config"
	"peal/confine"
	"peal/internal/testkit/testgit"
)

// configOf is a configuration of a scratch repository with env on top.
func configOf(t *testing.T, env ...string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	os.MkdirAll(repo, 0o755)
	testgit.Init(t, repo)
	plan := filepath.Join(dir, "plan.md")
	os.WriteFile(plan, []byte("## Task 1\nA\n"), 0o644)
	cfg, err := config.Load(config.Inputs{Env: append([]string{"PEAL_PLAN_PATH=" + plan, "PEAL_REPO_PATH=" + repo,
		"PEAL_STATE_DIR=" + filepath.Join(dir, "state"), "PEAL_AGENT_KIND=claude"}, env...)})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestOnRefusesToStart: confine = on on a machine that cannot confine
// files is one line naming the key and why, before anything runs; auto
// goes on, and says what it cannot enforce.
func TestOnRefusesToStart(t *testing.T) {
	t.Parallel()
	none := confine.Support{Why: "Landlock is not enabled in this kernel"}
	_, err := On(configOf(t, "PEAL_CONFINE=on"), nil, none)
	want := "confine = on (set by PEAL_CONFINE), but this machine cannot confine files: Landlock is not enabled in this kernel; set confine = auto to run with what it can enforce, or off"
	if err == nil || err.Error() != want {
		t.Fatalf("err %v\nwant %s", err, want)
	}
	c, err := On(configOf(t, "PEAL_CONFINE=auto"), nil, none)
	if err != nil || c.Files() || !strings.Contains(c.Line(), "not enforced: Landlock is not enabled in this kernel") {
		t.Fatalf("auto: %v, %+v", err, c)
	}
}

// TestDescribeIsThePolicy: every path a description names is one of the
// policy a call gets, under the key that put it there; what it says no
// call writes is what the policy protects, and it writes none of it.
func TestDescribeIsThePolicy(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	os.MkdirAll(filepath.Join(shared, "secret"), 0o700)
	cfg := configOf(t, "PEAL_CONFINE=auto", "PEAL_CONFINE_WRITE_PATHS="+shared, "PEAL_CONFINE_READ_DENY="+filepath.Join(shared, "secret"))
	d, err := Describe(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := newRules(cfg, nil, confine.Probe(), false)
	if err != nil {
		t.Fatal(err)
	}
	call := c.ForCall(Site{Tree: cfg.RepoPath}, nil, nil)
	lines := d.Lines("  ")
	text := strings.Join(lines, "\n")
	for _, p := range slices.Concat(call.Access.Write, call.Access.Read, call.Access.Deny, call.Access.Hide, call.Access.Protect) {
		if p.Key == confine.KeySystem || p.Key == keyWorkTree {
			continue
		}
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasSuffix(l, p.Path+" ("+p.Key+")") }) {
			t.Errorf("no line of the description names %s (%s):\n%s", p.Path, p.Key, text)
		}
	}
	var never []string
	for _, sec := range d.Sections {
		if sec.Head == "never written" {
			never = sec.Items
		}
	}
	git := filepath.Join(cfg.RepoPath, ".git")
	if !slices.Contains(never, git+" (the repository's .git)") {
		t.Errorf("never written lacks the repository's .git: %q", never)
	}
	for _, l := range lines {
		if strings.Contains(l, "write: ") && strings.Contains(l, git) {
			t.Errorf("a line says a call writes the .git it never writes: %q", l)
		}
		// One thing a line: a path, a host, a variable.
		if len(l) > 200 {
			t.Errorf("a line of %d characters: %q", len(l), l)
		}
	}
	if d.Off || d.Support != confine.Probe() {
		t.Errorf("description of %+v", d)
	}
}
