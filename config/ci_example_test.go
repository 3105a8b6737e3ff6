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
