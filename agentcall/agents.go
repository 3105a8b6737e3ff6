package agentcall

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"peal/agent"
	"peal/config"
	"peal/confine"
	"peal/internal/agentlog"
	"peal/phase"
	"peal/state"
)

// Options are the dependencies of a run's agent calls.
type Options struct {
	Config *config.Config
	Log    *slog.Logger
	// Now is the clock (nil: time.Now); Sleep waits between attempts (nil:
	// a timer).
	Now   func() time.Time
	Sleep func(context.Context, time.Duration) error
	// Env is added to the environment of every call, and of the check that
	// an agent can authenticate.
	Env []string
	// Linger is how long an agent may go on after its final result event
	// (0: DefaultLinger).
	Linger time.Duration
	// LaunchGap, when set, replaces the kinds' gaps between parallel
	// launches (tests start without one).
	LaunchGap func(*agent.Kind) time.Duration
	// Recorder hears of each attempt's usage and of what the confinement
	// refused a call (nil: nobody).
	Recorder Recorder
	// Sessions are the tasks' agent sessions (nil: every call fresh).
	Sessions *Sessions
	// Attempt is the attempt of the task's ticket, whose number chooses
	// the models of its calls (ModelFor; nil: no ticket).
	Attempt func(task int) int
	// TaskEnv are the variables a call of the task gets (its ticket).
	TaskEnv func(task int) []string
	// Prober tells whether an agent can authenticate (nil: the kind's own
	// check, Kind.CheckAuth); prepare confines its command as a call of
	// the kind at the site of the first call.
	Prober func(ctx context.Context, k *agent.Kind, path, dir string, env []string, prepare func(*phase.Spec)) agent.AuthStatus
	// CallStart, when set, runs at the start of every call (tests make a
	// call panic with it).
	CallStart func(name phase.Name, task int)
}

// Recorder hears what a call's attempts reported and were refused.
type Recorder interface {
	// Usage: an attempt (its call id) reported tokens and cost, and stood
	// to its session as session ("began", "continued", "") with id.
	Usage(task int, phaseName phase.Name, call string, u agent.Usage, session, id string)
	// Confined: the attempt of a confined call that ran in dir ended (end);
	// the recorder notes what the confinement refused it and returns the
	// line that explains its failure by the confinement ("" when nothing
	// points at it), with whether the call's output bore it out.
	Confined(call *confine.Call, dir string, task int, res phase.Result, end End) (line string, borne bool)
}

// End is how an attempt ended, for the line that explains a failure by the
// confinement.
type End int

const (
	Succeeded End = iota
	// Failed: a failure whose cause the confinement may be.
	Failed
	// FailedSaid: a failure that says its own cause (an account out of
	// quota, a prompt over the window, a model that does not exist, a key
	// refused, a rate limit).
	FailedSaid
)

// DefaultLinger is how long an agent may go on after its final result
// event before its process group is stopped.
const DefaultLinger = 3 * time.Second

// Agents are a run's agent CLIs: which kinds, the check made once that they
// can authenticate, the staggering of parallel launches, the tokens and
// cost the calls reported, and what the run learnt of each agent.
type Agents struct {
	opts     Options
	cfg      *config.Config
	log      *slog.Logger
	primary  side
	fallback *side // nil: no fallback agent

	authOnce sync.Once
	authErr  error

	launch launchGate
	logs   *agentlog.Logs // nil: the calls' output is not kept

	mu      sync.Mutex
	total   agent.Usage
	perTask map[int]agent.Usage
	counted bool // some call reported usage
	// missing are the models an agent's API said it does not know, by
	// role: no later call asks that agent for them again.
	missing map[phase.Role]map[string]bool
	// outOfQuota are the agents whose account is out of quota or credit,
	// by role: no later call of the run uses them.
	outOfQuota map[phase.Role]bool
}

// side is one agent a call can use: the primary, or the fallback of even
// attempts.
type side struct {
	kind  *agent.Kind
	rules *agent.Rules // the kind's failure patterns merged with the user's, made once per run
	path  string
	role  phase.Role
	model func(base string) string // the model of this side given the primary's
}

// New makes the agents of a run of o.Config.
func New(o Options) *Agents {
	cfg := o.Config
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Linger == 0 {
		o.Linger = DefaultLinger
	}
	if o.Attempt == nil {
		o.Attempt = func(int) int { return 0 }
	}
	if o.Prober == nil {
		o.Prober = func(ctx context.Context, k *agent.Kind, path, dir string, env []string, prepare func(*phase.Spec)) agent.AuthStatus {
			return k.CheckAuth(ctx, path, dir, env, prepare)
		}
	}
	a := &Agents{opts: o, cfg: cfg, log: o.Log, perTask: map[int]agent.Usage{}}
	a.launch.gapOf = o.LaunchGap
	kind, err := agent.Lookup(cfg.AgentKind)
	if err != nil {
		// Validate has checked the kind; an unknown one here is a bug.
		kind, _ = agent.Lookup(agent.Default)
	}
	a.primary = side{kind: kind, rules: kind.Rules(userPatterns(cfg)), path: cfg.AgentPath, role: phase.RolePrimary, model: func(m string) string { return m }}
	if cfg.FallbackPath != "" {
		fk := kind
		if k, err := agent.Lookup(cfg.FallbackKind()); err == nil {
			fk = k
		}
		a.fallback = &side{kind: fk, rules: fk.Rules(userPatterns(cfg)), path: cfg.FallbackPath, role: phase.RoleFallback, model: func(m string) string {
			if cfg.FallbackModel != "" {
				return cfg.FallbackModel
			}
			return m
		}}
	}
	return a
}

// KeepLogs keeps each later call's whole output in logs (agent_log_dir).
func (a *Agents) KeepLogs(logs *agentlog.Logs) { a.logs = logs }

// userPatterns are the failure patterns the user configured.
func userPatterns(cfg *config.Config) agent.UserPatterns {
	return agent.UserPatterns{Fatal: cfg.FatalErrorPatterns, Network: cfg.NetworkErrorPatterns, Builtin: cfg.BuiltinErrorPatterns}
}

// sides are the agents of a run, primary first.
func (a *Agents) sides() []*side {
	s := []*side{&a.primary}
	if a.fallback != nil {
		s = append(s, a.fallback)
	}
	return s
}

// sideOf is the agent of role.
func (a *Agents) sideOf(role phase.Role) *side {
	if role == phase.RoleFallback && a.fallback != nil {
		return a.fallback
	}
	return &a.primary
}

// request is what an agent call of phase name at dir asks of the agent of
// role, for model: its argv, environment and prompt follow from it
// (agent.Kind.Invocation).
func (a *Agents) request(dir string, role phase.Role, name phase.Name, model, prompt string) agent.Call {
	s := a.sideOf(role)
	return agent.Call{Phase: name, Repo: dir, Model: s.model(model), Prompt: prompt, Structured: a.cfg.Structured(),
		Options: agent.Options{Sandbox: a.cfg.Sandbox, Trust: a.cfg.CursorTrust, Force: a.cfg.CursorForce}, Extra: a.cfg.AgentExtraArgs}
}

// CheckAuth makes sure, once, before the first agent call, that every agent
// of the run whose CLI would otherwise wait or retry without credentials
// can authenticate. Its status command runs the CLI, at the site at (the
// first call's), confined as a call of its kind there.
func (a *Agents) CheckAuth(ctx context.Context, at Site) error {
	a.authOnce.Do(func() {
		for _, s := range a.sides() {
			if !s.kind.Auth.BeforeRun {
				continue
			}
			env := append(os.Environ(), a.opts.Env...)
			prepare := func(spec *phase.Spec) {
				spec.TempRoot = filepath.Join(a.cfg.StateDir, "tmp")
				if at.Confine == nil {
					return
				}
				// Confined, it inherits the allowed part of peal's
				// environment: it is given only what peal adds.
				spec.Env = a.opts.Env
				spec.Confine = at.Confine(s.kind, spec.Env)
			}
			dir := at.Caller.Dir
			if dir == "" {
				dir = a.cfg.RepoPath
			}
			st := a.opts.Prober(ctx, s.kind, s.path, dir, env, prepare)
			if st.OK {
				a.log.Debug("agent can authenticate", "kind", s.kind.Name, "role", s.role, "how", st.Detail)
				continue
			}
			if st.Unclear {
				a.log.Warn("cannot tell whether the agent can authenticate; its first call will", "kind", s.kind.Name, "role", s.role, "why", st.Detail)
				continue
			}
			if ctx.Err() != nil {
				a.authErr = &phase.InterruptedError{Phase: phase.Auth, Cause: context.Cause(ctx)}
				return
			}
			if st.Err != nil {
				// The check never ran: its cause, not a login hint.
				a.authErr = fmt.Errorf("the %s CLI's login check: %w", s.kind.Name, st.Err)
				return
			}
			a.authErr = &agent.AuthError{Kind: s.kind.Name, Detail: st.Detail, Hint: s.kind.Auth.LoginHint}
			return
		}
	})
	return a.authErr
}

// add counts the usage of one call; it reports whether there was any.
func (a *Agents) add(task int, u agent.Usage) bool {
	if u == (agent.Usage{}) {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.counted = true
	a.total = a.total.Add(u)
	a.perTask[task] = a.perTask[task].Add(u)
	return true
}

// CostLimitError: the run's agent calls reached max_cost_usd (or, with
// TokenLimit set, max_tokens); the run stops after the call that reached
// it (exit 3).
type CostLimitError struct {
	Limit, Spent float64
	// TokenLimit is max_tokens and Tokens the run's tokens, when those
	// are what reached it.
	TokenLimit, Tokens uint64
}

// EndsRun: every later call would be refused.
func (e *CostLimitError) EndsRun() bool { return true }

func (e *CostLimitError) Error() string {
	if e.TokenLimit > 0 {
		return fmt.Sprintf("the run's agent calls used %d tokens, which reaches max_tokens (%d): stopped after the call that reached it", e.Tokens, e.TokenLimit)
	}
	return fmt.Sprintf("the run's agent calls cost $%.4f, which reaches max_cost_usd ($%.4f): stopped after the call that reached it", e.Spent, e.Limit)
}

// costErr is a *CostLimitError once the run's cost reached max_cost_usd or
// its tokens (input and output, however they were counted) max_tokens.
func (a *Agents) costErr() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cfg.MaxCostUSD != nil && a.total.CostUSD >= *a.cfg.MaxCostUSD {
		return &CostLimitError{Limit: *a.cfg.MaxCostUSD, Spent: a.total.CostUSD}
	}
	if tokens := uint64(a.total.InputTokens + a.total.OutputTokens); a.cfg.MaxTokens != nil && tokens >= *a.cfg.MaxTokens {
		return &CostLimitError{TokenLimit: *a.cfg.MaxTokens, Tokens: tokens}
	}
	return nil
}

// Usage is the usage for the run summary; nil when no call reported any.
func (a *Agents) Usage() *state.RunUsage {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.counted {
		return nil
	}
	u := &state.RunUsage{Usage: ToState(a.total), Tasks: map[int]state.Usage{}}
	for task, tu := range a.perTask {
		if task != phase.NoTask {
			u.Tasks[task] = ToState(tu)
		}
	}
	return u
}

// ToState is u as the state folder's files hold it.
func ToState(u agent.Usage) state.Usage {
	return state.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedTokens: u.CachedTokens, CostUSD: u.CostUSD,
		Requests: u.Requests, BytesSent: u.BytesSent, BytesReceived: u.BytesReceived}
}

// launchGate staggers the launches of a CLI that cannot start in parallel
// safely: while one of its calls runs, the next starts no sooner than the
// kind's LaunchGap after the previous launch.
type launchGate struct {
	mu      sync.Mutex
	running map[string]int
	last    map[string]time.Time
	// gapOf, when set, replaces the kinds' gaps (tests run without one).
	gapOf func(*agent.Kind) time.Duration
}

// gap is how far apart the launches of kind k must be.
func (g *launchGate) gap(k *agent.Kind) time.Duration {
	if g.gapOf != nil {
		return g.gapOf(k)
	}
	return k.LaunchGap
}

// wait blocks until a call of kind k may start, and counts it as running.
func (g *launchGate) wait(ctx context.Context, k *agent.Kind) {
	gap := g.gap(k)
	if gap <= 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running == nil {
		g.running, g.last = map[string]int{}, map[string]time.Time{}
	}
	for g.running[k.Name] > 0 {
		d := time.Until(g.last[k.Name].Add(gap))
		if d <= 0 {
			break
		}
		g.mu.Unlock()
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		g.mu.Lock()
		if ctx.Err() != nil {
			break
		}
	}
	g.running[k.Name]++
	g.last[k.Name] = time.Now()
}

// done counts a call of kind k as ended.
func (g *launchGate) done(k *agent.Kind) {
	if g.gap(k) <= 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.running[k.Name]--
}
