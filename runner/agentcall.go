package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"peal/agent"
	"peal/config"
	"peal/confine"
	"peal/phase"
	"peal/state"
)

// side is one agent a call can use: the primary, or the fallback of even
// attempts.
type side struct {
	kind  *agent.Kind
	rules *agent.Rules // the kind's failure patterns merged with the user's, made once per run
	path  string
	role  string
	model func(base string) string // the model of this side given the primary's
}

// agents is what a run knows of its agent CLIs: which kinds, the
// authentication check made once before the first call, the staggering of
// parallel launches, and the tokens and cost the calls reported.
type agents struct {
	primary  side
	fallback *side // nil: no fallback agent

	authOnce sync.Once
	authErr  error

	launch launchGate

	mu      sync.Mutex
	total   agent.Usage
	perTask map[int]agent.Usage
	counted bool // some call reported usage
	// missing are the models an agent's API said it does not know, by
	// role: no later call asks that agent for them again.
	missing map[string]map[string]bool
	// outOfQuota are the agents whose account is out of quota or credit,
	// by role: no later call of the run uses them.
	outOfQuota map[string]bool
}

func newAgents(cfg *config.Config) *agents {
	a := &agents{perTask: map[int]agent.Usage{}}
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

// sides are the agents of a run, primary first.
func (a *agents) sides() []*side {
	s := []*side{&a.primary}
	if a.fallback != nil {
		s = append(s, a.fallback)
	}
	return s
}

// agentRequest is what an agent call of the given phase at a site asks of
// side s; its workspace is the folder the call runs in (a task's worktree,
// in a block).
func (r *run) agentRequest(at *site, s *side, name, model, prompt string) agent.Call {
	return agent.Call{Phase: name, Repo: at.caller.Dir, Model: s.model(model), Prompt: prompt, Structured: r.cfg.Structured(),
		Options: agent.Options{Sandbox: r.cfg.Sandbox, Trust: r.cfg.CursorTrust, Force: r.cfg.CursorForce}, Extra: r.cfg.AgentExtraArgs}
}

// userPatterns are the failure patterns the user configured.
func userPatterns(cfg *config.Config) agent.UserPatterns {
	return agent.UserPatterns{Fatal: cfg.FatalErrorPatterns, Network: cfg.NetworkErrorPatterns, Builtin: cfg.BuiltinErrorPatterns}
}

// agentCall runs one agent call at a site with the adaptive retry policy of
// the run:
// attempts (1 + the retry count of its kind) for ordinary failures, failure
// (nil: timeout or non-zero exit) to judge an attempt's answer. With
// structured output the result's Stdout is the answer text of the events.
// The call's tokens and cost are added to the run's, and each attempt's go
// to the run record with the session it began or continued (agent_session
// = "task", see sessions.go); once they reach max_cost_usd, every later
// call returns *CostLimitError without starting.
func (r *run) agentCall(ctx context.Context, at *site, name string, task int, attempts int, failure func(phase.Result) error, prompt string) (phase.Result, error) {
	if r.callStart != nil {
		r.callStart(name, task)
	}
	if err := r.agents.costErr(r.cfg); err != nil {
		return phase.Result{Phase: name}, err
	}
	if err := r.checkAuth(ctx); err != nil {
		return phase.Result{Phase: name}, err
	}
	log := r.log.With("task", task)
	model, key := modelSetting(r.cfg, r.tickets.attempt(task), name)
	invs := map[string]agent.Invocation{}
	reqs := map[string]agent.Call{}
	sessions := map[string]*callSession{}
	classifiers := map[string]phase.Classifier{}
	models := map[string]callModel{}
	var watcher *agent.Watcher // the latest attempt's
	var session *callSession   // the latest attempt's part in its session (nil: none)
	var usage agent.Usage
	for _, s := range r.agents.sides() {
		req := r.agentRequest(at, s, name, model, prompt)
		inv, err := s.kind.Invocation(s.path, req)
		if err != nil {
			return phase.Result{Phase: name}, err
		}
		invs[s.role], reqs[s.role] = inv, req
		sessions[s.role] = r.sessions.call(task, name, s, at.caller.Dir, log)
		models[s.role] = r.callModel(s, req.Model, key)
		classifiers[s.role] = s.rules.Classifier(failure, func() *agent.Watcher { return watcher }, r.now)
	}
	for _, s := range r.agents.sides() {
		classifiers[s.role] = r.agents.refusalAware(s.role, models, r.agents.modelAware(s.role, models, classifiers[s.role]))
	}
	var env []string
	if tr := r.tickets.of(task); tr != nil {
		env = append(env, "PEAL_TICKET_ID="+tr.id)
	}
	files := r.agentLogs.Call(name, task)
	defer files.Close()
	role := phase.RolePrimary
	launched := false
	land := func() {
		if launched {
			r.agents.launch.done(r.sideOf(role).kind)
			launched = false
		}
	}
	defer land()
	var confined *confine.Call // the latest attempt's
	// accounted: the latest attempt's usage is counted and recorded.
	accounted := true
	account := func(res phase.Result) {
		if accounted || watcher == nil {
			return
		}
		accounted = true
		own := session.usage(watcher.Usage())
		usage = usage.Add(own)
		how, id := session.attempt()
		r.recordUsage(task, name, res.CallID, own, how, id)
	}
	classify := func(res phase.Result) phase.Verdict {
		land()
		v := classifiers[role](res)
		end := endSucceeded
		switch {
		case v.Class == phase.Fatal || v.Class == phase.RateLimited || agent.SaysItsCause(v.Err):
			end = endFailedSaid
		case v.Class != phase.Succeeded:
			end = endFailed
		}
		if line, borne := r.noteConfined(confined, at.caller.Dir, task, res, end); line != "" && v.Err != nil {
			v.Err = &confinedError{err: v.Err, line: line}
			if borne && confine.RefusedConnection(line) && (v.Class == phase.Network || v.Class == phase.Ordinary) {
				// Not an outage: the allow list is the run's, and every
				// attempt of this agent would be refused the same way;
				// another agent, with a list of its own, may take over.
				v.Class, v.AgentOnly = phase.Fatal, true
			}
		}
		account(res)
		if session != nil {
			v = session.ended(res, v, watcher.Session() != "")
		}
		return v
	}
	policy := r.agentPolicy(attempts, classify)
	policy.Skip = func(role string) bool { return r.agents.isMissing(role, models[role]) || r.agents.isOutOfQuota(role) }
	res, _, err := phase.Do(ctx, log, policy, func(a phase.Attempt) phase.Spec {
		role = a.Role
		s := r.sideOf(role)
		inv := invs[role]
		var onSession func(string)
		if session = sessions[role]; session != nil {
			req := reqs[role]
			if req.Session, req.Resume = session.begin(); req.Session != "" {
				// The id is one the CLI takes (begin checks it), and the
				// prompt fitted above: this cannot fail.
				if si, err := s.kind.Invocation(s.path, req); err == nil {
					inv = si
				}
			}
			onSession = session.named
		}
		spec := at.caller.Spec(name, task, a, inv.Argv, true)
		spec.Stdin = inv.Stdin
		spec.Env = append(append(spec.Env, inv.Env...), env...)
		spec.TempRoot = filepath.Join(r.cfg.StateDir, "tmp")
		spec.Confine = r.confined.forCall(at, s.kind, spec.Env)
		confined = spec.Confine
		watcher = s.rules.Watcher(agent.WatchOptions{Phase: name, Structured: r.cfg.Structured(),
			NetworkStall: time.Duration(r.cfg.NetworkStallSec) * time.Second, Linger: r.linger,
			RateLimitCap: a.RateLimitCap, RateLimitWaited: a.RateLimitWaited, OnSession: onSession})
		accounted = false
		spec.Watch = watcher
		files.Attach(&spec, a.N)
		r.agents.launch.wait(ctx, s.kind)
		launched = true
		return spec
	})
	if watcher != nil {
		account(res) // an attempt that was not judged: interrupted
		if text, ok := watcher.Answer(); ok && err == nil {
			res.Stdout = text
		}
	}
	if r.agents.add(task, usage) {
		log.Info("agent usage", "phase", name, "input_tokens", usage.InputTokens, "cached_tokens", usage.CachedTokens,
			"output_tokens", usage.OutputTokens, "cost_usd", usage.CostUSD)
	}
	return res, err
}

func (r *run) sideOf(role string) *side {
	if role == phase.RoleFallback && r.agents.fallback != nil {
		return r.agents.fallback
	}
	return &r.agents.primary
}

// agentPolicy is the retry policy of agent calls: fatal failures are never
// retried; network failures have their own budget and growing delays; rate
// limits wait for the announced reset, or back off, within
// rate_limit_max_wait_sec; transient failures of the CLI are retried at
// once; ordinary retries wait retry_delay_sec (doubling); with a fallback
// agent even attempts use it.
func (r *run) agentPolicy(attempts int, classify phase.Classifier) phase.Policy {
	p := phase.Policy{Attempts: attempts, Classify: classify, Fallback: r.agents.fallback != nil, Sleep: r.sleep}
	if d := r.cfg.RetryDelaySec; d > 0 {
		p.Backoff = phase.Exponential(time.Duration(d)*time.Second, 10*time.Minute, 0)
	}
	maxWait := time.Duration(r.cfg.RateLimitMaxWaitSec) * time.Second
	rateRetries := 0
	if maxWait > 0 {
		rateRetries = maxRateLimitRetries
	}
	p.Budgets = map[phase.Class]phase.Budget{
		phase.Network:     r.cfg.NetworkBudget(),
		phase.RateLimited: {Retries: rateRetries, Backoff: phase.Exponential(rateLimitFirstWait, rateLimitLongestWait, 0.1), MaxWait: maxWait},
		phase.Transient:   {Retries: transientRetries},
	}
	return p
}

const (
	// A rate limit without an announced reset waits 30 s, doubling up to
	// 5 minutes, until rate_limit_max_wait_sec is spent.
	rateLimitFirstWait   = 30 * time.Second
	rateLimitLongestWait = 5 * time.Minute
	maxRateLimitRetries  = 100
	// Transient failures of the CLI (Cursor's configuration-file race) are
	// retried at once, this many times per call.
	transientRetries = 3
	// defaultLinger is how long an agent may go on after its final result
	// event before its process group is stopped.
	defaultLinger = 3 * time.Second
)

// checkAuth makes sure, once, before the first agent call, that every agent
// of the run whose CLI would otherwise wait or retry without credentials
// can authenticate.
func (r *run) checkAuth(ctx context.Context) error {
	r.agents.authOnce.Do(func() {
		env := append(os.Environ(), r.caller.Env...)
		for _, s := range r.agents.sides() {
			if !s.kind.Auth.BeforeRun {
				continue
			}
			st := s.kind.CheckAuth(ctx, s.path, r.cfg.RepoPath, env)
			if st.OK {
				r.log.Debug("agent can authenticate", "kind", s.kind.Name, "role", s.role, "how", st.Detail)
				continue
			}
			if st.Unclear {
				r.log.Warn("cannot tell whether the agent can authenticate; its first call will", "kind", s.kind.Name, "role", s.role, "why", st.Detail)
				continue
			}
			if ctx.Err() != nil {
				r.agents.authErr = &phase.InterruptedError{Phase: "auth", Cause: context.Cause(ctx)}
				return
			}
			r.agents.authErr = &agent.AuthError{Kind: s.kind.Name, Detail: st.Detail, Hint: s.kind.Auth.LoginHint}
			return
		}
	})
	return r.agents.authErr
}

// add counts the usage of one call; it reports whether there was any.
func (a *agents) add(task int, u agent.Usage) bool {
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

// CostLimitError: the run's agent calls reached max_cost_usd; the run stops
// after the call that reached it (exit 3).
type CostLimitError struct {
	Limit, Spent float64
}

// EndsRun: every later call would be refused.
func (e *CostLimitError) EndsRun() bool { return true }

func (e *CostLimitError) Error() string {
	return fmt.Sprintf("the run's agent calls cost $%.4f, which reaches max_cost_usd ($%.4f): stopped after the call that reached it", e.Spent, e.Limit)
}

// costErr is a *CostLimitError once the run's cost reached max_cost_usd.
func (a *agents) costErr(cfg *config.Config) error {
	if cfg.MaxCostUSD == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.total.CostUSD >= *cfg.MaxCostUSD {
		return &CostLimitError{Limit: *cfg.MaxCostUSD, Spent: a.total.CostUSD}
	}
	return nil
}

// summary is the usage for the run summary; nil when no call reported any.
func (a *agents) summary() *state.RunUsage {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.counted {
		return nil
	}
	u := &state.RunUsage{Usage: toState(a.total), Tasks: map[int]state.Usage{}}
	for task, tu := range a.perTask {
		if task != phase.NoTask {
			u.Tasks[task] = toState(tu)
		}
	}
	return u
}

func toState(u agent.Usage) state.Usage {
	return state.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedTokens: u.CachedTokens, CostUSD: u.CostUSD}
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

// callModel is the model one side of a call asks for, and the setting that
// chose it.
type callModel struct {
	kind  string
	model string // "" for the CLI's default
	key   string // model, fallback_model, an escalation key; "" for the default
	// setting is where key was set, for messages: a flag, a variable, the
	// config file.
	setting string
}

// id tells the models apart: the CLI's default model is each kind's own.
func (m callModel) id() string {
	if m.model == "" {
		return "\x00default of " + m.kind
	}
	return m.model
}

// callModel is the model side s asks for in a call whose primary model was
// set by key (fallback_model, when set, is the fallback's own).
func (r *run) callModel(s *side, model, key string) callModel {
	if s.role == phase.RoleFallback && r.cfg.FallbackModel != "" {
		key = "fallback_model"
	}
	m := callModel{kind: s.kind.Name, model: model, key: key}
	if key != "" {
		m.setting = config.Describe(key, r.cfg.Sources)
	}
	return m
}

// modelError: the API of an agent does not know the model a call asked
// for, and no agent of the run is left to ask for another. It names the
// model, the setting that chose it and the CLI's own words, and ends the
// run (exit 1): every later call would ask for the same model.
type modelError struct {
	Model, Key, Setting string // Model "" for the CLI's default
	Kind                string
	Said                string // the CLI's words, quoted
}

// EndsRun: a model that does not exist is a configuration error.
func (e *modelError) EndsRun() bool { return true }

func (e *modelError) Error() string {
	if e.Model == "" {
		return fmt.Sprintf("the default model of the %s CLI (no model is set) is not one its API knows: set model (%s) to a model it serves; %s says: %s",
			e.Kind, config.Describe("model", nil), e.Kind, e.Said)
	}
	return fmt.Sprintf("the model %q (set by %s) is not one the %s CLI's API knows: set %s to a model it serves; %s says: %s",
		e.Model, e.Setting, e.Kind, e.Key, e.Kind, e.Said)
}

// modelAware turns an attempt's *agent.UnknownModelError into a
// *ModelError: the model is remembered as missing for that agent, and the
// failure ends the call, unless the other agent of the run asks for another
// model that is not known to be missing: then the call goes on with it
// (phase.Verdict.AgentOnly). The same model is never asked for again.
func (a *agents) modelAware(role string, models map[string]callModel, classify phase.Classifier) phase.Classifier {
	return func(res phase.Result) phase.Verdict {
		v := classify(res)
		var unknown *agent.UnknownModelError
		if !errors.As(v.Err, &unknown) {
			return v
		}
		m := models[role]
		a.setMissing(role, m)
		v.Err = &modelError{Model: m.model, Key: m.key, Setting: m.setting, Kind: unknown.Kind, Said: unknown.Said}
		other := phase.RolePrimary
		if role == phase.RolePrimary {
			other = phase.RoleFallback
		}
		if o, ok := models[other]; ok && o.id() != m.id() && !a.isMissing(other, o) {
			v.AgentOnly = true
		}
		return v
	}
}

func (a *agents) setMissing(role string, m callModel) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.missing == nil {
		a.missing = map[string]map[string]bool{}
	}
	if a.missing[role] == nil {
		a.missing[role] = map[string]bool{}
	}
	a.missing[role][m.id()] = true
}

func (a *agents) isMissing(role string, m callModel) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.missing[role][m.id()]
}

// refusalAware hands a call over to the other agent of the run, at once
// and without spending a retry (phase.Verdict.AgentOnly), when its agent
// cannot serve it and the other may: an account out of quota or credit
// (*agent.QuotaError) when the other agent draws on another provider's
// account, which no later call of the run asks again; a prompt over the
// context window (*agent.ContextWindowError) when the other asks for
// another model.
func (a *agents) refusalAware(role string, models map[string]callModel, classify phase.Classifier) phase.Classifier {
	return func(res phase.Result) phase.Verdict {
		v := classify(res)
		other, ok := models[otherRole(role)]
		var quota *agent.QuotaError
		var window *agent.ContextWindowError
		switch {
		case errors.As(v.Err, &quota):
			a.setOutOfQuota(role)
			m := models[role]
			v.AgentOnly = ok && !a.isOutOfQuota(otherRole(role)) && !agent.SameProvider(m.kind, m.model, other.kind, other.model)
		case errors.As(v.Err, &window):
			v.AgentOnly = ok && other.id() != models[role].id() && !a.isMissing(otherRole(role), other) && !a.isOutOfQuota(otherRole(role))
		}
		return v
	}
}

// otherRole is the agent of a call that is not role.
func otherRole(role string) string {
	if role == phase.RolePrimary {
		return phase.RoleFallback
	}
	return phase.RolePrimary
}

func (a *agents) setOutOfQuota(role string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.outOfQuota == nil {
		a.outOfQuota = map[string]bool{}
	}
	a.outOfQuota[role] = true
}

func (a *agents) isOutOfQuota(role string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.outOfQuota[role]
}
