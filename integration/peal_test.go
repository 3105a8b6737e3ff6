package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"peal/confine"
	"peal/internal/testkit/mockllm"
	"peal/internal/testkit/testbin"
	"peal/state"
)

var (
	binDir string // TestMain's folder for built programs

	pealOnce sync.Once
	pealPath string
	pealErr  error
	pealHelp string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "peal-integration-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// pealBin builds ./cmd/peal once (only when a test gets this far, so runs
// without any agent CLI build nothing), or takes the peal named by PEAL_BIN,
// and skips the test when that peal does not know agent kinds.
func pealBin(t *testing.T) string {
	t.Helper()
	pealOnce.Do(func() {
		if pealPath = os.Getenv("PEAL_BIN"); pealPath == "" {
			var bins map[string]string
			bins, pealErr = testbin.Build(binDir, "peal/cmd/peal")
			if pealErr != nil {
				return
			}
			pealPath = bins["peal"]
		}
		r := run(t, binDir, []string{"PATH=" + os.Getenv("PATH")}, nil, time.Minute, pealPath, "run", "--help")
		pealHelp = r.stdout + r.stderr
	})
	if pealErr != nil {
		t.Fatal(pealErr)
	}
	if !strings.Contains(pealHelp, "--agent-kind") {
		t.Skip("this peal has no --agent-kind option yet: nothing to test against the real CLIs")
	}
	return pealPath
}

// pealRun is one peal run against one real CLI and a mock.
type pealRun struct {
	agent
	bin, peal   string
	sb          *sandbox
	srv         *mockllm.Server
	plan, state string
	logs        string
	env         []string
	result      result
}

// startPeal prepares a plan of one task, a sandbox and a mock, and the CLI's
// configuration (with key, retries as the CLI has them by default). url,
// when not empty, replaces the mock's address. The mock takes the key only
// from peal's model endpoint (pealMock), unless opts say otherwise (a run
// with confine = off).
func startPeal(t *testing.T, a agent, script func(repo string) mockllm.Script, key, url string, opts ...mockllm.Option) *pealRun {
	t.Helper()
	bin := findCLI(t, a.kind)
	peal := pealBin(t)
	sb := newSandbox(t, filepath.Dir(bin))
	root := filepath.Dir(sb.repo)
	// The script names the repository's files; the mock model moves them to
	// the folder the CLI says it works in (the run's worktree, where files
	// are confined), as a real model would.
	sc := script(sb.repo)
	sc.Repo, sc.Workdir = sb.repo, taskFolder(filepath.Join(root, "state"))
	var srv *mockllm.Server
	if opts == nil {
		srv = pealMock(sc)
	} else {
		srv = mockllm.New(sc, opts...)
	}
	t.Cleanup(srv.Close)
	if url == "" {
		url = srv.URL
	}
	p := &pealRun{agent: a, bin: bin, peal: peal, sb: sb, srv: srv,
		plan: filepath.Join(root, "plan.md"), state: filepath.Join(root, "state"), logs: filepath.Join(root, "agent-logs")}
	writeFile(t, p.plan, "# Plan\n\n## Task 1\n\nCreate hello.txt with a greeting.\n")
	p.env = a.pealEnv(t, sb, url, key)
	return p
}

// run runs peal; the agent's environment is peal's.
func (p *pealRun) run(t *testing.T, limit time.Duration, extra ...string) result {
	t.Helper()
	argv := append([]string{p.peal, "run",
		"--plan", p.plan, "--repo", p.sb.repo, "--state-dir", p.state,
		"--agent-kind", p.kind, "--agent-cmd", p.bin,
		"--agent-log-dir", p.logs}, extra...)
	p.result = run(t, p.sb.repo, p.env, nil, limit, argv...)
	return p.result
}

var attemptLog = regexp.MustCompile(`-task-(\d+)-(\w+)-call-\d+-attempt-(\d+)\.stdout\.log$`)

// attempts counts the agent attempts of each phase from agent_log_dir, where
// peal writes one pair of files per attempt.
func (p *pealRun) attempts(t *testing.T) map[string]int {
	t.Helper()
	entries, err := os.ReadDir(p.logs)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range entries {
		if m := attemptLog.FindStringSubmatch(e.Name()); m != nil {
			out[m[2]]++
		}
	}
	return out
}

func (p *pealRun) completed(t *testing.T) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(p.state, "state.json"))
	if err != nil {
		return nil
	}
	var st struct {
		Completed []int `json:"completed_task_indices"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("state.json: %v\n%s", err, b)
	}
	return st.Completed
}

func (p *pealRun) String() string {
	return fmt.Sprintf("%s\nmock requests:\n%s", p.result, describe(p.srv))
}

// TestPealTask: peal runs a plan of one task through each real CLI: the
// plan call's answer becomes the execute prompt, the execute call writes the
// file, the task is recorded as completed, exit 0.
func TestPealTask(t *testing.T) {
	t.Parallel()
	eachAgent(t, func(t *testing.T, a agent) {
		p := startPeal(t, a, taskScript, testKey, "")
		r := p.run(t, 10*time.Minute)
		got, err := os.ReadFile(filepath.Join(p.sb.repo, "hello.txt"))
		if r.code != 0 || err != nil || string(got) != fileContent {
			t.Fatalf("want exit 0 and hello.txt = %q; got %q (%v)\n%s", fileContent, got, err, p)
		}
		if c := p.completed(t); !reflect.DeepEqual(c, []int{1}) {
			t.Errorf("completed tasks = %v, want [1]", c)
		}
		if n := p.attempts(t); !reflect.DeepEqual(n, map[string]int{"plan": 1, "execute": 1}) {
			t.Errorf("attempts = %v, want one plan and one execute call", n)
		}
		var planAsked, planPassedOn, toolResult bool
		for _, req := range modelRequests(p.srv) {
			planAsked = planAsked || strings.Contains(req.UserText, "Create hello.txt with a greeting.")
			planPassedOn = planPassedOn || (strings.Contains(req.UserText, execMarker) && strings.Contains(req.UserText, planText))
			toolResult = toolResult || (req.ToolResults > 0 && strings.Contains(req.UserText, execMarker))
		}
		if !planAsked || !planPassedOn || !toolResult {
			t.Errorf("plan prompt seen %v, plan text in the execute prompt %v, tool result returned %v\n%s", planAsked, planPassedOn, toolResult, p)
		}
		p.keyHeld(t)
	})
}

// keyHeld checks that peal's model endpoint held the run's key: the start
// line says so, every model request reached the mock with the key through
// peal (never a placeholder), and the run record counts the requests, their
// bytes and the tokens of their answers.
func (p *pealRun) keyHeld(t *testing.T) {
	t.Helper()
	if !strings.Contains(p.result.stderr, p.kind+"'s model key (") || !strings.Contains(p.result.stderr, "held by peal's endpoint") {
		t.Errorf("the start line does not say that peal holds %s's key\n%s", p.kind, p.result.stderr)
	}
	reqs := modelRequests(p.srv)
	for i, r := range reqs {
		if r.Key != testKey || !strings.Contains(r.Via, "peal") || confine.IsPlaceholder(r.Key) {
			t.Errorf("model request %d reached the mock with key %q via %q", i+1, r.Key, r.Via)
		}
	}
	events, _, err := state.ReadRecord(filepath.Join(p.state, state.RecordName))
	if err != nil {
		t.Fatal(err)
	}
	var u state.Usage
	for _, ev := range events {
		if ev.Ev == state.EvUsage && ev.Usage != nil {
			u.Requests += ev.Usage.Requests
			u.BytesSent += ev.Usage.BytesSent
			u.BytesReceived += ev.Usage.BytesReceived
			u.InputTokens += ev.Usage.InputTokens
			u.OutputTokens += ev.Usage.OutputTokens
		}
	}
	// The endpoint also counts what it forwards that the mock does not
	// record (Claude Code's HEAD / before its first request).
	if int(u.Requests) < len(reqs) || len(reqs) == 0 || u.BytesSent == 0 || u.BytesReceived == 0 || u.InputTokens == 0 || u.OutputTokens == 0 {
		t.Errorf("the record counts %+v for %d model requests", u, len(reqs))
	}
	t.Logf("%s through peal's model endpoint: %d requests (%d reached the mock), %d bytes sent, %d received, %d input and %d output tokens",
		p.kind, u.Requests, len(reqs), u.BytesSent, u.BytesReceived, u.InputTokens, u.OutputTokens)
}

// fatal runs peal with retries allowed and checks that the failure was
// classified as fatal: at most one plan attempt (none when peal finds out
// before calling the CLI), no execute call, exit 1, and peal's error quoting
// one of the lines that explain the failure.
func fatal(t *testing.T, p *pealRun, explain []string, extra ...string) {
	t.Helper()
	r := p.run(t, 10*time.Minute, append([]string{"--phase-retry-count", "2"}, extra...)...)
	if r.code != 1 {
		t.Fatalf("want exit 1\n%s", p)
	}
	n := p.attempts(t)
	if n["plan"] > 1 || len(n) > 1 || (len(n) == 1 && n["plan"] != 1) {
		t.Errorf("attempts = %v, want at most one plan attempt: the failure is fatal, not retried\n%s", n, p)
	}
	var quoted bool
	for _, line := range strings.Split(r.stderr, "\n") {
		if !strings.HasPrefix(line, "peal: error:") {
			continue
		}
		for _, e := range explain {
			quoted = quoted || strings.Contains(line, e)
		}
		t.Log(line)
	}
	if !quoted {
		t.Errorf("peal's error line quotes none of %q\n%s", explain, p)
	}
	if c := p.completed(t); len(c) != 0 {
		t.Errorf("completed tasks = %v, want none", c)
	}
	if _, err := os.Stat(filepath.Join(p.sb.repo, "hello.txt")); !os.IsNotExist(err) {
		t.Errorf("hello.txt exists after a failed plan call")
	}
}

// The lines that explain each failure, per CLI: the CLI's own (as measured
// in TestCLIFailures) or the variable that peal's check before the first
// call names.
var noCredentials = map[string][]string{
	"claude":   {"Not logged in", "ANTHROPIC_API_KEY"},
	"codex":    {"Missing environment variable: `OPENAI_API_KEY`", "OPENAI_API_KEY"},
	"gemini":   {"Please set an Auth method", "GEMINI_API_KEY"},
	"opencode": {"Incorrect API key provided"},
}

var invalidKey = map[string][]string{
	"claude":   {"Invalid API key"},
	"codex":    {"401 Unauthorized"},
	"gemini":   {"API key not valid"},
	"opencode": {"Incorrect API key provided"},
}

// TestPealNoCredentials: a CLI without credentials fails the run after one
// attempt, even with retries allowed.
func TestPealNoCredentials(t *testing.T) {
	t.Parallel()
	eachAgent(t, func(t *testing.T, a agent) {
		p := startPeal(t, a, taskScript, "", "")
		fatal(t, p, noCredentials[a.kind])
	})
}

// TestPealInvalidKey: an API that answers 401 fails the run after one
// attempt, even with retries allowed.
func TestPealInvalidKey(t *testing.T) {
	t.Parallel()
	eachAgent(t, func(t *testing.T, a agent) {
		p := startPeal(t, a, taskScript, "sk-wrong", "")
		fatal(t, p, invalidKey[a.kind])
	})
}

// The lines that explain a 401 and a 403 of the model API, per CLI, as
// measured in TestCLIFailures.
var unauthorized = map[string][]string{
	"claude":   {"Invalid API key"},
	"codex":    {"401 Unauthorized"},
	"gemini":   {`"code":401`, "UNAUTHENTICATED"},
	"opencode": {"Incorrect API key provided"},
}

var forbidden = map[string][]string{
	"claude":   {"API Error: 403"},
	"codex":    {"403 Forbidden"},
	"gemini":   {`"code":403`, "PERMISSION_DENIED"},
	"opencode": {"Error: Forbidden"},
}

// TestPeal401: an API that answers every request 401 (Google's
// UNAUTHENTICATED, Anthropic's invalid x-api-key...) fails the run after one
// attempt, even with retries allowed. (Named by the status: a folder named
// after the test must not hold a word that peal looks for.)
func TestPeal401(t *testing.T) {
	t.Parallel()
	eachAgent(t, func(t *testing.T, a agent) {
		p := startPeal(t, a, always(mockllm.Failure{Status: 401}), testKey, "")
		fatal(t, p, unauthorized[a.kind])
	})
}

// TestPeal403: the same with 403.
func TestPeal403(t *testing.T) {
	t.Parallel()
	eachAgent(t, func(t *testing.T, a agent) {
		p := startPeal(t, a, always(mockllm.Failure{Status: 403}), testKey, "")
		fatal(t, p, forbidden[a.kind])
	})
}

// The CLIs' own words for a model the API does not know (404, each
// provider's not-found body), as measured in TestCLIFailures.
var modelNotFound = map[string]string{
	"claude":   "There's an issue with the selected model (mock-missing-model). It may not exist or you may not have access to it. Run --model to pick a different model.",
	"codex":    "ERROR: " + missingModelMessage,
	"gemini":   "ModelNotFoundError: " + missingModelMessage,
	"opencode": "Error: " + missingModelMessage,
}

// missingModel is the model name peal passes to each CLI: opencode's is
// provider/model, and its configuration lists it (see agents).
func missingModel(kind string) string {
	if kind == "opencode" {
		return "mock/mock-missing-model"
	}
	return "mock-missing-model"
}

// TestPealModelNotFound: an API that does not know the model fails the run
// after one attempt, even with retries allowed, and peal's one line names
// the model and the setting that chose it and quotes the CLI's own words
// (gemini's message, not its "code: 404").
func TestPealModelNotFound(t *testing.T) {
	t.Parallel()
	eachAgent(t, func(t *testing.T, a agent) {
		p := startPeal(t, a, always(mockllm.Failure{Status: 404, Message: missingModelMessage}), testKey, "")
		fatal(t, p, []string{modelNotFound[a.kind]}, "--model", missingModel(a.kind))
		want := fmt.Sprintf("the model %q (set by --model) is not one the %s CLI's API knows: set model to a model it serves; %s says: ",
			missingModel(a.kind), a.kind, a.kind)
		if !strings.Contains(p.result.stderr, want) || strings.Contains(p.result.stderr, "code: 404") {
			t.Errorf("peal's line does not name the model and its setting (%q)\n%s", want, p)
		}
		t.Logf("%s: exit %d after %s", a.kind, p.result.code, p.result.elapsed.Round(100*time.Millisecond))
	})
}

// TestPealModelNotFoundFallback: claude's model does not exist (its API
// answers 404); the codex fallback asks for another model, which works:
// the fallback takes over at once, with no retry allowed, and the run
// completes the task through it.
func TestPealModelNotFoundFallback(t *testing.T) {
	t.Parallel()
	p, r, anthropic := fallbackTakesOver(t, "claude", "codex", mockllm.Failure{Status: 404, Message: missingModelMessage},
		"--model", "mock-missing-model", "--fallback-model", "mock-model")
	if !strings.Contains(r.stderr, `the model \"mock-missing-model\" (set by --model) is not one the claude CLI's API knows`) {
		t.Errorf("the log does not say why the fallback took over\n%s", p)
	}
	t.Logf("exit %d after %s; %d requests to claude's API", r.code, r.elapsed.Round(100*time.Millisecond), anthropic)
}

// fallbackTakesOver runs one task with no retry allowed, the primary
// kind's API refusing its first request with fail, the fallback kind's
// working: the fallback must take over at once and write the task's file,
// after two plan attempts (the primary's, the fallback's) and one execute.
// It returns the run, its result and how many requests the primary made.
func fallbackTakesOver(t *testing.T, primaryKind, fallbackKind string, fail mockllm.Failure, args ...string) (*pealRun, result, int) {
	t.Helper()
	primary, fallback := agentOf(t, primaryKind), agentOf(t, fallbackKind)
	fbBin := findCLI(t, fallback.kind)
	p := startPeal(t, primary, func(repo string) mockllm.Script {
		s := taskScript(repo)
		s.Rules = append([]mockllm.Rule{{Protocol: primary.protocol, Replies: []mockllm.Reply{{Fail: &fail}}}}, s.Rules...)
		return s
	}, testKey, "")
	p.env = append(p.env, fallback.configEnv(t, p.sb.home, p.srv.URL, testKey)...)
	r := p.run(t, 10*time.Minute, append([]string{"--phase-retry-count", "0", "--fallback-agent-kind", fallback.kind, "--fallback-agent-cmd", fbBin}, args...)...)
	got, err := os.ReadFile(filepath.Join(p.sb.repo, "hello.txt"))
	if r.code != 0 || err != nil || string(got) != fileContent {
		t.Fatalf("want exit 0 and hello.txt written by the fallback; got %q (%v)\n%s", got, err, p)
	}
	if n := p.attempts(t); !reflect.DeepEqual(n, map[string]int{"plan": 2, "execute": 1}) {
		t.Errorf("attempts = %v, want two plan attempts (%s, then %s) and one execute (%s)\n%s", n, primary.kind, fallback.kind, fallback.kind, p)
	}
	requests := 0
	for _, req := range modelRequests(p.srv) {
		if req.Protocol == primary.protocol {
			requests++
		}
	}
	return p, r, requests
}

// TestPealConnectionRefused: with the API unreachable, peal stops with exit
// 4 after its network retries (1 + network_retry_count attempts, fewer when
// network_give_up_sec comes first), at default settings, within 3 minutes,
// even for a CLI that never gives up by itself (codex) or retries silently
// for a minute (opencode).
func TestPealConnectionRefused(t *testing.T) {
	t.Parallel()
	const within = 3 * time.Minute
	if d, ok := t.Deadline(); ok && time.Until(d) < within+5*time.Minute {
		t.Skipf("waits out peal's default network retries: run with -timeout 30m (%s left)", time.Until(d).Round(time.Second))
	}
	eachAgent(t, func(t *testing.T, a agent) {
		p := startPeal(t, a, taskScript, testKey, closedURL(t))
		r := p.run(t, within+3*time.Minute)
		if r.code != 4 {
			t.Fatalf("want exit 4\n%s", p)
		}
		if r.elapsed > within {
			t.Errorf("exit 4 came after %s, want within %s\n%s", r.elapsed.Round(time.Second), within, p)
		}
		if n := p.attempts(t); len(n) != 1 || n["plan"] < 2 || n["plan"] > 3 {
			t.Errorf("attempts = %v, want 2 or 3 plan attempts (1 + network_retry_count 2, cut by network_give_up_sec)", n)
		}
		if n := len(modelRequests(p.srv)); n != 0 {
			t.Errorf("%d requests reached the mock that is not configured", n)
		}
		t.Logf("%s: exit 4 after %s, attempts %v", a.kind, r.elapsed.Round(time.Second), p.attempts(t))
	})
}

// TestPealRateLimit: the first requests are refused with 429 and a short
// Retry-After; whether the CLI waits by itself or peal waits for it, the task
// completes at default settings, where an ordinary failure would have ended
// it (phase_retry_count is 0).
func TestPealRateLimit(t *testing.T) {
	t.Parallel()
	eachAgent(t, func(t *testing.T, a agent) {
		limited := func(repo string) mockllm.Script {
			s := taskScript(repo)
			rl := mockllm.Reply{Fail: &mockllm.Failure{Status: 429, RetryAfter: "2"}}
			s.First = []mockllm.Reply{rl, rl}
			return s
		}
		p := startPeal(t, a, limited, testKey, "")
		r := p.run(t, 10*time.Minute)
		got, err := os.ReadFile(filepath.Join(p.sb.repo, "hello.txt"))
		if r.code != 0 || err != nil || string(got) != fileContent {
			t.Fatalf("want exit 0 and hello.txt = %q; got %q (%v)\n%s", fileContent, got, err, p)
		}
		var limitedN int
		for _, req := range modelRequests(p.srv) {
			if req.Status == 429 {
				limitedN++
			}
		}
		if limitedN != 2 {
			t.Errorf("%d requests were answered 429, want 2\n%s", limitedN, p)
		}
		t.Logf("%s: %v attempts, %s", a.kind, p.attempts(t), r.elapsed.Round(time.Second))
	})
}
