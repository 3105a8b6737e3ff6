package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"peal/confine"
	"peal/internal/gitrepo"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/mockllm"
	"peal/internal/testkit/testgit"
)

// The block of TestPealParallelWorktrees: tasks 1 and 2 write files of their
// own, tasks 3 and 4 the same new file with different contents, so that
// task 4's merge conflicts with task 3's.
var blockFiles = []struct{ name, content string }{
	{"one.txt", "one\n"}, {"two.txt", "two\n"}, {"shared.txt", "three\n"}, {"shared.txt", "four\n"},
}

// shellWrite is a tool call that writes content to name, a path relative to
// the folder the CLI works in, through the CLI's shell tool: the model
// cannot know which worktree that is.
func shellWrite(name, content string) *mockllm.ToolCall {
	return shellRun(fmt.Sprintf("printf '%s' > %s", strings.ReplaceAll(content, "\n", `\n`), name))
}

// shellRun is a tool call that runs script through the CLI's shell tool, in
// the folder the CLI works in.
func shellRun(script string) *mockllm.ToolCall {
	return &mockllm.ToolCall{Input: func(tools []mockllm.Tool) *mockllm.Call {
		has := map[string]bool{}
		for _, t := range tools {
			has[t.Name] = true
		}
		switch {
		case has["shell"]:
			return &mockllm.Call{Name: "shell", Args: map[string]any{"command": []string{"bash", "-lc", script}}}
		case has["exec_command"]:
			return &mockllm.Call{Name: "exec_command", Args: map[string]any{"cmd": script}}
		}
		for _, name := range []string{"Bash", "run_shell_command", "bash"} {
			if has[name] {
				return &mockllm.Call{Name: name, Args: map[string]any{"command": script, "description": "Write a file"}}
			}
		}
		return nil
	}}
}

// blockScript answers the plan call of task N (its text holds TASK-N) with a
// plan naming PLAN-N, the execute call of that plan by writing the task's
// file.
func blockScript() mockllm.Script {
	var s mockllm.Script
	for i, f := range blockFiles {
		n := i + 1
		s.Rules = append(s.Rules,
			mockllm.Rule{Contains: fmt.Sprintf("PLAN-%d:", n), Replies: []mockllm.Reply{
				{Text: "Writing the file.", Tool: shellWrite(f.name, f.content)},
				{Text: fmt.Sprintf("DONE-%d", n)},
			}},
			mockllm.Rule{Contains: fmt.Sprintf("TASK-%d ", n), Replies: []mockllm.Reply{{Text: fmt.Sprintf("PLAN-%d: write %s.", n, f.name)}}},
		)
	}
	return s
}

// reviewModel serves stet's review model on 127.0.0.1: the model list stet
// checks before a review, and an answer without findings to every hunk.
func reviewModel(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			fmt.Fprint(w, `{"object":"list","data":[{"id":"mock-model","object":"model"}]}`)
		case "/v1/chat/completions":
			fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":"[]"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestPealParallelWorktrees: a block of four tasks through each real CLI,
// two at a time, each task in a git worktree of its own (the CLI's working
// folder: the requests it sends name it), reviewed by the real stet when
// PEAL_STET_BIN names one (each review in its own stet state folder), and
// merged back in plan order: the separate files land, task 4's conflict with
// task 3 is undone and named, and task 4 runs again alone on the merged
// work. Nothing is left behind.
func TestPealParallelWorktrees(t *testing.T) {
	t.Parallel()
	eachAgent(t, func(t *testing.T, a agent) { parallelBlock(t, a, nil) })
}

// TestPealParallelWorktreesTwoCLIs: the same block with two real CLIs of
// different kinds, claude as the primary and codex as the fallback. The
// model refuses claude's requests for tasks 2 and 4 (an HTTP 400), so each
// of their calls fails on its first attempt and is done by codex on its
// second: both CLIs work in the block's worktrees at the same time, and
// codex's work on task 4 is the one that conflicts.
func TestPealParallelWorktreesTwoCLIs(t *testing.T) {
	t.Parallel()
	primary, fallback := agentOf(t, "claude"), agentOf(t, "codex")
	parallelBlock(t, primary, &fallback)
}

// agentOf is the agent of kind.
func agentOf(t *testing.T, kind string) agent {
	for _, a := range agents {
		if a.kind == kind {
			return a
		}
	}
	t.Fatalf("no agent %s", kind)
	return agent{}
}

// refusedTasks are the tasks whose every request the primary CLI sends is
// refused when a fallback CLI takes part.
var refusedTasks = []int{2, 4}

// parallelBlock runs the block of TestPealParallelWorktrees through a, and
// fb as the fallback when it is set (see TestPealParallelWorktreesTwoCLIs).
func parallelBlock(t *testing.T, a agent, fb *agent) {
	bin := findCLI(t, a.kind)
	peal := pealBin(t)
	sb := newSandbox(t, filepath.Dir(bin))
	script := blockScript()
	if fb != nil {
		var refuse []mockllm.Rule
		for _, n := range refusedTasks {
			for _, text := range []string{fmt.Sprintf("TASK-%d ", n), fmt.Sprintf("PLAN-%d:", n)} {
				refuse = append(refuse, mockllm.Rule{Contains: text, Protocol: a.protocol,
					Replies: []mockllm.Reply{{Fail: &mockllm.Failure{Status: 400, Message: "this task is not for this model"}}}})
			}
		}
		script.Rules = append(refuse, script.Rules...)
	}
	srv := pealMock(script)
	t.Cleanup(srv.Close)
	root := filepath.Dir(sb.repo)
	plan, state, logFile := filepath.Join(root, "plan.md"), filepath.Join(root, "state"), filepath.Join(root, "peal.log")
	var body strings.Builder
	for i, f := range blockFiles {
		fmt.Fprintf(&body, "## Task %d (parallel)\n\nTASK-%d write %s.\n\n", i+1, i+1, f.name)
	}
	writeFile(t, plan, body.String())
	// Merge commits, and stet's notes, need an identity.
	writeFile(t, filepath.Join(sb.home, ".gitconfig"), "[user]\n\tname = t\n\temail = t@example.invalid\n")
	env := a.pealEnv(t, sb, srv.URL, testKey)
	args := []string{"run", "--plan", plan, "--repo", sb.repo, "--state-dir", state,
		"--agent-kind", a.kind, "--agent-cmd", bin, "--max-parallel", "2", "--commit-after-phase2", "--log-file", logFile}
	if fb != nil {
		env = append(env, fb.configEnv(t, sb.home, srv.URL, testKey)...)
		// A second attempt, which is the fallback's.
		args = append(args, "--fallback-agent-kind", fb.kind, "--fallback-agent-cmd", findCLI(t, fb.kind), "--phase-retry-count", "1")
	}
	env, stetCalls := withRecordedStet(t, root, env)
	withStet := stetCalls != ""
	start := time.Now()
	r := run(t, sb.repo, env, nil, 20*time.Minute, append([]string{peal}, args...)...)
	t.Logf("%s (fallback %v): block of 4 (stet %v) in %s", a.kind, fb != nil, withStet, time.Since(start).Round(time.Millisecond))
	if r.code != 0 {
		t.Fatalf("want exit 0\n%s\nmock requests:\n%s", r, describe(srv))
	}
	for _, f := range []struct{ name, content string }{{"one.txt", "one\n"}, {"two.txt", "two\n"}, {"shared.txt", "four\n"}} {
		if got, err := os.ReadFile(filepath.Join(sb.repo, f.name)); err != nil || string(got) != f.content {
			t.Errorf("%s = %q (%v), want %q", f.name, got, err, f.content)
		}
	}
	gitOut := func(args ...string) string { return gitIn(t, sb.repo, env, args...) }
	if st := gitOut("status", "--porcelain"); st != "" {
		t.Errorf("work tree not clean: %q", st)
	}
	// No worktree, run branch, git lock file or worktrees folder entry
	// is left; task 4's first try stays on its kept branch.
	if left := testgit.WorktreeLeftovers(t, sb.repo, state); len(left) > 0 {
		t.Errorf("left behind: %q", left)
	}
	// The run's worktree, and its branch, stay for the next run.
	branches := slices.DeleteFunc(strings.Fields(gitOut("for-each-ref", "--format=%(refname:short)", "refs/heads/")),
		func(b string) bool { return strings.HasPrefix(b, "peal-") && strings.HasSuffix(b, "/home") })
	kept := slices.DeleteFunc(slices.Clone(branches), func(b string) bool { return !strings.HasPrefix(b, "peal-kept/task-4-") })
	if len(branches) != 2 || len(kept) != 1 {
		t.Errorf("branches %q, want the work tree's and task 4's kept one", branches)
	}
	var sum struct {
		Completed []int `json:"tasks_completed"`
		Parallel  []struct {
			Task     int      `json:"task"`
			Merged   bool     `json:"merged"`
			Conflict []string `json:"conflict_files"`
		} `json:"parallel_tasks"`
	}
	data, _ := os.ReadFile(filepath.Join(state, "run_summary.json"))
	if err := json.Unmarshal(data, &sum); err != nil || !reflect.DeepEqual(sum.Completed, []int{1, 2, 3, 4}) || len(sum.Parallel) != 4 ||
		!sum.Parallel[0].Merged || !sum.Parallel[1].Merged || !sum.Parallel[2].Merged || sum.Parallel[3].Merged ||
		!reflect.DeepEqual(sum.Parallel[3].Conflict, []string{"shared.txt"}) {
		t.Errorf("run summary %s", data)
	}
	// Each execute of the block told the model where the CLI works: the
	// task's worktree; the retry of task 4 worked in the run's tree (the
	// work tree, or the run's worktree where files are confined).
	tree := runTree(sb, state)
	for n := 1; n <= 4; n++ {
		var where []string
		for _, req := range modelRequests(srv) {
			// Side requests (a title) offer no tool; some CLIs send the
			// first turn twice.
			if len(req.Tools) > 0 && req.ToolResults == 0 && strings.Contains(req.UserText, fmt.Sprintf("PLAN-%d:", n)) {
				switch {
				case strings.Contains(string(req.Body), filepath.Join(state, "worktrees", fmt.Sprintf("task-%d", n))):
					where = append(where, "worktree")
				case strings.Contains(string(req.Body), tree):
					where = append(where, "run's tree")
				default:
					where = append(where, "?")
				}
			}
		}
		where = slices.Compact(where)
		want := []string{"worktree"}
		if n == 4 {
			want = []string{"worktree", "run's tree"}
		}
		if !reflect.DeepEqual(where, want) {
			t.Errorf("task %d's executes worked in %q, want %q", n, where, want)
		}
	}
	if fb != nil {
		// Which CLI did each task's writing: the protocol of the first
		// turns of its executes that the model answered.
		refused := 0
		for _, req := range modelRequests(srv) {
			if req.Status == http.StatusBadRequest {
				refused++
			}
		}
		t.Logf("requests of %s refused: %d", a.kind, refused)
		for n := 1; n <= 4; n++ {
			var by []mockllm.Protocol
			for _, req := range modelRequests(srv) {
				if len(req.Tools) > 0 && req.ToolResults == 0 && req.Status == http.StatusOK && strings.Contains(req.UserText, fmt.Sprintf("PLAN-%d:", n)) {
					by = append(by, req.Protocol)
				}
			}
			want := a.protocol
			if slices.Contains(refusedTasks, n) {
				want = fb.protocol
			}
			if by = slices.Compact(by); !reflect.DeepEqual(by, []mockllm.Protocol{want}) {
				t.Errorf("task %d's executes answered on %q, want %q only", n, by, want)
			}
		}
	}
	if withStet {
		reportStet(t, stetCalls, state, len(blockFiles))
	}
}

// runTree is where a run's tasks work outside a parallel block: the work
// tree, or, where the kernel confines files (confine = auto), the run's
// worktree in the state folder.
func runTree(sb *sandbox, state string) string {
	if confine.Probe().Files {
		return filepath.Join(state, "worktrees", "home")
	}
	return sb.repo
}

// withRecordedStet, when PEAL_STET_BIN names a stet, puts it on the PATH of
// env behind a wrapper that notes when each command of each task starts and
// ends, in which folder and with which state folder (in a file of root it
// returns; "" without stet), and points it at the review model.
func withRecordedStet(t *testing.T, root string, env []string) ([]string, string) {
	if os.Getenv("PEAL_STET_BIN") == "" {
		return env, ""
	}
	calls, stetDir := filepath.Join(root, "stet-calls"), filepath.Join(root, "stet-bin")
	os.MkdirAll(stetDir, 0o755)
	if err := os.WriteFile(filepath.Join(stetDir, "stet"), []byte(fakes.StetRecorder(os.Getenv("PEAL_STET_BIN"), calls)), 0o755); err != nil {
		t.Fatal(err)
	}
	env = append(slices.Clone(env), "STET_PROVIDER=openai", "STET_OPENAI_BASE_URL="+reviewModel(t)+"/v1", "STET_MODEL=mock-model")
	for i, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			env[i] = "PATH=" + stetDir + string(os.PathListSeparator) + strings.TrimPrefix(kv, "PATH=")
		}
	}
	return env, calls
}

// gitIn runs git in dir with env and returns its output, trimmed.
func gitIn(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	out, err := gitrepo.Plain(dir, env...).Command(args...).Run(context.Background())
	if err != nil {
		t.Fatalf("%v", err)
	}
	return strings.TrimSpace(out)
}

// reportStet reads the notes of the stet wrapper: each of the tasks' commands
// ran in its worktree with its own state folder; it reports how many
// commands of different tasks ran at the same time.
func reportStet(t *testing.T, calls, state string, tasks int) {
	t.Helper()
	spans, err := fakes.ReadStetSpans(calls)
	if err != nil {
		t.Fatal(err)
	}
	perTask := map[string][]string{}
	for _, sp := range spans {
		perTask[sp.Task] = append(perTask[sp.Task], sp.Cmd)
		wt := filepath.Join(state, "worktrees", "task-"+sp.Task)
		wantState, wantDir := filepath.Join(wt+".review", "stet"), wt
		if sp.Task == "4" && len(perTask["4"]) > 4 { // task 4's retry, alone in the run's tree
			wantState, wantDir = filepath.Join(state, "review", "stet"), sp.Dir
			if home := filepath.Join(state, "worktrees", "home"); confine.Probe().Files {
				// The run's worktree reviews with the run's review folder.
				wantDir = home
			}
		}
		if sp.State != wantState || sp.Dir != wantDir {
			t.Errorf("stet %s of task %s ran with state %s in %s", sp.Cmd, sp.Task, sp.State, sp.Dir)
		}
	}
	t.Logf("stet commands per task: %v; overlapping pairs of different tasks' commands: %v", perTask, fakes.OverlappingPairs(spans))
	for n := 1; n <= tasks; n++ {
		task := fmt.Sprint(n)
		if cmds := strings.Join(perTask[task], " "); !strings.HasPrefix(cmds, "start") || !strings.HasSuffix(cmds, "finish") {
			t.Errorf("task %s's stet commands %q", task, cmds)
		}
	}
}
