package integration

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"peal/internal/testkit/mockllm"
)

// TestPealFailedTaskKeptOffTheBranch: through a real CLI against the mock
// model, the execute deletes every file of the repository (each unlinked:
// both CLIs refuse `rm -rf ./*` by themselves);
// the project's check, the real `go test ./...`, fails, and the address
// round does not fix it. The task fails, and the user's branch and files
// are as before it: its commit is on a branch peal names, with the
// commands to look at it and take it. With PEAL_STET_BIN, the real stet
// reviews the task too.
func TestPealFailedTaskKeptOffTheBranch(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"claude", "codex"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			a := agentOf(t, kind)
			sb, bin := checksSandbox(t, a)
			script := mockllm.Script{Rules: []mockllm.Rule{
				{Contains: "--- FAIL", Replies: []mockllm.Reply{{Text: "I cannot fix that."}}},
				{Contains: "go test ./...", Replies: []mockllm.Reply{{Text: "I cannot fix that."}}},
				{Contains: "PLAN-1:", Replies: []mockllm.Reply{{Text: "Cleaning up.", Tool: shellRun(`for f in *; do unlink "$f"; done`)}, {Text: "DONE-1"}}},
				{Contains: "TASK-1 ", Replies: []mockllm.Reply{{Text: "PLAN-1: remove what is not needed."}}},
			}}
			srv := mockllm.New(script, mockllm.WithKey(testKey))
			t.Cleanup(srv.Close)
			root := filepath.Dir(sb.repo)
			plan, stateDir := filepath.Join(root, "plan.md"), filepath.Join(root, "state")
			writeFile(t, plan, "## Task 1\n\nTASK-1 tidy the calc package.\n")
			env := a.pealEnv(t, sb, srv.URL, testKey)
			env, _ = withRecordedStet(t, root, env)
			before := strings.TrimSpace(gitIn(t, sb.repo, sb.base, "rev-parse", "HEAD"))
			args := []string{pealBin(t), "run", "--plan", plan, "--repo", sb.repo, "--state-dir", stateDir, "--agent-kind", a.kind, "--agent-cmd", bin,
				"--check-command", "go test ./...", "--max-address-rounds", "1", "--commit-after-phase2"}
			r := run(t, sb.repo, env, nil, 15*time.Minute, args...)
			if r.code != 1 {
				t.Fatalf("want exit 1\n%s\nmock requests:\n%s", r, describe(srv))
			}
			if head := strings.TrimSpace(gitIn(t, sb.repo, sb.base, "rev-parse", "HEAD")); head != before {
				t.Fatalf("the user's branch moved from %s to %s\n%s", before, head, r)
			}
			if status := gitIn(t, sb.repo, sb.base, "status", "--porcelain"); strings.TrimSpace(status) != "" {
				t.Fatalf("status %q\n%s", status, r)
			}
			if ok, out := goTestPasses(t, sb.repo, env); !ok {
				t.Fatalf("the user's files are not back: go test fails:\n%s", out)
			}
			kept := strings.TrimSpace(gitIn(t, sb.repo, sb.base, "for-each-ref", "--format=%(refname:short)", "refs/heads/peal-kept/"))
			if !strings.HasPrefix(kept, "peal-kept/task-1-") || !strings.Contains(r.stderr, "take it with git merge "+kept) {
				t.Fatalf("kept %q\n%s", kept, r)
			}
			if files := strings.TrimSpace(gitIn(t, sb.repo, sb.base, "ls-tree", "-r", "--name-only", kept)); files != "" {
				t.Fatalf("the kept branch holds %q, not the deletion", files)
			}
			t.Logf("%s: %s", kind, lastLines(r.stderr, 2))
		})
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
