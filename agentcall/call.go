package agentcall

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"peal/agent"
	"peal/confine"
	"peal/internal/agentlog"
	"peal/phase"
	"peal/prompt"
)

// Site is where a call runs: its folder and observer, and how a call there
// is confined.
type Site struct {
	Caller phase.Caller
	// Confine is the confinement of a call of kind k there, to which peal
	// gives the variables env (nil, or a nil result: not confined).
	Confine func(k *agent.Kind, env []string) *confine.Call
}

// Call runs one agent call of phase name for task at the site, under the
// run's policy for agent calls: attempts (1 + the retry count of its kind)
// for ordinary failures; failure (nil: a timeout or a non-zero exit) judges
// an attempt's answer. With structured output the result's Stdout is the
// answer text of the events. The call's tokens and cost are added to the
// run's, and each attempt's go to the Recorder with the session it began or
// continued; once they reach max_cost_usd or max_tokens, every later call
// returns a *CostLimitError without starting.
func (a *Agents) Call(ctx context.Context, at Site, name phase.Name, task, attempts int, failure func(phase.Result) error, prompt string) (phase.Result, error) {
	if a.opts.CallStart != nil {
		a.opts.CallStart(name, task)
	}
	if err := a.costErr(); err != nil {
		return phase.Result{Phase: name}, err
	}
	if err := a.CheckAuth(ctx, at); err != nil {
		return phase.Result{Phase: name}, err
	}
	c, err := a.newCall(ctx, at, name, task, failure, prompt)
	if err != nil {
		return phase.Result{Phase: name}, err
	}
	defer c.close()
	policy := a.retry(attempts, c.judge)
	policy.Skip = c.skip
	res, _, err := phase.Do(ctx, c.log, policy, c.start)
	c.finish(&res, err)
	return res, err
}

// At is an agent for the review at the site: its triage and address calls
// take the argv of execute calls and the run's policy.
func (a *Agents) At(at Site) SiteAgent { return SiteAgent{a: a, at: at} }

// SiteAgent is what the review needs of an agent: a call of phase name for
// task at one site, its answer's text.
type SiteAgent struct {
	a  *Agents
	at Site
}

// Call runs the call; see Agents.Call.
func (s SiteAgent) Call(ctx context.Context, name phase.Name, task, attempts int, prompt string) (string, error) {
	res, err := s.a.Call(ctx, s.at, name, task, attempts, nil, prompt)
	return res.Stdout, err
}

// call is one agent call under way: what each agent of the run would run
// for it, and its latest attempt.
type call struct {
	ctx   context.Context
	a     *Agents
	at    Site
	name  phase.Name
	task  int
	log   *slog.Logger
	sides map[phase.Role]*callSide // by role
	env   []string                 // the task's variables
	files *agentlog.Call
	usage agent.Usage // what the call's attempts reported
	cur   attempt
}

// callSide is what one agent of the run runs for the call.
type callSide struct {
	s        *side
	inv      agent.Invocation
	req      agent.Call
	session  *callSession // nil: the call continues no session
	model    callModel
	classify phase.Classifier
}

// attempt is one try of a call.
type attempt struct {
	side     *callSide
	watcher  *agent.Watcher
	confined *confine.Call
	// launched: the attempt holds a place in its kind's launch gate;
	// accounted: its usage is counted and recorded.
	launched, accounted bool
}

// newCall prepares a call: each agent's invocation, session, model and
// judgement of an attempt.
func (a *Agents) newCall(ctx context.Context, at Site, name phase.Name, task int, failure func(phase.Result) error, prompt string) (*call, error) {
	c := &call{ctx: ctx, a: a, at: at, name: name, task: task, log: a.log.With(phase.TaskAttr(task)), sides: map[phase.Role]*callSide{}}
	c.cur.accounted = true
	model, key := ModelFor(a.cfg, a.opts.Attempt(task), name)
	models := map[phase.Role]callModel{}
	for _, s := range a.sides() {
		req := a.request(at.Caller.Dir, s.role, name, model, prompt)
		inv, err := s.kind.Invocation(s.path, req)
		if err != nil {
			return nil, err
		}
		cs := &callSide{s: s, inv: inv, req: req, model: a.callModel(s, req.Model, key)}
		if a.opts.Sessions != nil {
			cs.session = a.opts.Sessions.call(task, name, s, at.Caller.Dir, c.log)
		}
		cs.classify = s.rules.Classifier(failure, func() *agent.Watcher { return c.cur.watcher }, a.opts.Now)
		models[s.role] = cs.model
		c.sides[s.role] = cs
	}
	for role, cs := range c.sides {
		cs.classify = a.refusalAware(role, models, a.modelAware(role, models, cs.classify))
	}
	if a.opts.TaskEnv != nil {
		c.env = a.opts.TaskEnv(task)
	}
	c.files = a.logs.Call(name, task)
	return c, nil
}

// skip: an agent the run knows cannot serve the call (its model missing,
// its account out of quota) is not tried.
func (c *call) skip(role phase.Role) bool {
	return c.a.isMissing(role, c.sides[role].model) || c.a.isOutOfQuota(role)
}

// start makes the spec of attempt n: its agent, its session, its
// confinement and the watch of its output.
func (c *call) start(n phase.Attempt) phase.Spec {
	cs := c.sides[n.Role]
	c.cur = attempt{side: cs}
	inv := cs.inv
	var onSession func(string)
	if cs.session != nil {
		req := cs.req
		var putBack bool
		if req.Session, req.Resume, putBack = cs.session.begin(); req.Session != "" {
			if req.Resume && putBack {
				req.Prompt = prompt.PutBack(req.Prompt)
			}
			// The id is one the CLI takes (begin checks it), and the prompt
			// fitted before: this cannot fail.
			if si, err := cs.s.kind.Invocation(cs.s.path, req); err == nil {
				inv = si
			}
		}
		onSession = cs.session.named
	}
	spec := c.at.Caller.Spec(c.name, c.task, n, inv.Argv, true)
	spec.Stdin = inv.Stdin
	spec.Env = append(append(spec.Env, inv.Env...), c.env...)
	spec.TempRoot = filepath.Join(c.a.cfg.StateDir, "tmp")
	c.cur.watcher = cs.s.rules.Watcher(agent.WatchOptions{Phase: c.name, Structured: c.a.cfg.Structured(),
		NetworkStall: time.Duration(c.a.cfg.NetworkStallSec) * time.Second, Linger: c.a.opts.Linger,
		RateLimitCap: n.RateLimitCap, RateLimitWaited: n.RateLimitWaited, OnSession: onSession})
	spec.Watch = c.cur.watcher
	if c.at.Confine != nil {
		spec.Confine = c.at.Confine(cs.s.kind, spec.Env)
	}
	if spec.Confine != nil {
		// The watch hears what the proxy sees of the call's hosts: a call
		// that cannot reach any is stopped at once, not left to the CLI's
		// own silent retries.
		w := c.cur.watcher
		confined := *spec.Confine
		confined.Reached = func(hostport string, err error) { w.Reached(hostport, err, confine.NoRoute(err)) }
		spec.Confine = &confined
	}
	c.cur.confined = spec.Confine
	c.files.Attach(&spec, n.N)
	c.a.launch.wait(c.ctx, cs.s.kind)
	c.cur.launched = true
	return spec
}

// land lets the next launch of the attempt's kind go.
func (c *call) land() {
	if c.cur.launched {
		c.a.launch.done(c.cur.side.s.kind)
		c.cur.launched = false
	}
}

// judge is the verdict on the attempt that ended with res: its agent's
// failure classes, what the confinement explains of a failure, its usage,
// and what it did to its session.
func (c *call) judge(res phase.Result) phase.Verdict {
	c.land()
	cs := c.cur.side
	v := cs.classify(res)
	if conf := c.cur.confined; conf != nil && conf.Keys != nil && v.Err != nil && conf.Keys.Count.Usage().Unreachable > 0 {
		// Its model endpoint could not reach the API: an outage, whatever
		// the CLI made of the broken connection, and the line says so.
		if v.Class == phase.Ordinary {
			v.Class = phase.Network
		}
		v.Err = &ConfinedError{Err: v.Err, Line: conf.Keys.Count.Unreachable()}
	}
	end := Succeeded
	switch {
	case v.Class == phase.Fatal || v.Class == phase.RateLimited || agent.SaysItsCause(v.Err):
		end = FailedSaid
	case v.Class != phase.Succeeded:
		end = Failed
	}
	if rec := c.a.opts.Recorder; rec != nil && c.cur.confined != nil {
		if line, borne := rec.Confined(c.cur.confined, c.at.Caller.Dir, c.task, res, end); line != "" && v.Err != nil {
			v.Err = &ConfinedError{Err: v.Err, Line: line}
			if borne && confine.RefusedConnection(line) && (v.Class == phase.Network || v.Class == phase.Ordinary) {
				// Not an outage: the allow list is the run's, and every
				// attempt of this agent would be refused the same way;
				// another agent, with a list of its own, may take over.
				v.Class, v.AgentOnly = phase.Fatal, true
			}
		}
	}
	c.account(res)
	if cs.session != nil {
		v = cs.session.ended(res, v, c.cur.watcher.Session() != "")
	}
	return v
}

// account counts and records the attempt's usage, once.
func (c *call) account(res phase.Result) {
	if c.cur.accounted || c.cur.watcher == nil {
		return
	}
	c.cur.accounted = true
	session := c.cur.side.session
	own := session.usage(c.cur.watcher.Usage())
	if conf := c.cur.confined; conf != nil && conf.Keys != nil {
		own = throughEndpoint(own, conf.Keys.Count.Usage())
	}
	c.usage = c.usage.Add(own)
	how, id := session.attempt()
	if rec := c.a.opts.Recorder; rec != nil {
		rec.Usage(c.task, c.name, res.CallID, own, how, id)
	}
}

// throughEndpoint is an attempt's usage once its model endpoint's count
// is known: the requests and bytes it forwarded and, where its answers
// said them, the tokens as the API counted them (side requests included),
// which replace what the CLI's events said; the cost stays the CLI's.
func throughEndpoint(u agent.Usage, k confine.KeyUsage) agent.Usage {
	if k.Requests == 0 {
		return u
	}
	u.Requests, u.BytesSent, u.BytesReceived = int64(k.Requests), k.Sent, k.Received
	if k.Tokens != (confine.Tokens{}) {
		u.InputTokens, u.OutputTokens, u.CachedTokens = k.Input, k.Output, k.Cached
	}
	return u
}

// finish ends the call: the usage of an attempt that was not judged (an
// interruption) is counted, the answer is the events' text, and the call's
// usage is the run's.
func (c *call) finish(res *phase.Result, err error) {
	if c.cur.watcher != nil {
		c.account(*res)
		if text, ok := c.cur.watcher.Answer(); ok && err == nil {
			res.Stdout = text
		}
	}
	if c.a.add(c.task, c.usage) {
		c.log.Info("agent usage", "phase", c.name, "input_tokens", c.usage.InputTokens, "cached_tokens", c.usage.CachedTokens,
			"output_tokens", c.usage.OutputTokens, "cost_usd", c.usage.CostUSD, "requests", c.usage.Requests)
	}
}

// close lets go of what the call held.
func (c *call) close() {
	c.land()
	c.files.Close()
}

// ConfinedError is a failed call that the confinement explains.
type ConfinedError struct {
	Err  error
	Line string
}

func (e *ConfinedError) Error() string { return e.Err.Error() + "; " + e.Line }
func (e *ConfinedError) Unwrap() error { return e.Err }
