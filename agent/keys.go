package agent

import (
	"fmt"
	"maps"
	"net"
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
	// Vars are the variables of its Confine.Env that carry a model key or
	// a login's token. A call gets none of them from peal's environment
	// but the placeholders of those peal holds, or, where nothing is
	// held, those of the login its CLI then uses (Hold.Reach); and those
	// confine_env_pass names.
	Vars []string
	// Hold is what peal's endpoint holds for the kind's calls on machine
	// m; nil: nothing, ever, and every variable of Vars set is in the
	// calls' reach. It reads peal's environment and the user's own
	// configuration of the CLI (m.ReadFile), once, before a run's first
	// call, never the work tree's. A file it reads may still be one an
	// earlier run's call wrote (a CLI's folder is the call's to write):
	// what it takes from a file never decides where a key goes, nor which
	// variable is one (Machine.upstream, Machine.keyVar).
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
// environment and the user's files; and what the user chose in peal's
// configuration.
type Machine struct {
	Home     string
	Getenv   func(string) string
	ReadFile func(path string) ([]byte, error)
	// Named tells whether confine_network_allow names host:port itself
	// (not through a wildcard); nil: it names none.
	Named func(hostport string) bool
	// Passed tells whether confine_env_pass passes a variable to the
	// calls; nil: it passes none.
	Passed func(name string) bool
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
	// Reach are the variables of Keys.Vars the calls get in clear when
	// nothing is held: those of the login the CLI then uses.
	Reach []string
	// Withheld: the login is a key of peal's environment that peal will
	// not send where the CLI's configuration would have it go (Why says
	// why and what to set), so its calls get neither the key nor a
	// placeholder.
	Withheld bool
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

// upstream is the base URL a held key of api goes to when the CLI reads
// it from raw, a value of what (a file a call may have written, named in
// the error): the API's own host, one of own (hosts the kind declares for
// that provider), or a host confine_network_allow names; "" is the API's
// own address (root plus basePath). A base URL elsewhere is an error:
// peal neither holds nor passes that key.
func (m Machine) upstream(api *API, what, raw, basePath string, own ...string) (string, error) {
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("its base URL %q (%s) cannot be read", raw, what)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	hostport := net.JoinHostPort(u.Hostname(), port)
	for _, r := range append([]string{api.Root}, own...) {
		if o, err := url.Parse(r); err == nil && u.Scheme == "https" && o.Scheme == "https" && strings.EqualFold(hostport, net.JoinHostPort(o.Hostname(), "443")) {
			return raw, nil
		}
	}
	if m.Named != nil && m.Named(hostport) {
		return raw, nil
	}
	return "", fmt.Errorf("its base URL names %s (%s), which is neither the %s API's own host nor named on confine_network_allow, "+
		"so peal neither holds nor passes the key (a call may write that file): name %s on confine_network_allow if that host is yours",
		hostport, what, api.Name, hostport)
}

// keyVar tells whether peal may read name, a variable a CLI's
// configuration file names as a key's: one of the kind's key variables
// (vars), or one confine_env_pass passes to the calls anyway. Any other
// variable of peal's environment is neither read nor sent.
func (m Machine) keyVar(name string, vars []string) bool {
	return slices.Contains(vars, name) || m.Passed != nil && m.Passed(name)
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
	api     *API
	keyVars []string
	unheld  []string
	// reach are the variables each login of unheld uses, which its calls
	// then get.
	reach    map[string][]string
	baseVar  string
	basePath string
}

func (k envKeys) hold(m Machine) Hold {
	for _, v := range k.unheld {
		if truthy(m.Getenv(v)) {
			return Hold{Login: v, Why: v + " is set: a login whose credential its CLI uses beyond the model API", Reach: k.reach[v]}
		}
	}
	keys := setVars(m, k.keyVars...)
	if len(keys) == 0 {
		return Hold{Why: "none of " + strings.Join(k.keyVars, ", ") + " is set: the CLI's login, if any, is kept in its own folder"}
	}
	// The base URL comes from peal's environment: the user's.
	a, err := k.api.held(k.api.Name, m.Getenv(k.baseVar), k.basePath, keys)
	if err != nil {
		return Hold{Login: loginOf(keys), Withheld: true,
			Why: k.baseVar + ": " + err.Error() + "; set confine_key_proxy = off to hand the key to the calls"}
	}
	return Hold{Login: loginOf(keys), APIs: []confine.HeldAPI{a}, Point: func(base, _ map[string]string) ([]string, []string) {
		return []string{k.baseVar + "=" + base[k.api.Name]}, nil
	}}
}

// loginOf names the key variables held.
func loginOf(keys map[string]string) string {
	return strings.Join(slices.Sorted(maps.Keys(keys)), ", ")
}
