package agentcall

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"peal/agent"
	"peal/config"
	"peal/confine"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testbin"
	"peal/internal/testkit/testgit"
	"peal/phase"
)

var fakeAgent string

func TestMain(m *testing.M) {
	os.Exit(testbin.Main(m, func(b map[string]string) { fakeAgent = b["fakeagent"] }, "peal/testdata/fakeagent"))
}

// recorder keeps what a call's attempts reported and were refused.
type recorder struct {
	mu       sync.Mutex
	usage    []string
	confined int
}

func (r *recorder) Usage(task int, name phase.Name, call string, u agent.Usage, session, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.usage = append(r.usage, string(name)+" "+session)
}

func (r *recorder) Confined(*confine.Call, string, int, phase.Result, End) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.confined++
	return "", false
}

// bench is one agent call's surroundings: a folder, the fake agent under
// a CLI's name, a configuration read from variables.
type bench struct {
	t        *testing.T
	dir      string
	agentDir string
	rec      *recorder
}

func newBench(t *testing.T) *bench {
	t.Helper()
	dir := t.TempDir()
	b := &bench{t: t, dir: dir, agentDir: filepath.Join(dir, "agent"), rec: &recorder{}}
	os.MkdirAll(b.agentDir, 0o755)
	testgit.Init(t, dir)
	return b
}

// agents are the run's agents under env, and the site of the calls.
func (b *bench) agents(env ...string) (*Agents, Site) {
	b.t.Helper()
	bin := filepath.Join(b.dir, "bin", "claude")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	if _, err := os.Lstat(bin); err != nil {
		os.Symlink(fakeAgent, bin)
	}
	plan := filepath.Join(b.dir, "plan.md")
	os.WriteFile(plan, []byte("## Task 1\nA\n"), 0o644)
	cfg, err := config.Load(config.Inputs{Env: append([]string{"PEAL_PLAN_PATH=" + plan, "PEAL_REPO_PATH=" + b.dir,
		"PEAL_STATE_DIR=" + filepath.Join(b.dir, "state"), "PEAL_AGENT_KIND=claude", "PEAL_AGENT_CMD=" + bin,
		"PEAL_CONFINE=off"}, env...)})
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		b.t.Fatal(err)
	}
	caller := phase.Caller{Dir: b.dir, Limits: phase.Limits{Timeout: 20 * time.Second, KillGrace: time.Second},
		Env: []string{fakes.AgentDirEnv + "=" + b.agentDir, "ANTHROPIC_API_KEY=sk-test"}}
	a := New(Options{Config: cfg, Log: slog.New(slog.DiscardHandler), Env: caller.Env, Recorder: b.rec,
		Sleep: func(context.Context, time.Duration) error { return nil },
		Prober: func(context.Context, *agent.Kind, string, string, []string, func(*phase.Spec)) agent.AuthStatus {
			return agent.AuthStatus{OK: true}
		}})
	return a, Site{Caller: caller}
}

func (b *bench) scenario(rules map[string][]fakes.Outcome) {
	b.t.Helper()
	if err := fakes.WriteScenario(b.agentDir, fakes.Scenario{Rules: rules}); err != nil {
		b.t.Fatal(err)
	}
}

func (b *bench) calls() []fakes.Call {
	b.t.Helper()
	c, err := fakes.ReadCalls(b.agentDir)
	if err != nil {
		b.t.Fatal(err)
	}
	return fakes.Starts(c)
}

// TestCallRetries: one call, without a plan or a run: an attempt that
// fails is tried again, as many times as the call has attempts.
func TestCallRetries(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	b.scenario(map[string][]fakes.Outcome{"execute": {{Exit: 1, Stderr: "broke"}, {Stdout: "done"}}})
	a, at := b.agents()
	res, err := a.Call(context.Background(), at, "execute", 1, 2, nil, "do it")
	if err != nil || strings.TrimSpace(res.Stdout) != "done" {
		t.Fatalf("res %q, err %v", res.Stdout, err)
	}
	if got := fakes.Keys(b.calls()); !slices.Equal(got, []string{"execute:1", "execute:1"}) {
		t.Fatalf("calls %q", got)
	}
	// One call of one attempt fails after it: the failure is the CLI's.
	b.scenario(map[string][]fakes.Outcome{"execute": {{Exit: 1, Stderr: "broke again"}}})
	if _, err := a.Call(context.Background(), at, "execute", 1, 1, nil, "do it"); err == nil || !strings.Contains(err.Error(), "broke again") {
		t.Fatalf("err %v", err)
	}
}

// TestCallUsage: with structured output the answer is the events' text,
// and the call's tokens are the run's and the recorder's.
func TestCallUsage(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	b.scenario(map[string][]fakes.Outcome{"execute": {{Stdout: "done", InputTokens: 10, OutputTokens: 2}}})
	a, at := b.agents("PEAL_STRUCTURED_OUTPUT=true")
	res, err := a.Call(context.Background(), at, "execute", 1, 1, nil, "do it")
	if err != nil || res.Stdout != "done" {
		t.Fatalf("res %q, err %v", res.Stdout, err)
	}
	if u := a.Usage(); u == nil || u.InputTokens != 10 || u.Tasks[1].OutputTokens != 2 || len(b.rec.usage) != 1 {
		t.Fatalf("usage %+v, recorded %q", u, b.rec.usage)
	}
}

// TestCallFallback: with a fallback agent, even attempts use it, with its
// own model.
func TestCallFallback(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	b.scenario(map[string][]fakes.Outcome{"execute": {{Exit: 1, Stderr: "broke"}, {Stdout: "done"}}})
	a, at := b.agents("PEAL_FALLBACK_AGENT_CMD="+filepath.Join(b.dir, "bin", "claude"), "PEAL_FALLBACK_MODEL=other-m", "PEAL_MODEL=base-m")
	if _, err := a.Call(context.Background(), at, "execute", 1, 2, nil, "do it"); err != nil {
		t.Fatal(err)
	}
	var models []string
	for _, c := range b.calls() {
		models = append(models, c.Env["PEAL_AGENT_ROLE"]+" "+c.Argv[slices.Index(c.Argv, "--model")+1])
	}
	if !slices.Equal(models, []string{"primary base-m", "fallback other-m"}) {
		t.Fatalf("attempts %q", models)
	}
}

// TestCallCostLimit: once the run's calls reached max_cost_usd, a call
// does not start.
func TestCallCostLimit(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	b.scenario(map[string][]fakes.Outcome{"execute": {{Stdout: "done", CostUSD: 0.5}}})
	a, at := b.agents("PEAL_MAX_COST_USD=0.4", "PEAL_STRUCTURED_OUTPUT=true")
	if _, err := a.Call(context.Background(), at, "execute", 1, 1, nil, "do it"); err != nil {
		t.Fatal(err)
	}
	_, err := a.Call(context.Background(), at, "execute", 2, 1, nil, "do it")
	var cl *CostLimitError
	if !errors.As(err, &cl) || len(b.calls()) != 1 {
		t.Fatalf("err %v, calls %d", err, len(b.calls()))
	}
}

// keySite is a site whose calls' model endpoint (opened by the test, whose
// requests go to upstream) holds a key: the calls themselves run
// unconfined, their hold's count is what the test sent through.
func keySite(t *testing.T, at Site, upstream string) (Site, *confine.KeyEndpoint, *confine.KeyHold) {
	t.Helper()
	u, _ := url.Parse(upstream)
	routes, _ := confine.ParseRoutes(agent.AnthropicAPI.Routes...)
	hold := &confine.KeyHold{Count: &confine.KeyCount{}, APIs: []confine.HeldAPI{{Name: "anthropic", Upstream: u,
		Keys: map[string]string{"ANTHROPIC_API_KEY": "sk-real"}, Places: agent.AnthropicAPI.Places, Routes: routes, Usage: agent.AnthropicAPI.Usage}}}
	e, err := confine.NewProxy(nil).OpenKeys("c1", hold)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	at.Confine = func(*agent.Kind, []string) *confine.Call { return &confine.Call{Mode: confine.Off, Keys: hold} }
	return at, e, hold
}

// modelRequest sends one model request through e with its placeholder.
func modelRequest(t *testing.T, e *confine.KeyEndpoint) {
	t.Helper()
	env, _ := e.Point()
	req, _ := http.NewRequest("POST", e.URL()+"/v1/messages", strings.NewReader(`{"model":"m"}`))
	req.Header.Set("X-Api-Key", strings.TrimPrefix(env[0], "ANTHROPIC_API_KEY="))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// TestCallUsageThroughEndpoint: an attempt whose model endpoint forwarded
// requests counts them, their bytes and the tokens the API's answers said,
// in place of the CLI's own count of tokens; the cost stays the CLI's.
func TestCallUsageThroughEndpoint(t *testing.T) {
	t.Parallel()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"type":"message","usage":{"input_tokens":300,"cache_read_input_tokens":100,"output_tokens":40}}`)
	}))
	defer api.Close()
	b := newBench(t)
	b.scenario(map[string][]fakes.Outcome{"execute": {{Stdout: "done", InputTokens: 10, OutputTokens: 2, CostUSD: 0.25}}})
	a, at := b.agents("PEAL_STRUCTURED_OUTPUT=true")
	at, e, _ := keySite(t, at, api.URL)
	modelRequest(t, e)
	modelRequest(t, e)
	if _, err := a.Call(context.Background(), at, "execute", 1, 1, nil, "do it"); err != nil {
		t.Fatal(err)
	}
	u := a.Usage()
	if u == nil || u.InputTokens != 800 || u.CachedTokens != 200 || u.OutputTokens != 80 || u.CostUSD != 0.25 || u.Requests != 2 ||
		u.BytesSent != 2*int64(len(`{"model":"m"}`)) || u.BytesReceived == 0 {
		t.Fatalf("usage %+v", u)
	}
}

// TestCallUnreachableThroughEndpoint: an attempt that failed after its
// model endpoint could not reach the API is a network failure, whatever
// the CLI said: it is retried on the network budget, not the call's own.
func TestCallUnreachableThroughEndpoint(t *testing.T) {
	t.Parallel()
	api := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	api.Close()
	b := newBench(t)
	b.scenario(map[string][]fakes.Outcome{"execute": {{Exit: 1, Stderr: "something went wrong"}, {Stdout: "done"}}})
	a, at := b.agents("PEAL_NETWORK_RETRY_DELAY_SEC=0")
	at, e, hold := keySite(t, at, api.URL)
	modelRequest(t, e)
	if hold.Count.Usage().Unreachable != 1 {
		t.Fatalf("count %+v", hold.Count.Usage())
	}
	// One attempt allowed: only a network failure gets another.
	res, err := a.Call(context.Background(), at, "execute", 1, 1, nil, "do it")
	if err != nil || strings.TrimSpace(res.Stdout) != "done" || len(b.calls()) != 2 {
		t.Fatalf("res %q err %v, %d attempts", res.Stdout, err, len(b.calls()))
	}
	// The attempt's error names the cause.
	b.scenario(map[string][]fakes.Outcome{"execute": {{Exit: 1, Stderr: "something went wrong"}}})
	_, err = a.Call(context.Background(), at, "execute", 1, 1, nil, "do it")
	if err == nil || !strings.Contains(err.Error(), "something went wrong; peal's model endpoint could not reach "+strings.TrimPrefix(api.URL, "http://")) {
		t.Fatalf("err %v", err)
	}
}

// TestCallTokenLimit: once the run's tokens reached max_tokens, counted by
// a call's model endpoint without structured output, a call does not
// start.
func TestCallTokenLimit(t *testing.T) {
	t.Parallel()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"type":"message","usage":{"input_tokens":600,"output_tokens":400}}`)
	}))
	defer api.Close()
	b := newBench(t)
	b.scenario(map[string][]fakes.Outcome{"execute": {{Stdout: "done"}}})
	a, at := b.agents("PEAL_MAX_TOKENS=1000")
	at, e, _ := keySite(t, at, api.URL)
	modelRequest(t, e)
	if _, err := a.Call(context.Background(), at, "execute", 1, 1, nil, "do it"); err != nil {
		t.Fatal(err)
	}
	_, err := a.Call(context.Background(), at, "execute", 2, 1, nil, "do it")
	var cl *CostLimitError
	if !errors.As(err, &cl) || cl.Tokens != 1000 || len(b.calls()) != 1 ||
		err.Error() != "the run's agent calls used 1000 tokens, which reaches max_tokens (1000): stopped after the call that reached it" {
		t.Fatalf("err %v, calls %d", err, len(b.calls()))
	}
}
