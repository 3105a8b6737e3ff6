package policy

import (
	"fmt"
	"slices"
	"strings"

	"peal/agent"
	"peal/config"
	"peal/confine"
	"peal/internal/safefs"
)

// The model keys of a run's agents (confine_key_proxy): where a kind and
// its login allow it, peal's model endpoint holds the key and a call gets
// a placeholder. What is held is read once, when the rules are made,
// before any call: from peal's environment and the user's own
// configuration of each CLI, never the work tree's. A CLI's configuration
// file may still be one an earlier run's call rewrote (its folder is the
// calls' to write): where a key goes and which variable is one are
// therefore never the file's to decide, but the user's (the API's own
// host, confine_network_allow, the kind's key variables,
// confine_env_pass). A key variable of a kind reaches its calls in clear
// only where nothing is held and its CLI's login uses it, or where
// confine_env_pass names it.

// keyHolds are what the model endpoint holds for the run's agent kinds.
type keyHolds struct {
	mode config.KeyProxy
	// byKind: each of the run's kinds' hold (none held: its Why).
	byKind map[string]agent.Hold
	// withheld are, per kind, the key variables of peal's environment its
	// calls do not get; inReach those they get in clear.
	withheld, inReach map[string][]string
	kinds             []string // the run's kinds, primary first
	// reach: what keeps a call from reading peal's own environment and
	// memory (Landlock's scope, a PID namespace); "" when nothing does.
	reach string
}

// maxCLIConfig caps what is read of a CLI's configuration file.
const maxCLIConfig = 1 << 20

// newKeyHolds finds what the endpoint holds for cfg's agent kinds on
// machine m whose kernel enforces sup; under confine_key_proxy = on, a
// kind or a machine where it cannot hold the key is an error.
func newKeyHolds(cfg *config.Config, sup confine.Support, m machine) (keyHolds, error) {
	h := keyHolds{mode: cfg.ConfineKeyProxy, byKind: map[string]agent.Hold{}, withheld: map[string][]string{}, inReach: map[string][]string{}}
	if h.mode == "" {
		h.mode = config.KeyProxyAuto
	}
	switch {
	case sup.Files:
		h.reach = "Landlock keeps a call out of peal's process"
	case sup.PIDNamespace:
		h.reach = "a call's PID namespace hides peal's process"
	}
	h.kinds = []string{cfg.AgentKind}
	if fk := cfg.FallbackKind(); fk != "" && fk != cfg.AgentKind {
		h.kinds = append(h.kinds, fk)
	}
	if h.mode == config.KeyProxyOff {
		return h, nil
	}
	allow, _ := confine.ParseAllow(confine.KeyNetworkAllow, cfg.ConfineNetworkAllow...) // read before, its error said
	am := agent.Machine{Home: m.home, Getenv: m.getenv, ReadFile: func(p string) ([]byte, error) { return safefs.ReadFile(p, maxCLIConfig) },
		Named: allow.Names, Passed: func(name string) bool { return passedBy(name, cfg.ConfineEnvPass) }}
	for _, name := range h.kinds {
		k, err := agent.Lookup(name)
		if err != nil {
			continue
		}
		hold := agent.Hold{Why: "its CLI (" + k.CLI + ") takes no other base URL for its API", Reach: k.Confine.Keys.Vars}
		if k.Confine.Keys.Hold != nil {
			hold = k.Confine.Keys.Hold(am)
		}
		h.byKind[name] = hold
		h.withheld[name], h.inReach[name] = keyVars(k, hold, m.getenv, cfg.ConfineEnvPass)
		if h.mode != config.KeyProxyOn {
			continue
		}
		if !hold.Held() {
			return h, fmt.Errorf("confine_key_proxy = on (set by %s), but peal cannot hold the model key of the %s agent: %s; set confine_key_proxy = auto to run with the key in its calls' reach",
				config.Describe("confine_key_proxy", cfg.Sources), name, hold.Why)
		}
		if h.reach == "" {
			return h, fmt.Errorf("confine_key_proxy = on (set by %s), but on this machine a call could read peal's own environment, which holds the key (%s); set confine_key_proxy = auto to run anyway",
				config.Describe("confine_key_proxy", cfg.Sources), sup)
		}
	}
	return h, nil
}

// keyVars are the key variables of kind set in peal's environment that
// its calls do not get (withheld), and those they get in clear (reach):
// where hold holds nothing, those of the login its CLI then uses; and
// those confine_env_pass names (by name: a pattern passes other
// variables, not a key). The placeholders of the variables held replace
// them anyway.
func keyVars(kind *agent.Kind, hold agent.Hold, getenv func(string) string, pass []string) (withheld, reach []string) {
	held := map[string]bool{}
	for _, a := range hold.APIs {
		for v := range a.Keys {
			held[v] = true
		}
	}
	for _, v := range kind.Confine.Keys.Vars {
		switch {
		case getenv(v) == "" || held[v]:
		case slices.Contains(pass, v) || !hold.Held() && slices.Contains(hold.Reach, v):
			reach = append(reach, v)
		default:
			withheld = append(withheld, v)
		}
	}
	return withheld, reach
}

// passedBy tells whether the confine_env_pass entries pass name.
func passedBy(name string, pass []string) bool {
	for _, p := range pass {
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(name, prefix) || p == name {
			return true
		}
	}
	return false
}

// withholds are the key variables kind's calls never get.
func (h keyHolds) withholds(kind *agent.Kind) []string { return h.withheld[kind.Name] }

// hold is a fresh hold of kind's keys for one call; nil when none is held.
func (h keyHolds) hold(kind *agent.Kind) *confine.KeyHold {
	kh, ok := h.byKind[kind.Name]
	if !ok || !kh.Held() {
		return nil
	}
	return &confine.KeyHold{APIs: kh.APIs, Point: kh.Point, Count: &confine.KeyCount{}}
}

// line says, for the start line, whose keys the endpoint holds and whose
// stay in the calls' reach.
func (h keyHolds) line() string {
	if h.mode == config.KeyProxyOff {
		return "the agents' model keys in their calls' environment (confine_key_proxy = off)"
	}
	var parts []string
	for _, name := range h.kinds {
		kh, ok := h.byKind[name]
		if !ok {
			continue
		}
		parts = append(parts, name+"'s "+h.said(name, kh, "its calls", name+"'s calls"))
	}
	if len(parts) == 0 {
		return ""
	}
	out := strings.Join(parts, "; ")
	if h.reach == "" && slices.ContainsFunc(h.kinds, func(n string) bool { return h.byKind[n].Held() }) {
		out += "; but a call could read peal's own environment on this machine, where the key is"
	}
	return out
}

// describe says what the endpoint holds of kind's login, for a
// description.
func (h keyHolds) describe(kind *agent.Kind) string {
	if h.mode == config.KeyProxyOff {
		return "its model key in its environment (confine_key_proxy = off)"
	}
	kh, ok := h.byKind[kind.Name]
	if !ok {
		return ""
	}
	return "its " + h.said(kind.Name, kh, "the calls", "them")
}

// said says what is held of kind's login and what its calls get, after
// "<kind>'s"; calls names them, and again after a list.
func (h keyHolds) said(kind string, kh agent.Hold, calls, again string) string {
	var out string
	reach := h.inReach[kind]
	switch {
	case kh.Held():
		var hosts []string
		for _, a := range kh.APIs {
			hosts = append(hosts, a.Upstream.Host)
		}
		out = "model key (" + kh.Login + ") held by peal's endpoint, which forwards to " + strings.Join(hosts, ", ") + ", " + calls + " given a placeholder"
		if kh.Why != "" {
			out += " (" + kh.Why + ")"
		}
		if len(reach) > 0 {
			out += ", " + strings.Join(reach, ", ") + " in " + calls + "' reach (confine_env_pass)"
		}
	case kh.Withheld:
		out = "model key (" + kh.Login + ") neither held nor passed to " + calls + ": " + kh.Why
	case len(reach) > 0:
		out = strings.Join(reach, ", ") + " in " + calls + "' reach (" + kh.Why + ")"
	default:
		out = "login in " + calls + "' reach (" + kh.Why + ")"
	}
	if w := h.withheld[kind]; len(w) > 0 {
		out += "; " + strings.Join(w, ", ") + " kept from " + again
	}
	return out
}
