package runner

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"peal/agent"
	"peal/config"
	"peal/confine"
	"peal/internal/safefs"
	"peal/phase"
	"peal/state"
)

// confinement is how a run confines the calls that run what an agent may
// have written: agent calls, the project's checks and
// worktree_setup_command (never stet, which reads, nor peal's own git). A
// call writes its work tree, its temporary folder, its CLI's folders, the
// build caches and confine_write_paths; reads everything but the secrets;
// inherits only the allowed variables; and reaches only its allowed hosts,
// through the run's proxy.
type confinement struct {
	mode    confine.Mode
	support confine.Support
	proxy   *confine.Proxy // nil under off
	home    string
	// base is what every call's policy starts from: the system read, the
	// secrets (and every kind's credentials) denied, the build caches and
	// confine_write_paths written, peal's own folders protected.
	base    confine.Policy
	allow   confine.Allow // confine_network_allow
	envPass []string      // confine_env_pass
	// tcp: the kernel's TCP rules apply (confine_tcp = proxy); loopback
	// are the loopback ports confine_network_allow names, open to a call
	// directly.
	tcp      bool
	loopback []uint16
	// unenforced: the calls get no Landlock rules, as on a kernel that
	// confines no files (tests of what the run does there).
	unenforced bool
	// make are the cache folders made, once, before the first confined
	// call (a run that starts no call writes nothing).
	make     []string
	makeOnce sync.Once
}

// Keys of the paths the run adds to a policy, as denials name them.
const (
	keyWorkTree  = "the task's work tree"
	keyMainTree  = "the main work tree (a task in a worktree writes its own)"
	keyState     = "peal's state folder"
	keyCaches    = "build caches"
	keyLinked    = "worktree_link (linked from the main work tree: confine_write_paths lets tasks write it)"
	keyIgnored   = "what git ignores in the work tree, linked into the run's worktree"
	credentialOf = "credentials of the agent kind "
)

// newConfinement makes the confinement of a run of cfg; nil under confine
// = off. Under on, a machine that cannot confine files is an error.
func newConfinement(cfg *config.Config, log *slog.Logger) (*confinement, error) {
	return confinementOn(cfg, log, confine.Probe())
}

// confinementOn is newConfinement on a machine whose kernel enforces sup.
func confinementOn(cfg *config.Config, log *slog.Logger, sup confine.Support) (*confinement, error) {
	mode, err := confine.ParseMode(cfg.Confine)
	if err != nil || mode == confine.Off {
		return nil, err
	}
	c := &confinement{mode: mode, support: sup, envPass: cfg.ConfineEnvPass, tcp: cfg.ConfineTCP != "any"}
	for _, e := range cfg.ConfineNetworkAllow {
		if port, ok := loopbackPort(e); ok {
			c.loopback = append(c.loopback, port)
		}
	}
	if lack := c.support.Lacks(); mode == confine.On && lack != "" {
		return nil, fmt.Errorf("confine = on (set by %s), but this machine %s; set confine = auto to run with what it can enforce, or off",
			config.Describe("confine", cfg.Sources), lack)
	}
	if c.allow, err = confine.ParseAllow(confine.KeyNetworkAllow, cfg.ConfineNetworkAllow...); err != nil {
		return nil, err
	}
	c.home, _ = os.UserHomeDir()
	c.base = confine.Base(c.home)
	c.base.Deny = append(c.base.Deny, confine.Paths(confine.KeyReadDeny, cfg.ConfineReadDeny...)...)
	for _, name := range agent.Names() {
		k, _ := agent.Lookup(name)
		c.base.Deny = append(c.base.Deny, confine.Paths(credentialOf+k.Name, c.paths(k.Confine.Credentials)...)...)
	}
	c.base.Protect = append(c.base.Protect, confine.Paths(keyState, cfg.StateDir, cfg.KnowledgeDir)...)
	if cfg.AgentLogDir != "" {
		c.base.Protect = append(c.base.Protect, confine.Path{Path: cfg.AgentLogDir, Key: "agent_log_dir"})
	}
	c.base.Write = append(c.base.Write, confine.Paths(keyCaches, c.caches()...)...)
	c.base.Write = append(c.base.Write, confine.Paths(confine.KeyWritePaths, cfg.ConfineWritePaths...)...)
	c.base.UnixSockets = confine.Paths(confine.KeyUnixSockets, cfg.ConfineUnixSockets...)
	c.proxy = confine.NewProxy(log)
	return c, nil
}

// files reports whether the kernel confines the calls' files.
func (c *confinement) files() bool { return c != nil && c.support.Files }

// line says, once at the start of a run, what is enforced and what is not.
func (c *confinement) line() string {
	if c == nil {
		return "confinement off (confine = off): agent calls and checks run with peal's whole environment, file system and network"
	}
	return fmt.Sprintf("confinement %s: %s; agent calls, checks and worktree_setup_command get the allowed environment and reach only their hosts, through peal's proxy",
		c.mode, c.support)
}

// paths makes each declared path full (agent.ExpandPath: ~/ is the home
// folder, ${VAR:-default} the folder a variable of peal's names); one that
// cannot be made full is left out.
func (c *confinement) paths(list []string) []string {
	out := make([]string, 0, len(list))
	for _, p := range list {
		if full, ok := agent.ExpandPath(p, c.home, os.Getenv); ok {
			out = append(out, full)
		}
	}
	return out
}

// caches are the build caches a confined call may write: where Go, npm,
// cargo, Maven and Gradle keep what they download and build, and the
// user's cache folder. A cache a confined call writes is one the user's
// own builds read later: what it could plant there is what any dependency
// it downloads could (docs/behaviour.md). The cache folder and, when Go is
// installed, Go's module cache are made when missing: a grant of a folder
// that does not exist grants nothing, and the tools make them on first use.
func (c *confinement) caches() []string {
	if c.home == "" {
		return nil
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		cache = filepath.Join(c.home, ".cache")
	}
	out := []string{cache}
	mod := os.Getenv("GOMODCACHE")
	if mod == "" {
		gopath := os.Getenv("GOPATH")
		if gopath == "" {
			gopath = filepath.Join(c.home, "go")
		}
		mod = filepath.Join(strings.Split(gopath, string(os.PathListSeparator))[0], "pkg", "mod")
	}
	c.make = []string{cache}
	if _, err := exec.LookPath("go"); err == nil {
		c.make = append(c.make, mod)
	}
	out = append(out, mod)
	if gc := os.Getenv("GOCACHE"); gc != "" {
		out = append(out, gc)
	}
	for _, rel := range []string{".npm", ".cargo/registry", ".cargo/git", ".m2/repository", ".gradle/caches", ".gradle/wrapper"} {
		out = append(out, filepath.Join(c.home, rel))
	}
	return out
}

// forCall is the confinement of one call at a site: an agent call of
// kind, or a check or worktree_setup_command when kind is nil. env is the
// environment peal gives the call on top of what it inherits (the kind's
// base URL may be there). nil under confine = off.
func (c *confinement) forCall(at *site, kind *agent.Kind, env []string) *confine.Call {
	if c == nil {
		return nil
	}
	c.makeOnce.Do(func() {
		for _, d := range c.make {
			os.MkdirAll(d, 0o755) // a folder that cannot be made is listed as missing, and grants nothing
		}
	})
	pol := c.base.Clone()
	pol.Write = append(pol.Write, confine.Path{Path: at.tree, Key: keyWorkTree})
	if g, err := confine.FindGit(at.tree); err == nil {
		write, protect := g.Paths(false)
		pol.Write = append(pol.Write, write...)
		pol.Protect = append(pol.Protect, protect...)
	}
	if at.main != "" {
		pol.Protect = append(pol.Protect, confine.Path{Path: at.main, Key: keyMainTree})
		for _, p := range at.linked {
			pol.Protect = append(pol.Protect, confine.Path{Path: p, Key: keyLinked})
		}
	}
	pol.Write = append(pol.Write, confine.Paths(keyIgnored, at.writable...)...)
	if c.tcp {
		pol.TCP = &confine.TCP{Connect: slices.Clone(c.loopback)}
	}
	call := &confine.Call{Mode: c.mode, Policy: pol, Proxy: c.proxy, Allow: c.allow, EnvPass: slices.Clone(c.envPass)}
	if c.unenforced {
		call.Mode = confine.Off // no rules, as where the kernel has none
	}
	if kind == nil {
		return call
	}
	own := credentialOf + kind.Name
	call.Policy.Deny = slices.DeleteFunc(call.Policy.Deny, func(p confine.Path) bool { return p.Key == own })
	for _, d := range c.paths(kind.Confine.Folders) {
		os.MkdirAll(d, 0o700) // the CLI makes it itself when it can; a grant of a missing folder grants nothing
		call.Policy.Write = append(call.Policy.Write, confine.Path{Path: d, Key: kind.Name + "'s folders"})
	}
	call.EnvPass = append(call.EnvPass, kind.Confine.Env...)
	call.EnvPass = append(call.EnvPass, kind.Confine.BaseURLs...)
	hosts := slices.Clone(kind.Confine.Hosts)
	for _, name := range kind.Confine.BaseURLs {
		host, port, ok := baseURLHost(lookupEnv(env, name))
		if !ok {
			continue
		}
		hosts = append(hosts, net.JoinHostPort(host, port))
		if p, ok := loopbackPort(net.JoinHostPort(host, port)); ok && call.Policy.TCP != nil {
			// A loopback API (a local model): some clients never send a
			// loopback request through a proxy, so the port is open to
			// the call directly too.
			call.Policy.TCP.Connect = append(call.Policy.TCP.Connect, p)
		}
	}
	if allow, err := call.Allow.With(kind.Name+"'s API", hosts...); err == nil {
		call.Allow = allow
	}
	return call
}

// lookupEnv is the value of name in env (the call's own variables, the
// later winning), else in peal's environment.
func lookupEnv(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return os.Getenv(name)
}

// baseURLHost is the host and port a base URL names.
func baseURLHost(raw string) (host, port string, ok bool) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Hostname() == "" {
		return "", "", false
	}
	port = u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return u.Hostname(), port, true
}

// confineCommand confines a check or worktree_setup_command before it
// starts: the policy of the site its folder lies in, and a temporary
// folder of its own in the state folder (the one it inherits is not its to
// write).
func (r *run) confineCommand(spec *phase.Spec) {
	if r.confined == nil {
		return
	}
	spec.TempRoot = filepath.Join(r.cfg.StateDir, "tmp")
	spec.Confine = r.confined.forCall(r.siteOf(spec.Dir), nil, spec.Env)
}

// siteOf is the site whose work tree holds dir: a task's worktree, or the
// work tree.
func (r *run) siteOf(dir string) *site {
	if safefs.Within(dir, r.home.tree) {
		return r.home
	}
	root := r.trees.Root()
	if rel, err := filepath.Rel(root, dir); err == nil && filepath.IsLocal(rel) {
		name, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
		main := r.home.tree
		if r.main != nil {
			main = r.main.tree
		}
		return &site{tree: filepath.Join(root, name), main: main, linked: r.linkedPaths()}
	}
	return r.home
}

// callEnd is how a call ended, for noteConfined.
type callEnd int

const (
	endSucceeded callEnd = iota
	// endFailed: a failure whose cause the confinement may be.
	endFailed
	// endFailedSaid: a failure that says its own cause (an account out
	// of quota, a prompt over the window, a model that does not exist, a
	// key refused, a rate limit).
	endFailedSaid
)

// noteConfined records what the confinement refused a call that ended (its
// result res; call its confinement, dir its folder): the connections the
// proxy refused it, and, when it failed, the line that explains the
// failure by the confinement, which it returns ("" when nothing points at
// it), with whether the call's output bore it out (a denial in it, or the
// refused host named). A refusal the output does not name is only the
// likeliest cause of a failure that names none (a side request's refusal
// is no cause): it is given, never for a failure that says its own cause.
// The line is logged too.
func (r *run) noteConfined(call *confine.Call, dir string, task int, res phase.Result, end callEnd) (line string, borne bool) {
	if r.confined == nil || call == nil || res.CallID == "" {
		return "", false
	}
	refused, count := r.confined.proxy.Refusals(res.CallID)
	r.confined.proxy.Forget(res.CallID)
	if end != endSucceeded {
		line = confine.Explain(&call.Policy, dir, strings.Split(res.Stdout+"\n"+res.Stderr, "\n"), refused)
		borne = line != ""
	}
	if line == "" && end == endFailed {
		line = confine.LastRefusal(refused)
	}
	if count == 0 && line == "" {
		return "", false
	}
	ev := state.Event{Ev: state.EvConfined, Time: r.now().UTC(), Task: state.TaskOf(task), Call: res.CallID, Message: line, RefusedCount: count}
	for _, ref := range refused {
		if len(ev.Refused) < 16 && !slices.Contains(ev.Refused, ref.Host) {
			ev.Refused = append(ev.Refused, ref.Host)
		}
	}
	r.journal.Add(ev)
	switch {
	case borne:
		r.log.Warn("the confinement refused what the call needed: "+line, "phase", res.Phase, "task", task, "call", res.CallID)
	case line != "":
		r.log.Warn("the call failed without saying why, after the confinement refused it a connection: "+line, "phase", res.Phase, "task", task, "call", res.CallID)
	}
	return line, borne
}

// confinedError is a failed call that the confinement explains.
type confinedError struct {
	err  error
	line string
}

func (e *confinedError) Error() string { return e.err.Error() + "; " + e.line }
func (e *confinedError) Unwrap() error { return e.err }

// confinementNote is what the run record says of the run's confinement.
func (r *run) confinementNote() string {
	if r.confined == nil {
		return "off"
	}
	return r.confined.mode.String() + ": " + r.confined.support.String()
}

// ConfinementPolicy says, a line each, what the confinement of cfg gives
// each kind of call on this machine: what the kernel enforces, then what an
// agent call of each of the run's kinds, and a check or
// worktree_setup_command, may write and reach, and the variables it keeps.
// It starts nothing and writes nothing. `peal doctor`, `peal config` and
// the dry run show it.
func ConfinementPolicy(cfg *config.Config) ([]string, error) {
	c, err := describedConfinement(cfg)
	if err != nil || c == nil {
		return []string{"confine = off: agent calls and checks run with peal's whole environment, file system and network"}, err
	}
	lines := []string{fmt.Sprintf("confine = %s: %s", c.mode, c.support)}
	kinds := []string{cfg.AgentKind}
	if fk := cfg.FallbackKind(); fk != "" && fk != cfg.AgentKind {
		kinds = append(kinds, fk)
	}
	writes := func(extra []string) string {
		w := append([]string{"its work tree", "its temporary folder"}, extra...)
		w = append(w, "the build caches ("+strings.Join(pathsOf(c.base.Write, keyCaches), ", ")+")")
		if p := pathsOf(c.base.Write, confine.KeyWritePaths); len(p) > 0 {
			w = append(w, "confine_write_paths ("+strings.Join(p, ", ")+")")
		}
		return strings.Join(w, ", ")
	}
	hosts := func(extra []string) string {
		h := append(slices.Clone(extra), cfg.ConfineNetworkAllow...)
		if len(h) == 0 {
			return "none"
		}
		return strings.Join(h, ", ")
	}
	for _, name := range kinds {
		k, err := agent.Lookup(name)
		if err != nil {
			continue
		}
		hostList := slices.Clone(k.Confine.Hosts)
		for _, v := range k.Confine.BaseURLs {
			hostList = append(hostList, "the host of $"+v)
		}
		env := append(slices.Clone(k.Confine.Env), k.Confine.BaseURLs...)
		env = append(env, cfg.ConfineEnvPass...)
		lines = append(lines, fmt.Sprintf("%s agent calls write %s; reach %s; keep the basic variables and %s",
			name, writes(c.paths(k.Confine.Folders)), hosts(hostList), listOr(env, "no other")))
	}
	lines = append(lines, fmt.Sprintf("checks and worktree_setup_command write %s; reach %s; keep the basic variables and %s",
		writes(nil), hosts(nil), listOr(cfg.ConfineEnvPass, "no other")),
		"never read: "+strings.Join(pathsOf(c.base.Deny, confine.KeySecret, confine.KeyReadDeny), ", ")+", and the other agent kinds' credentials",
		"never written: the repository's .git, peal's state folder, the main work tree from a worktree, another task's worktree")
	return lines, nil
}

// describedConfinement is the confinement of cfg without the run's proxy:
// what it would be, for a description.
func describedConfinement(cfg *config.Config) (*confinement, error) {
	c, err := newConfinement(cfg, nil)
	if c != nil {
		c.proxy = nil
	}
	return c, err
}

// pathsOf are the paths of list put there under one of keys.
func pathsOf(list []confine.Path, keys ...string) []string {
	var out []string
	for _, p := range list {
		if slices.Contains(keys, p.Key) {
			out = append(out, p.Path)
		}
	}
	return out
}

func listOr(list []string, none string) string {
	if len(list) == 0 {
		return none
	}
	return strings.Join(list, ", ")
}

// loopbackPort is the port of hostport when it names a loopback host
// (localhost, 127.0.0.0/8, ::1) with a port.
func loopbackPort(hostport string) (uint16, bool) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return 0, false
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return 0, false
	}
	n, err := strconv.ParseUint(port, 10, 16)
	return uint16(n), err == nil && n > 0
}

// guardOf is the run's watch of what git runs, as the git client and the
// review see it: the watch is made once the run starts, after the run.
type guardOf struct{ r *run }

func (g guardOf) Check() error { return g.r.guard.Check() }
func (g guardOf) Accept()      { g.r.guard.Accept() }
