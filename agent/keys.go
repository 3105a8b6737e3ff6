package agent

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"peal/confine"
)

// Keys is how peal's model endpoint can hold a kind's model key
// (confine_key_proxy): the ways its CLI logs in, each held or not, and
// what peal holds for a run. A kind whose CLI takes no other base URL
// declares its logins only.
type Keys struct {
	// Logins are the ways the CLI authenticates, as docs/agents.md's table
	// shows them.
	Logins []Login
	// Hold is what peal's endpoint holds for the kind's calls on machine
	// m; nil: nothing, ever. It reads peal's environment and the user's
	// own configuration of the CLI (m.ReadFile), once, before a run's first
	// call: never the work tree's configuration, and never a file after a
	// call may have written it, so that no call can choose where peal
	// sends the key.
	Hold func(m Machine) Hold
}

// Login is one way a CLI authenticates.
type Login struct {
	Name string
	// Held: peal's endpoint holds its key, which no call then sees.
	Held bool
	// How says how peal points the CLI at its endpoint, or why the login
	// stays in the call's reach.
	How string
}

// Machine is what a kind's Hold reads: the home folder, peal's
// environment and the user's files.
type Machine struct {
	Home     string
	Getenv   func(string) string
	ReadFile func(path string) ([]byte, error)
}

// Hold is what peal's endpoint holds for a kind's calls: the APIs, each
// with its keys and upstream, and how a call is pointed at them. With no
// APIs, Why says why nothing is held.
type Hold struct {
	// Login names the login held (or found, when none is held).
	Login string
	APIs  []confine.HeldAPI
	Point func(base, placeholder map[string]string) (env, args []string)
	Why   string
}

// Held reports whether anything is held.
func (h Hold) Held() bool { return len(h.APIs) > 0 }

// held is an API of api's held with keys, sent to upstream (the base URL
// as the CLI takes it: "" for the API's own, root plus basePath), whose
// base URLs carry basePath.
func (api *API) held(name, upstream, basePath string, keys map[string]string) (confine.HeldAPI, error) {
	if upstream == "" {
		upstream = api.Root + basePath
	}
	u, err := url.Parse(strings.TrimSpace(upstream))
	if err != nil {
		return confine.HeldAPI{}, fmt.Errorf("its base URL %q cannot be read: %w", upstream, err)
	}
	h := confine.HeldAPI{Name: name, Upstream: u, BasePath: basePath, Keys: keys, Places: api.Places, Routes: api.routes(), Usage: api.Usage}
	if err := confine.CheckUpstream(u); err != nil {
		return confine.HeldAPI{}, err
	}
	return h, nil
}

// setVars are those of names set in m's environment, with their values.
func setVars(m Machine, names ...string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		if v := m.Getenv(n); v != "" {
			out[n] = v
		}
	}
	return out
}

// truthy tells whether a switch variable is on.
func truthy(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "0", "false", "no", "off":
		return false
	}
	return true
}

// envKeys is the hold of a CLI that reads its key from keyVars and its
// base URL from baseVar (its base URLs carrying basePath), unless one of
// unheld, another login's switch or credential, is set: the one login
// the CLI would then use is not a key peal can hold.
type envKeys struct {
	api      *API
	keyVars  []string
	unheld   []string
	baseVar  string
	basePath string
}

func (k envKeys) hold(m Machine) Hold {
	for _, v := range k.unheld {
		if truthy(m.Getenv(v)) {
			return Hold{Login: v, Why: v + " is set: a login whose credential its CLI uses beyond the model API"}
		}
	}
	keys := setVars(m, k.keyVars...)
	if len(keys) == 0 {
		return Hold{Why: "none of " + strings.Join(k.keyVars, ", ") + " is set: the CLI's login, if any, is kept in its own folder"}
	}
	a, err := k.api.held(k.api.Name, m.Getenv(k.baseVar), k.basePath, keys)
	if err != nil {
		return Hold{Login: loginOf(keys), Why: k.baseVar + ": " + err.Error()}
	}
	return Hold{Login: loginOf(keys), APIs: []confine.HeldAPI{a}, Point: func(base, _ map[string]string) ([]string, []string) {
		return []string{k.baseVar + "=" + base[k.api.Name]}, nil
	}}
}

// loginOf names the key variables held.
func loginOf(keys map[string]string) string {
	return strings.Join(slices.Sorted(maps.Keys(keys)), ", ")
}
