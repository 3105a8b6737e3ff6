package integration

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"peal/internal/testkit/mockllm"
)

// The scripted task: a plan prompt (fenced like peal's) is answered with
// planText; an execute prompt makes the model write hello.txt, then say
// doneText.
const (
	planMarker  = "---TASK---"
	execMarker  = "---PLAN---"
	planText    = "PLAN: create hello.txt holding the greeting."
	fileContent = "hello from the mock model\n"
	doneText    = "DONE: hello.txt is written."
)

func taskScript(repo string) mockllm.Script {
	return mockllm.PlanExecute(planMarker, planText, execMarker, filepath.Join(repo, "hello.txt"), fileContent, doneText)
}

const planPrompt = "Write an implementation plan for the task between the fence lines. Reply with the plan only.\n\n" +
	planMarker + "\nCreate hello.txt with a greeting.\n" + planMarker

const execPrompt = "Carry out the plan between the fence lines.\n\n" + execMarker + "\n" + planText + "\n" + execMarker

// direct is one CLI, set up in a sandbox against a mock, ready to run.
type direct struct {
	agent
	bin string
	sb  *sandbox
	srv *mockllm.Server
	env []string
}

// startDirect finds the CLI (or skips), makes a sandbox and a mock with the
// script for its repository, and configures the CLI for it with key and its
// retries off. url, when not empty, replaces the mock's address in the
// configuration.
func startDirect(t *testing.T, a agent, script func(repo string) mockllm.Script, key, url string) *direct {
	t.Helper()
	bin := findCLI(t, a.kind)
	sb := newSandbox(t, filepath.Dir(bin))
	srv := mockllm.New(script(sb.repo), mockllm.WithKey(testKey))
	t.Cleanup(srv.Close)
	if url == "" {
		url = srv.URL
	}
	env := append(append([]string(nil), sb.base...), a.setup(t, sb.home, url, key, true)...)
	return &direct{agent: a, bin: bin, sb: sb, srv: srv, env: env}
}

func (d *direct) run(t *testing.T, args []string, prompt string, limit time.Duration) result {
	t.Helper()
	return run(t, d.sb.repo, d.env, &prompt, limit, append([]string{d.bin}, args...)...)
}

// TestCLIPlan: each CLI, in its read-only mode with the prompt on stdin,
// prints the model's plan on stdout and exits 0.
func TestCLIPlan(t *testing.T) {
	t.Parallel()
	eachAgent(t, func(t *testing.T, a agent) {
		d := startDirect(t, a, taskScript, testKey, "")
		r := d.run(t, d.plan, planPrompt, 3*time.Minute)
		if r.code != 0 || !strings.Contains(r.stdout, planText) {
			t.Fatalf("plan call: want exit 0 and the plan on stdout\n%s\nrequests:\n%s", r, describe(d.srv))
		}
		var sawPrompt bool
		for _, req := range modelRequests(d.srv) {
			if req.Key != testKey {
				t.Errorf("a request carried key %q, want the configured one", req.Key)
			}
			sawPrompt = sawPrompt || strings.Contains(req.UserText, "Create hello.txt with a greeting.")
		}
		if !sawPrompt {
			t.Errorf("no request carried the prompt given on stdin\n%s", describe(d.srv))
		}
	})
}

// TestCLIExecute: each CLI, in its writing mode, runs the model's tool call
// and the file appears in the repository with the content the model gave.
func TestCLIExecute(t *testing.T) {
	t.Parallel()
	eachAgent(t, func(t *testing.T, a agent) {
		d := startDirect(t, a, taskScript, testKey, "")
		r := d.run(t, d.execute, execPrompt, 3*time.Minute)
		got, err := os.ReadFile(filepath.Join(d.sb.repo, "hello.txt"))
		if r.code != 0 || err != nil || string(got) != fileContent {
			t.Fatalf("execute call: want exit 0 and hello.txt = %q; got %q (%v)\n%s\nrequests:\n%s", fileContent, got, err, r, describe(d.srv))
		}
		if !strings.Contains(r.stdout, doneText) {
			t.Errorf("the final answer is not on stdout\n%s", r)
		}
		var calls, results int
		for _, req := range modelRequests(d.srv) {
			if req.Call != nil {
				calls++
			}
			if req.ToolResults > 0 {
				results++
			}
		}
		if calls != 1 || results == 0 {
			t.Errorf("want one tool call and a request carrying its result; got %d calls, %d requests with results\n%s", calls, results, describe(d.srv))
		}
	})
}

// TestCLIPlanModeCannotWrite: the read-only argv really is read-only: asked
// to write, the CLI is refused by its own permission layer (and still exits
// 0).
func TestCLIPlanModeCannotWrite(t *testing.T) {
	t.Parallel()
	eachAgent(t, func(t *testing.T, a agent) {
		d := startDirect(t, a, taskScript, testKey, "")
		r := d.run(t, d.plan, execPrompt, 3*time.Minute)
		if _, err := os.Stat(filepath.Join(d.sb.repo, "hello.txt")); !os.IsNotExist(err) {
			t.Fatalf("the read-only argv let the model write hello.txt (%v)\n%s\nrequests:\n%s", err, r, describe(d.srv))
		}
		if r.code != 0 {
			t.Errorf("a refused tool call ended the CLI with exit %d, want 0\n%s", r.code, r)
		}
		// The model asked only if the CLI offered a tool for it (the
		// Gemini CLI does not offer write_file in plan mode); when it
		// asked, the result it got back is a refusal.
		for _, req := range modelRequests(d.srv) {
			if req.ToolResults > 0 && strings.Contains(strings.ToLower(req.LastToolResult), "success") {
				t.Errorf("the tool result reads like a success: %q", req.LastToolResult)
			}
		}
	})
}

// failureCase is one measured failure of one CLI: the exit code and the
// line it prints, and on which stream.
type failureCase struct {
	code   int
	stdout bool // the message is on stdout (else stderr)
	text   string
	// requests is the number of model requests made, -1 for "some".
	requests int
}

// TestCLIFailures pins down how each CLI reports a failure, its own retries
// turned off: exit code, stream and text are what peal classifies.
func TestCLIFailures(t *testing.T) {
	t.Parallel()
	type scenario struct {
		name   string
		script func(repo string) mockllm.Script
		key    string
		closed bool // point the CLI at a closed port
		limit  time.Duration
		want   map[string]failureCase
	}
	scenarios := []scenario{
		{
			name: "no credentials", script: taskScript, key: "", limit: 3 * time.Minute,
			want: map[string]failureCase{
				"claude": {code: 1, stdout: true, text: "Not logged in · Please run /login", requests: 0},
				"codex":  {code: 1, text: "Missing environment variable: `OPENAI_API_KEY`", requests: 0},
				"gemini": {code: 41, text: "Please set an Auth method", requests: 0},
				// opencode has no check of its own: the request goes out
				// without a key and the API's 401 comes back.
				"opencode": {code: 1, text: "Incorrect API key provided", requests: -1},
			},
		},
		{
			name: "invalid key", script: taskScript, key: "sk-wrong", limit: 3 * time.Minute,
			want: map[string]failureCase{
				"claude":   {code: 1, stdout: true, text: "Invalid API key · Fix external API key", requests: 1},
				"codex":    {code: 1, text: "unexpected status 401 Unauthorized", requests: 1},
				"gemini":   {code: 1, text: "API key not valid. Please pass a valid API key.", requests: -1},
				"opencode": {code: 1, text: "Incorrect API key provided", requests: -1},
			},
		},
		{
			// The key is accepted by the CLI but the API answers 401 with its
			// own message (Google's: UNAUTHENTICATED).
			name: "401", script: always(mockllm.Failure{Status: 401}), key: testKey, limit: 3 * time.Minute,
			want: map[string]failureCase{
				"claude":   {code: 1, stdout: true, text: "Invalid API key · Fix external API key", requests: 1},
				"codex":    {code: 1, text: "unexpected status 401 Unauthorized: Incorrect API key provided", requests: 1},
				"gemini":   {code: 1, text: `"code":401,"message":"Request had invalid authentication credentials.`, requests: 1},
				"opencode": {code: 1, text: "Incorrect API key provided", requests: -1},
			},
		},
		{
			// The message the Gemini CLI printed in the field, against an API
			// answering 401 with Anthropic's words.
			name: "401, x-api-key", script: always(mockllm.Failure{Status: 401, Message: "invalid x-api-key"}), key: testKey, limit: 3 * time.Minute,
			want: map[string]failureCase{
				"gemini": {code: 1, text: `_ApiError: {"error":{"code":401,"message":"invalid x-api-key","status":"UNAUTHENTICATED"}}`, requests: 1},
			},
		},
		{
			name: "403", script: always(mockllm.Failure{Status: 403}), key: testKey, limit: 5 * time.Minute,
			want: map[string]failureCase{
				"claude":   {code: 1, stdout: true, text: "Failed to authenticate. API Error: 403 Your API key does not have permission to use the specified resource.", requests: 1},
				"codex":    {code: 1, text: "unexpected status 403 Forbidden: Forbidden", requests: 1},
				"gemini":   {code: 1, text: `{"error":{"code":403,"message":"Permission denied on resource.","status":"PERMISSION_DENIED"}}`, requests: 1},
				"opencode": {code: 1, text: `Forbidden: {"error":{"code":null,"message":"Forbidden","param":null,"type":"server_error"}}`, requests: -1},
			},
		},
		{
			// A model the API does not know: 404 with each provider's body
			// (Anthropic's not_found_error, OpenAI's model_not_found,
			// Google's NOT_FOUND).
			name: "404 model", script: always(mockllm.Failure{Status: 404, Message: missingModelMessage}), key: testKey, limit: 5 * time.Minute,
			want: map[string]failureCase{
				// Claude Code names the model it asked for (its default here)
				// in words of its own.
				"claude":   {code: 1, stdout: true, text: "). It may not exist or you may not have access to it. Run --model to pick a different model.", requests: -1},
				"codex":    {code: 1, text: "ERROR: " + missingModelMessage, requests: 1},
				"gemini":   {code: 1, text: "ModelNotFoundError: " + missingModelMessage, requests: 1},
				"opencode": {code: 1, text: "Error: \x1b[0m" + missingModelMessage, requests: -1},
			},
		},
		{
			name: "rate limit", script: always(mockllm.Failure{Status: 429, RetryAfter: "1"}), key: testKey, limit: 5 * time.Minute,
			want: map[string]failureCase{
				"claude":   {code: 1, stdout: true, text: "API Error: Request rejected (429)", requests: 1},
				"codex":    {code: 1, text: "exceeded retry limit, last status: 429 Too Many Requests", requests: 1},
				"gemini":   {code: 1, text: "Resource has been exhausted", requests: -1},
				"opencode": {code: 1, text: "Rate limit reached for requests", requests: -1},
			},
		},
		{
			// An account out of credit: Anthropic's credit balance (400),
			// OpenAI's insufficient_quota (429), Google's per-day quota.
			name: "out of credit", script: always(mockllm.Failure{Refusal: mockllm.OutOfCredit}), key: testKey, limit: 5 * time.Minute,
			want: map[string]failureCase{
				"claude":   {code: 1, stdout: true, text: "Credit balance is too low", requests: 1},
				"codex":    {code: 1, text: "ERROR: Quota exceeded. Check your plan and billing details.", requests: 1},
				"gemini":   {code: 1, text: "TerminalQuotaError: You have exhausted your daily quota on this model.", requests: 1},
				"opencode": {code: 1, text: "You exceeded your current quota, please check your plan and billing details.", requests: -1},
			},
		},
		{
			// A prompt over the context window: each provider's 400.
			name: "over context", script: always(mockllm.Failure{Refusal: mockllm.OverContext}), key: testKey, limit: 5 * time.Minute,
			want: map[string]failureCase{
				"claude":   {code: 1, stdout: true, text: "Prompt is too long · the request is ~212345 tokens (limit 200000)", requests: 1},
				"codex":    {code: 1, text: "ERROR: Codex ran out of room in the model's context window.", requests: 1},
				"gemini":   {code: 1, text: `"message":"The input token count (1212345) exceeds the maximum number of tokens allowed (1048576)."`, requests: 1},
				"opencode": {code: 1, text: "This model's maximum context length is 200000 tokens. However, your messages resulted in 212345 tokens.", requests: -1},
			},
		},
		{
			name: "overloaded", script: always(mockllm.Failure{Status: 529}), key: testKey, limit: 5 * time.Minute,
			want: map[string]failureCase{
				"claude":   {code: 1, stdout: true, text: "API Error: 529 Overloaded", requests: 1},
				"codex":    {code: 1, text: "unexpected status 529", requests: 1},
				"gemini":   {code: 1, text: "The model is overloaded", requests: -1},
				"opencode": {code: 1, text: "The server is overloaded", requests: -1},
			},
		},
		{
			name: "connection refused", script: taskScript, key: testKey, closed: true, limit: 5 * time.Minute,
			want: map[string]failureCase{
				"claude":   {code: 1, stdout: true, text: "API Error: Unable to connect to API (ConnectionRefused)", requests: 0},
				"gemini":   {code: 1, text: "fetch failed", requests: 0},
				"opencode": {code: 1, text: "Unable to connect. Is the computer able to access the url?", requests: 0},
				// Codex never gives up: see TestCodexWaitsForNetwork.
			},
		},
	}
	for _, sc := range scenarios {
		for _, a := range agents {
			want, ok := sc.want[a.kind]
			if !ok {
				continue
			}
			t.Run(sc.name+"/"+a.kind, func(t *testing.T) {
				t.Parallel()
				url := ""
				if sc.closed {
					url = closedURL(t)
				}
				d := startDirect(t, a, sc.script, sc.key, url)
				r := d.run(t, d.plan, planPrompt, sc.limit)
				stream, other := r.stderr, "stderr"
				if want.stdout {
					stream, other = r.stdout, "stdout"
				}
				if r.code != want.code || !strings.Contains(stream, want.text) {
					t.Fatalf("want exit %d and %q on %s\n%s\nrequests:\n%s", want.code, want.text, other, r, describe(d.srv))
				}
				n := len(modelRequests(d.srv))
				if (want.requests >= 0 && n != want.requests) || (want.requests < 0 && n == 0) {
					t.Errorf("%d model requests, want %d (-1: some)\n%s", n, want.requests, describe(d.srv))
				}
				t.Logf("%s: exit %d after %s", a.kind, r.code, r.elapsed.Round(time.Millisecond))
			})
		}
	}
}

// TestCodexWaitsForNetwork: with its API unreachable, Codex does not exit;
// it prints "Reconnecting... waiting for network" and tries again, forever.
// The test waits for that line, then stops it.
func TestCodexWaitsForNetwork(t *testing.T) {
	t.Parallel()
	var a agent
	for _, x := range agents {
		if x.kind == "codex" {
			a = x
		}
	}
	d := startDirect(t, a, taskScript, testKey, closedURL(t))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.bin, d.plan...)
	cmd.Dir, cmd.Env = d.sb.repo, d.env
	cmd.Stdin = strings.NewReader(planPrompt)
	setGroup(cmd)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan bool, 1)
	var seen []string
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			seen = append(seen, sc.Text())
			if strings.Contains(sc.Text(), "Reconnecting... waiting for network") {
				found <- true
				_, _ = io.Copy(io.Discard, stderr)
				return
			}
		}
		found <- false
	}()
	ok := <-found
	cancel()
	_ = cmd.Wait()
	if !ok {
		t.Fatalf("codex ended without waiting for the network:\n%s", strings.Join(seen, "\n"))
	}
}

// always is a script that fails every request the same way.
func always(f mockllm.Failure) func(string) mockllm.Script {
	return func(string) mockllm.Script { return mockllm.Always(f) }
}

// closedURL is the address of a port on 127.0.0.1 that nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// missingModelMessage is what the mock says of a model it does not know.
const missingModelMessage = "model: mock-missing-model was not found"
