package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"peal/internal/testkit/fakes"
	"peal/internal/testkit/mockllm"
	"peal/internal/testkit/testgit"
	"peal/state"
)

// The Go module the tests of the project's checks work on: its check is
// the real `go test ./...`.
var calcModule = map[string]string{
	"go.mod":       "module example.com/calc\n\ngo 1.22\n",
	"calc.go":      "package calc\n\n// Add returns a + b.\nfunc Add(a, b int) int { return a + b }\n",
	"calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"Add(2, 3) is not 5\")\n\t}\n}\n",
}

// writeScript is a shell script that writes each file (name, content) in
// the working folder: printf with the content quoted for the shell.
func writeScript(files ...string) string {
	var parts []string
	for i := 0; i+1 < len(files); i += 2 {
		content := strings.ReplaceAll(strings.ReplaceAll(files[i+1], `\`, `\\`), "\n", `\n`)
		parts = append(parts, fmt.Sprintf("printf '%s' > %s", strings.ReplaceAll(content, "'", `'\''`), files[i]))
	}
	return strings.Join(parts, " && ")
}

// checksSandbox is a sandbox whose repository is calcModule, committed,
// with go on PATH and the machine's build cache, so that `go test` runs
// offline and quickly.
func checksSandbox(t *testing.T, a agent) (*sandbox, string) {
	t.Helper()
	bin := findCLI(t, a.kind)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go on PATH: the check is the real go test")
	}
	sb := newSandbox(t, filepath.Dir(bin))
	for name, content := range calcModule {
		writeFile(t, filepath.Join(sb.repo, name), content)
	}
	gocache, _ := exec.Command(goBin, "env", "GOCACHE").Output()
	for i, kv := range sb.base {
		if strings.HasPrefix(kv, "PATH=") {
			sb.base[i] = kv + string(os.PathListSeparator) + filepath.Dir(goBin)
		}
	}
	sb.base = append(sb.base, "GOCACHE="+strings.TrimSpace(string(gocache)), "GOTOOLCHAIN=local", "GOPROXY=off", "GOFLAGS=-mod=mod")
	writeFile(t, filepath.Join(sb.home, ".gitconfig"), "[user]\n\tname = t\n\temail = t@example.invalid\n")
	gitIn(t, sb.repo, sb.base, "add", "-A")
	gitIn(t, sb.repo, sb.base, "commit", "-q", "-m", "calc")
	return sb, bin
}

// checkRuns are the run record's check lines as "stage[round]:task outcome".
func checkRuns(t *testing.T, stateDir string) []string {
	t.Helper()
	events, _, err := state.ReadRecord(filepath.Join(stateDir, state.RecordName))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range events {
		if ev.Ev != state.EvCheck {
			continue
		}
		outcome := "pass"
		if ev.ExitCode == nil || *ev.ExitCode != 0 || ev.TimedOut || ev.Interrupted {
			outcome = "fail"
		}
		stage := ev.Stage
		if ev.Round > 0 {
			stage = fmt.Sprintf("%s%d", stage, ev.Round)
		}
		out = append(out, fmt.Sprintf("%s:%d %s", stage, *ev.Task, outcome))
	}
	return out
}

// goTestPasses runs go test in dir with env and reports its output.
func goTestPasses(t *testing.T, dir string, env []string) (bool, string) {
	t.Helper()
	cmd := exec.Command("go", "test", "./...")
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	return err == nil, string(out)
}

// TestPealChecksGoTest: through a real CLI against the mock model, the
// execute writes code whose test fails; the project's check, the real `go
// test ./...`, fails; the address call quotes the failing test, from whose
// name the model answers with a fix; go test passes and the task completes.
// With PEAL_STET_BIN, the real stet reviews the task too.
func TestPealChecksGoTest(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"claude", "codex"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			a := agentOf(t, kind)
			sb, bin := checksSandbox(t, a)
			buggy := writeScript("mul.go", "package calc\n\n// Mul returns a times b.\nfunc Mul(a, b int) int { return a + b }\n",
				"mul_test.go", "package calc\n\nimport \"testing\"\n\nfunc TestMul(t *testing.T) {\n\tif Mul(2, 3) != 6 {\n\t\tt.Fatal(\"Mul(2, 3) is not 6\")\n\t}\n}\n")
			fixed := writeScript("mul.go", "package calc\n\n// Mul returns a times b.\nfunc Mul(a, b int) int { return a * b }\n")
			script := mockllm.Script{Rules: []mockllm.Rule{
				// The address call: only a prompt that quotes the failing
				// test gets the fix.
				{Contains: "--- FAIL: TestMul", Replies: []mockllm.Reply{{Text: "Fixing Mul.", Tool: shellRun(fixed)}, {Text: "FIXED"}}},
				{Contains: "PLAN-1:", Replies: []mockllm.Reply{{Text: "Writing Mul and its test.", Tool: shellRun(buggy)}, {Text: "DONE-1"}}},
				{Contains: "TASK-1 ", Replies: []mockllm.Reply{{Text: "PLAN-1: write mul.go with Mul and mul_test.go."}}},
			}}
			srv := pealMock(script)
			t.Cleanup(srv.Close)
			root := filepath.Dir(sb.repo)
			plan, stateDir := filepath.Join(root, "plan.md"), filepath.Join(root, "state")
			writeFile(t, plan, "## Task 1\n\nTASK-1 add Mul(a, b int) int to the calc package, with a test.\n")
			env := a.pealEnv(t, sb, srv.URL, testKey)
			env, stetCalls := withRecordedStet(t, root, env)
			args := []string{pealBin(t), "run", "--plan", plan, "--repo", sb.repo, "--state-dir", stateDir, "--agent-kind", a.kind, "--agent-cmd", bin,
				"--check-command", "go test ./...", "--max-address-rounds", "2", "--commit-after-phase2"}
			start := time.Now()
			r := run(t, sb.repo, env, nil, 15*time.Minute, args...)
			t.Logf("%s (stet %v): %s", kind, stetCalls != "", time.Since(start).Round(time.Millisecond))
			if r.code != 0 {
				t.Fatalf("want exit 0\n%s\nmock requests:\n%s", r, describe(srv))
			}
			if ok, out := goTestPasses(t, sb.repo, env); !ok {
				t.Fatalf("go test fails on the final tree:\n%s", out)
			}
			if got, want := checkRuns(t, stateDir), []string{"start:-1 pass", "execute:1 fail", "address1:1 pass"}; !slices.Equal(got, want) {
				t.Fatalf("check runs %q, want %q", got, want)
			}
			quoted := 0
			for _, req := range modelRequests(srv) {
				if strings.Contains(req.UserText, "--- FAIL: TestMul") && strings.Contains(req.UserText, "command: go test ./...") {
					quoted++
				}
			}
			if quoted == 0 {
				t.Fatalf("no request quoted the failing test\n%s", describe(srv))
			}
			if stetCalls != "" {
				spans, err := fakes.ReadStetSpans(stetCalls)
				if err != nil {
					t.Fatal(err)
				}
				var cmds []string
				for _, sp := range spans {
					cmds = append(cmds, sp.Cmd)
				}
				t.Logf("stet commands: %v", cmds)
				if c := strings.Join(cmds, " "); !strings.HasPrefix(c, "start") || !strings.HasSuffix(c, "finish") {
					t.Fatalf("stet commands %q", cmds)
				}
			}
		})
	}
}

// TestPealChecksMergedBlock: a parallel block of two tasks through a real
// CLI, whose work merges without a conflict but fails `go test` together
// (task 1 renames Add to Sum, task 2 adds a caller of Add): each passes its
// checks in its worktree, the merged tree of task 2 fails them, its merge is
// undone, and it runs again alone on the merged work, where the address
// call, shown the compiler's error, fixes the caller. The run ends with a
// tree that passes go test.
func TestPealChecksMergedBlock(t *testing.T) {
	t.Parallel()
	a := agentOf(t, "claude")
	sb, bin := checksSandbox(t, a)
	rename := writeScript("calc.go", "package calc\n\n// Sum returns a + b.\nfunc Sum(a, b int) int { return a + b }\n",
		"calc_test.go", "package calc\n\nimport \"testing\"\n\nfunc TestSum(t *testing.T) {\n\tif Sum(2, 3) != 5 {\n\t\tt.Fatal(\"Sum(2, 3) is not 5\")\n\t}\n}\n")
	caller := writeScript("double.go", "package calc\n\n// Double returns 2a.\nfunc Double(a int) int { return Add(a, a) }\n",
		"double_test.go", "package calc\n\nimport \"testing\"\n\nfunc TestDouble(t *testing.T) {\n\tif Double(4) != 8 {\n\t\tt.Fatal(\"Double(4) is not 8\")\n\t}\n}\n")
	fix := writeScript("double.go", "package calc\n\n// Double returns 2a.\nfunc Double(a int) int { return Sum(a, a) }\n")
	script := mockllm.Script{Rules: []mockllm.Rule{
		{Contains: "undefined: Add", Replies: []mockllm.Reply{{Text: "Add is now Sum.", Tool: shellRun(fix)}, {Text: "FIXED"}}},
		{Contains: "PLAN-1:", Replies: []mockllm.Reply{{Text: "Renaming.", Tool: shellRun(rename)}, {Text: "DONE-1"}}},
		{Contains: "PLAN-2:", Replies: []mockllm.Reply{{Text: "Adding Double.", Tool: shellRun(caller)}, {Text: "DONE-2"}}},
		{Contains: "TASK-1 ", Replies: []mockllm.Reply{{Text: "PLAN-1: rename Add to Sum."}}},
		{Contains: "TASK-2 ", Replies: []mockllm.Reply{{Text: "PLAN-2: add Double, built on Add."}}},
	}}
	srv := pealMock(script)
	t.Cleanup(srv.Close)
	root := filepath.Dir(sb.repo)
	plan, stateDir := filepath.Join(root, "plan.md"), filepath.Join(root, "state")
	writeFile(t, plan, "## Task 1 (parallel)\n\nTASK-1 rename Add to Sum.\n\n## Task 2 (parallel)\n\nTASK-2 add Double(a int) int.\n")
	env := a.pealEnv(t, sb, srv.URL, testKey)
	env, stetCalls := withRecordedStet(t, root, env)
	args := []string{pealBin(t), "run", "--plan", plan, "--repo", sb.repo, "--state-dir", stateDir, "--agent-kind", a.kind, "--agent-cmd", bin,
		"--check-command", "go vet ./... && go test ./...", "--max-parallel", "2"}
	start := time.Now()
	r := run(t, sb.repo, env, nil, 20*time.Minute, args...)
	t.Logf("block of 2 (stet %v) in %s", stetCalls != "", time.Since(start).Round(time.Millisecond))
	if r.code != 0 {
		t.Fatalf("want exit 0\n%s\nmock requests:\n%s", r, describe(srv))
	}
	if ok, out := goTestPasses(t, sb.repo, env); !ok {
		t.Fatalf("go test fails on the final tree:\n%s", out)
	}
	got := checkRuns(t, stateDir)
	t.Logf("check runs: %q", got)
	for _, want := range []string{"execute:1 pass", "execute:2 pass", "merge:1 pass", "merge:2 fail", "execute:2 fail", "address1:2 pass"} {
		if !slices.Contains(got, want) {
			t.Errorf("no check run %q in %q", want, got)
		}
	}
	events, _, _ := state.ReadRecord(filepath.Join(stateDir, state.RecordName))
	var merges []string
	for _, ev := range events {
		if ev.Ev == state.EvMerge {
			merges = append(merges, fmt.Sprintf("%d %s", *ev.Task, ev.Result))
		}
	}
	if want := []string{"1 merged", "2 checks_failed"}; !slices.Equal(merges, want) {
		t.Errorf("merges %q, want %q", merges, want)
	}
	if left := testgit.WorktreeLeftovers(t, sb.repo, stateDir); len(left) > 0 {
		t.Errorf("left behind: %q", left)
	}
	if stetCalls != "" {
		spans, err := fakes.ReadStetSpans(stetCalls)
		if err != nil {
			t.Fatal(err)
		}
		perTask := map[string][]string{}
		for _, sp := range spans {
			perTask[sp.Task] = append(perTask[sp.Task], sp.Cmd)
		}
		t.Logf("stet commands per task: %v", perTask)
	}
}
