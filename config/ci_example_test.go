package config

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestCIExampleVariables: every PEAL_* variable the CI example of docs/ci.md
// sets is a configuration variable, so the example cannot rot silently.
func TestCIExampleVariables(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../docs/examples/peal-tickets.yml")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, k := range Keys {
		known[k.Env()] = true
	}
	vars := regexp.MustCompile(`\bPEAL_[A-Z0-9_]+`).FindAllString(string(data), -1)
	if len(vars) < 5 {
		t.Fatalf("the example sets only %d variables", len(vars))
	}
	for _, v := range vars {
		if !known[v] {
			t.Errorf("the CI example sets %s, which is no configuration variable", v)
		}
	}
}

// max_cost_usd must be above 0, and is only worth a warning without the
// event stream that reports cost.
func TestMaxCostValidation(t *testing.T) {
	t.Parallel()
	dir, base := validationBase(t)
	cfg, err := loadIn(dir, append(base, "PEAL_MAX_COST_USD=0"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.ValidateWithoutAgent(); err == nil || !strings.Contains(err.Error(), "max_cost_usd must be above 0 (set by PEAL_MAX_COST_USD)") {
		t.Fatalf("0: %v", err)
	}
	cfg, _ = loadIn(dir, append(base, "PEAL_MAX_COST_USD=2.5"))
	if err := cfg.ValidateWithoutAgent(); err != nil || !slices.ContainsFunc(cfg.Warnings, func(w string) bool { return strings.Contains(w, "without structured_output") }) {
		t.Fatalf("no structured output: %v, warnings %q", err, cfg.Warnings)
	}
}

// worktree_copy names paths inside the repository, copied into each task's
// worktree: an absolute path, one that climbs out or git's own folder is
// refused with the layer that set it.
func TestWorktreeCopyValidation(t *testing.T) {
	t.Parallel()
	dir, base := validationBase(t)
	for _, bad := range []string{"/etc/passwd", "../x", "a/../../x", ".git/config", "."} {
		cfg, err := loadIn(dir, append(base, "PEAL_WORKTREE_COPY=.env,"+bad))
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("worktree_copy entry %q is not a path inside the repository (set by PEAL_WORKTREE_COPY)", bad)
		if err := cfg.ValidateWithoutAgent(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	cfg, _ := loadIn(dir, append(base, "PEAL_WORKTREE_COPY=.env,conf/local.ini,node_modules"))
	if err := cfg.ValidateWithoutAgent(); err != nil {
		t.Fatal(err)
	}
	if cfg.ParallelIsolation != "worktree" || cfg.ParallelConflict != "retry" {
		t.Fatalf("defaults: isolation %q, conflict %q", cfg.ParallelIsolation, cfg.ParallelConflict)
	}
}

// worktree_sparse_paths and worktree_link name paths inside the repository
// too, refused as worktree_copy's are (a .git anywhere in the path
// included); a linked path may not hold, or lie in, another linked or a
// copied path.
func TestWorktreeSparseAndLinkValidation(t *testing.T) {
	t.Parallel()
	dir, base := validationBase(t)
	for _, key := range []string{"WORKTREE_SPARSE_PATHS", "WORKTREE_LINK", "WORKTREE_COPY"} {
		for _, bad := range []string{"/abs", "..", "../x", "a/../../x", ".git", ".git/hooks", "sub/.git", "sub/.git/x", ".", "a/.."} {
			cfg, err := loadIn(dir, append(base, "PEAL_"+key+"=ok,"+bad))
			if err != nil {
				t.Fatal(err)
			}
			name := strings.ToLower(key)
			want := fmt.Sprintf("%s entry %q is not a path inside the repository (set by PEAL_%s)", name, bad, key)
			if err := cfg.ValidateWithoutAgent(); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s=%s: %v, want %q", key, bad, err, want)
			}
		}
	}
	for _, tc := range []struct {
		env  []string
		want string // "" when valid
	}{
		{[]string{"PEAL_WORKTREE_SPARSE_PATHS=services/api,libs", "PEAL_WORKTREE_LINK=node_modules,.venv", "PEAL_WORKTREE_COPY=.env,node_modulesx"}, ""},
		{[]string{"PEAL_WORKTREE_LINK=web/node_modules,web"}, `worktree_link entries "web/node_modules" and "web" overlap (set by PEAL_WORKTREE_LINK)`},
		{[]string{"PEAL_WORKTREE_LINK=node_modules,./node_modules/"}, `worktree_link entries "node_modules" and "./node_modules/" overlap`},
		{[]string{"PEAL_WORKTREE_LINK=node_modules", "PEAL_WORKTREE_COPY=node_modules/.cache"}, `worktree_copy entry "node_modules/.cache" and worktree_link entry "node_modules" overlap (set by PEAL_WORKTREE_COPY and PEAL_WORKTREE_LINK)`},
		{[]string{"PEAL_WORKTREE_LINK=web/node_modules", "PEAL_WORKTREE_COPY=web"}, `worktree_copy entry "web" and worktree_link entry "web/node_modules" overlap`},
	} {
		cfg, err := loadIn(dir, append(base, tc.env...))
		if err != nil {
			t.Fatal(err)
		}
		err = cfg.ValidateWithoutAgent()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v: %v, want %q", tc.env, err, tc.want)
		}
	}
}

// validationBase is a folder with a one-task plan, and the variables that
// point a configuration at it, a git repository and a state folder in it.
func validationBase(t *testing.T) (dir string, env []string) {
	t.Helper()
	repo := gitRepo(t)
	dir = t.TempDir()
	plan := filepath.Join(dir, "plan.md")
	os.WriteFile(plan, []byte("## Task 1\nx\n"), 0o644)
	return dir, []string{"PEAL_PLAN_PATH=" + plan, "PEAL_REPO_PATH=" + repo, "PEAL_STATE_DIR=" + filepath.Join(dir, "st")}
}
