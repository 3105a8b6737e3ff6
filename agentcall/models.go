package agentcall

import (
	"errors"
	"fmt"

	"peal/agent"
	"peal/config"
	"peal/phase"
	"peal/tickets"
)

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
func (a *Agents) callModel(s *side, model, key string) callModel {
	if s.role == phase.RoleFallback && a.cfg.FallbackModel != "" {
		key = "fallback_model"
	}
	m := callModel{kind: s.kind.Name, model: model, key: key}
	if key != "" {
		m.setting = config.Describe(key, a.cfg.Sources)
	}
	return m
}

// ModelFor is the model of a call of the given phase on attempt n of its
// ticket (0: no ticket), and the key that set it (model, an escalation
// key, or "" when no model is set: the CLI's default): the base model, or,
// with escalation on, ticketflow's curve — the fixer from attempt 2 for
// address; the second opinion for triage and the worker for plan and
// execute from attempt 3. It depends on nothing else, so a dry run asks it
// exactly as a run does.
func ModelFor(cfg *config.Config, n int, phaseName phase.Name) (model, key string) {
	base := func() (string, string) {
		if cfg.Model == "" {
			return "", ""
		}
		return cfg.Model, "model"
	}
	if n == 0 || !cfg.EscalationEnabled {
		return base()
	}
	esc := tickets.ModelsFor(n, cfg.EscalationFixer, cfg.EscalationSecondOpinion, cfg.EscalationWorker)
	var escalated *string
	switch phaseName {
	case phase.Address:
		escalated, key = esc.Fixer, "escalation.fixer"
	case phase.Triage:
		escalated, key = esc.ReviewerSecondOpinion, "escalation.reviewer_second_opinion"
	case phase.Plan, phase.Execute:
		escalated, key = esc.Worker, "escalation.worker"
	}
	if escalated != nil && *escalated != "" {
		return *escalated, key
	}
	return base()
}

// ModelError: the API of an agent does not know the model a call asked
// for, and no agent of the run is left to ask for another. It names the
// model, the setting that chose it and the CLI's own words, and ends the
// run (exit 1): every later call would ask for the same model.
type ModelError struct {
	Model, Key, Setting string // Model "" for the CLI's default
	Kind                string
	Said                string // the CLI's words, quoted
}

// EndsRun: a model that does not exist is a configuration error.
func (e *ModelError) EndsRun() bool { return true }

func (e *ModelError) Error() string {
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
func (a *Agents) modelAware(role phase.Role, models map[phase.Role]callModel, classify phase.Classifier) phase.Classifier {
	return func(res phase.Result) phase.Verdict {
		v := classify(res)
		var unknown *agent.UnknownModelError
		if !errors.As(v.Err, &unknown) {
			return v
		}
		m := models[role]
		a.setMissing(role, m)
		v.Err = &ModelError{Model: m.model, Key: m.key, Setting: m.setting, Kind: unknown.Kind, Said: unknown.Said}
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

func (a *Agents) setMissing(role phase.Role, m callModel) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.missing == nil {
		a.missing = map[phase.Role]map[string]bool{}
	}
	if a.missing[role] == nil {
		a.missing[role] = map[string]bool{}
	}
	a.missing[role][m.id()] = true
}

func (a *Agents) isMissing(role phase.Role, m callModel) bool {
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
func (a *Agents) refusalAware(role phase.Role, models map[phase.Role]callModel, classify phase.Classifier) phase.Classifier {
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
func otherRole(role phase.Role) phase.Role {
	if role == phase.RolePrimary {
		return phase.RoleFallback
	}
	return phase.RolePrimary
}

func (a *Agents) setOutOfQuota(role phase.Role) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.outOfQuota == nil {
		a.outOfQuota = map[phase.Role]bool{}
	}
	a.outOfQuota[role] = true
}

func (a *Agents) isOutOfQuota(role phase.Role) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.outOfQuota[role]
}
