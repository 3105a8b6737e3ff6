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
// configuration of each CLI, never from a file a call could have written.

// keyHolds are what the model endpoint holds for the run's agent kinds.
type keyHolds struct {
	mode config.KeyProxy
	// byKind: each of the run's kinds' hold (none held: its Why).
	byKind map[string]agent.Hold
	kinds  []string // the run's kinds, primary first
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
	h := keyHolds{mode: cfg.ConfineKeyProxy, byKind: map[string]agent.Hold{}}
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
	am := agent.Machine{Home: m.home, Getenv: m.getenv, ReadFile: func(p string) ([]byte, error) { return safefs.ReadFile(p, maxCLIConfig) }}
	for _, name := range h.kinds {
		k, err := agent.Lookup(name)
		if err != nil {
			continue
		}
		hold := agent.Hold{Why: "its CLI (" + k.CLI + ") takes no other base URL for its API"}
		if k.Confine.Keys.Hold != nil {
			hold = k.Confine.Keys.Hold(am)
		}
		h.byKind[name] = hold
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
		if kh.Held() {
			parts = append(parts, name+"'s model key ("+kh.Login+") held by peal's endpoint, its calls given a placeholder")
		} else {
			parts = append(parts, name+"'s login in its calls' reach ("+kh.Why+")")
		}
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
	switch {
	case !ok:
		return ""
	case kh.Held():
		var hosts []string
		for _, a := range kh.APIs {
			hosts = append(hosts, a.Upstream.Host)
		}
		return "its model key (" + kh.Login + ") held by peal's endpoint, which forwards to " + strings.Join(hosts, ", ")
	}
	return "its login in its reach: " + kh.Why
}
