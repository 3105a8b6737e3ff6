// Package policy owns the confinement policy of a run: every rule of what
// an agent call, a check or worktree_setup_command may write, read and
// reach, built in one place from the configuration, the agent kinds'
// declarations (agent.Kind.Confine) and the site the call runs at; and the
// descriptions of it (the start line, peal doctor, peal config, the dry
// run), derived from the policy itself. Package confine enforces what it
// builds, for one child at a time.
package policy

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"peal/agent"
	"peal/config"
	"peal/confine"
	"peal/internal/safefs"
	"peal/policy/secrets"
)

// Site is what the policy of a call needs of where it runs: the top of the
// tree its calls may write; for a worktree, the main work tree's top and
// the worktree_link paths there (none of which its calls may write); the
// paths of the main work tree its calls may write too (what git ignores
// there, linked into the run's worktree).
type Site struct {
	Tree     string
	Main     string
	Linked   []string
	Writable []string
	// GitDir and Common are the tree's git folder and the repository's,
	// as peal's git found them before any call (gitrepo.Repo.GitDir); ""
	// when unknown: they are then read from the tree's .git.
	GitDir, Common string
}

// Rules are how a run confines the calls that run what an agent may
// have written: agent calls and the check that their CLI can authenticate;
// the project's checks, worktree_setup_command, post_run_commands,
// stet_commands and the repository's hooks, all as checks (never stet,
// which reads, nor peal's own git, which runs no hook and names its
// folders). A
// call writes its work tree, its temporary folder, its CLI's folders, the
// build caches and confine_write_paths; reads everything but the secrets;
// inherits only the allowed variables; reads the git configuration peal
// writes for it (gitconfig.go), never the user's; and reaches only its
// allowed hosts, through the run's proxy.
type Rules struct {
	mode    confine.Mode
	support confine.Support
	proxy   *confine.Proxy // nil under off
	home    string
	// base is what every call's policy starts from: the system read, the
	// secrets (and every kind's credentials) denied, the build caches and
	// confine_write_paths written, peal's own folders protected.
	base    confine.Access
	allow   confine.Allow // confine_network_allow
	envPass []string      // confine_env_pass
	// cacheVars are the variables the caches' paths were read from
	// (caches), which the calls keep.
	cacheVars []string
	// tcp: the kernel's TCP rules apply (confine_tcp = proxy); loopback
	// are the loopback ports confine_network_allow names, open to a call
	// directly.
	tcp      bool
	loopback []uint16
	// unenforced: the calls get no Landlock rules, as on a kernel that
	// confines no files (tests of what the run does there).
	unenforced bool
	// describing: the rules only describe a run's (no proxy); their calls
	// never start, so no folder is made for them.
	describing bool
	// postRunUnconfined: post_run_commands run unconfined
	// (post_run_confined = false), which the start line says.
	postRunUnconfined bool
	// make are the cache folders made, once, before the first confined
	// call (a run that starts no call writes nothing): those whose tool is
	// on PATH.
	make     []string
	makeOnce sync.Once
	// hidden are the real paths of the folders the calls read by allow
	// list (base.Hide); agents are the install folders of the run's agent
	// CLIs there, which agent calls read.
	hidden []string
	agents []string
	// denied are the real paths of base.Deny.
	denied []string
	// gitCredentials: confine_git_credentials = allow; sources are the
	// configuration's, to name where a key is set.
	gitCredentials bool
	sources        map[string]config.Source
	// getenv reads peal's environment (a test's own, in tests).
	getenv func(string) string
	// gitPass are the settings confine_git_pass adds to those of the
	// user's git configuration the calls' git gets; gitConfig is that
	// configuration (Repository), written at gitConfigPath before the
	// first call; gitEnv are the variables that give it to every call.
	gitPass       []string
	gitConfig     []byte
	gitConfigPath string
	gitEnv        []string
	log           *slog.Logger
	// keys are the model keys peal's endpoint holds for the run's agents.
	keys keyHolds
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

// New makes the rules of a run of cfg; nil under confine = off. Under on,
// a machine that cannot confine files is an error.
func New(cfg *config.Config, log *slog.Logger) (*Rules, error) {
	return buildRules(cfg, log, probing(cfg), true, thisMachine())
}

// probing is what this machine enforces, found by confine.Probe as the
// rules are made (it waits on the launcher it starts, the rules' making
// on the file system: one goes on while the other waits); none is asked
// under confine = off.
func probing(cfg *config.Config) func() confine.Support {
	if cfg.Confine == config.ConfineOff {
		return func() confine.Support { return confine.Support{} }
	}
	probed := make(chan confine.Support, 1)
	go func() { probed <- confine.Probe() }()
	return sync.OnceValue(func() confine.Support { return <-probed })
}

// On is New on a machine whose kernel enforces sup.
func On(cfg *config.Config, log *slog.Logger, sup confine.Support) (*Rules, error) {
	return newRules(cfg, log, sup, true)
}

// machine is what the rules read of the machine peal runs on: its home
// folder, its environment, the user peal runs as. Tests give their own.
type machine struct {
	home   string
	getenv func(string) string
	euid   int
}

// thisMachine is the machine peal runs on.
func thisMachine() machine {
	home, _ := os.UserHomeDir()
	return machine{home: home, getenv: os.Getenv, euid: os.Geteuid()}
}

// newRules makes the rules of cfg on a machine whose kernel enforces sup,
// with the run's proxy when proxy is set (a description needs none).
func newRules(cfg *config.Config, log *slog.Logger, sup confine.Support, proxy bool) (*Rules, error) {
	return newRulesOn(cfg, log, sup, proxy, thisMachine())
}

// newRulesOn is newRules on the machine m.
func newRulesOn(cfg *config.Config, log *slog.Logger, sup confine.Support, proxy bool, m machine) (*Rules, error) {
	return buildRules(cfg, log, func() confine.Support { return sup }, proxy, m)
}

// buildRules is newRulesOn on a machine whose kernel enforces what support
// says, asked once the rules that do not depend on it are made.
func buildRules(cfg *config.Config, log *slog.Logger, support func() confine.Support, proxy bool, m machine) (*Rules, error) {
	mode, err := confine.ParseMode(string(cfg.Confine))
	if err != nil || mode == confine.Off {
		return nil, err
	}
	c := &Rules{mode: mode, envPass: cfg.ConfineEnvPass, tcp: cfg.ConfineTCP != config.TCPAny,
		postRunUnconfined: !cfg.PostRunConfined && len(cfg.PostRunCommands) > 0,
		gitCredentials:    cfg.ConfineGitCredentials == config.GitCredentialsAllow, sources: cfg.Sources, getenv: m.getenv,
		gitPass: cfg.ConfineGitPass, log: log}
	if err := checkGitPass(cfg.ConfineGitPass, cfg.Sources); err != nil {
		return nil, err
	}
	if cfg.StateDir != "" {
		c.gitConfigPath = filepath.Join(cfg.StateDir, "tmp", "calls.gitconfig")
	}
	for _, e := range cfg.ConfineNetworkAllow {
		if port, ok := loopbackPort(e); ok {
			c.loopback = append(c.loopback, port)
		}
	}
	if c.allow, err = confine.ParseAllow(confine.KeyNetworkAllow, cfg.ConfineNetworkAllow...); err != nil {
		return nil, err
	}
	c.home = m.home
	c.base = confine.Base(c.home)
	// The secrets where the tools' variables put them (Base has them where
	// they lie by default).
	for _, p := range secrets.In(c.home, c.getenv) {
		if !slices.ContainsFunc(c.base.Deny, func(d confine.Path) bool { return d.Path == p }) {
			c.base.Deny = append(c.base.Deny, confine.Path{Path: p, Key: confine.KeySecret})
		}
	}
	c.base.Deny = append(c.base.Deny, confine.Paths(keyRootSecret, systemSecrets(m.euid)...)...)
	c.base.Deny = append(c.base.Deny, confine.Paths(confine.KeyReadDeny, cfg.ConfineReadDeny...)...)
	for _, name := range agent.Names() {
		k, _ := agent.Lookup(name)
		c.base.Deny = append(c.base.Deny, confine.Paths(credentialOf+k.Name, c.paths(k.Confine.Credentials)...)...)
	}
	if cfg.ConfigPath != "" {
		if abs, err := filepath.Abs(cfg.ConfigPath); err == nil {
			c.base.Deny = append(c.base.Deny, confine.Path{Path: abs, Key: keyConfigFile})
		}
	}
	// The home folder, and other users', are read by allow list: the
	// toolchains, git's configuration, confine_read_paths (and, per call,
	// the repository and the kind's folders).
	c.base.Hide = hiddenFolders(c.home)
	c.hidden, c.denied = realPaths(c.base.Hide), realPaths(c.base.Deny)
	c.agents = installFolders([]string{cfg.AgentPath, cfg.FallbackPath}, c.hidden)
	tools := toolchains(c.home, c.getenv("PATH"), c.getenv, c.hidden)
	c.base.Read = append(c.base.Read, outsideDenied(confine.Paths(keyToolchains, tools...), c.denied)...)
	c.base.Read = append(c.base.Read, outsideDenied(confine.Paths(keyGitConfig, beneathHidden(c.paths(gitFiles), c.hidden)...), c.denied)...)
	c.base.Read = append(c.base.Read, confine.Paths(confine.KeyReadPaths, cfg.ConfineReadPaths...)...)
	c.base.Protect = append(c.base.Protect, confine.Paths(keyState, slices.DeleteFunc([]string{cfg.StateDir, cfg.KnowledgeDir}, func(p string) bool { return p == "" })...)...)
	if cfg.AgentLogDir != "" {
		c.base.Protect = append(c.base.Protect, confine.Path{Path: cfg.AgentLogDir, Key: "agent_log_dir"})
	}
	c.base.Write = append(c.base.Write, confine.Paths(keyCaches, c.caches()...)...)
	c.base.Write = append(c.base.Write, confine.Paths(confine.KeyWritePaths, cfg.ConfineWritePaths...)...)
	c.base.UnixSockets = confine.Paths(confine.KeyUnixSockets, cfg.ConfineUnixSockets...)
	c.support = support()
	if !cfg.ConfineNetworkNamespace {
		c.support = c.support.WithoutNetNamespace()
	}
	if lack := c.support.Lacks(); mode == confine.On && lack != "" {
		return nil, fmt.Errorf("confine = on (set by %s), but this machine %s; set confine = auto to run with what it can enforce, or off",
			config.Describe("confine", cfg.Sources), lack)
	}
	if c.keys, err = newKeyHolds(cfg, c.support, m); err != nil {
		return nil, err
	}
	if proxy {
		c.proxy = confine.NewProxy(log)
		confine.MakeAhead(c.support)
	} else {
		c.describing = true
	}
	return c, nil
}

// Files reports whether the kernel confines the calls' files.
func (c *Rules) Files() bool { return c != nil && c.support.Files }

// Line says, once at the start of a run, what is enforced and what is not.
func (c *Rules) Line() string {
	if c == nil {
		return "confinement off (confine = off): agent calls and checks run with peal's whole environment, file system and network"
	}
	line := fmt.Sprintf("confinement %s: %s; %s get the allowed environment and reach only their hosts, through peal's proxy",
		c.mode, c.support, Confined)
	if keys := c.keys.line(); keys != "" {
		line += "; " + keys
	}
	if c.postRunUnconfined {
		line += "; post_run_commands run unconfined (post_run_confined = false), with peal's whole environment"
	}
	return line
}

// LogStart logs, at the start of a run, the confinement's line (Line: a
// warning when the kernel confines no files) and each socket a confined
// call could still use to run what it likes on this machine.
func (c *Rules) LogStart(log *slog.Logger) {
	if c != nil && !c.Files() {
		log.Warn(c.Line())
	} else {
		log.Info(c.Line())
	}
	if c == nil {
		return
	}
	for _, sock := range confine.ReachableSockets() {
		log.Warn("a confined call can connect to "+sock+", and whoever uses it runs what it likes on this machine: no confinement holds against it on this kernel (it needs Landlock ABI 9); run peal as a user who cannot use it",
			"socket", sock)
	}
}

// Confined names every process a run confines (docs/behaviour.md has their
// table).
const Confined = "agent calls, the agents' authentication check, checks, worktree_setup_command, post_run_commands, stet_commands and the repository's hooks"

// PostRunConfined reports whether the run confines its post_run_commands.
func (c *Rules) PostRunConfined() bool { return c != nil && !c.postRunUnconfined }

// paths makes each declared path full (agent.ExpandPath: ~/ is the home
// folder, ${VAR:-default} the folder a variable of peal's names); one that
// cannot be made full is left out.
func (c *Rules) paths(list []string) []string {
	out := make([]string, 0, len(list))
	for _, p := range list {
		if full, ok := agent.ExpandPath(p, c.home, c.getenv); ok {
			out = append(out, full)
		}
	}
	return out
}

// ForCall is the confinement of one call at a site: an agent call of
// kind, or a check or worktree_setup_command when kind is nil. env is the
// environment peal gives the call on top of what it inherits (the kind's
// base URL may be there). nil under confine = off.
func (c *Rules) ForCall(at Site, kind *agent.Kind, env []string) *confine.Call {
	if c == nil {
		return nil
	}
	c.makeOnce.Do(func() {
		for _, d := range c.make {
			if !c.describing {
				os.MkdirAll(d, 0o755) // a folder that cannot be made is listed as missing, and grants nothing
			}
		}
		c.gitEnv = c.writeGitConfig()
	})
	pol := c.base.Clone()
	pol.Write = append(pol.Write, confine.Path{Path: at.Tree, Key: keyWorkTree})
	g, err := confine.Git{WorkTree: at.Tree, Dir: at.GitDir, Common: at.Common, Linked: at.GitDir != at.Common}, error(nil)
	if at.GitDir == "" || at.Common == "" {
		// A description, or a site whose git is not resolved: the tree's
		// .git says (a call's policy never comes from it in a run).
		g, err = confine.FindGit(at.Tree)
	}
	if err == nil {
		write, protect := g.Paths(false)
		pol.Write = append(pol.Write, write...)
		pol.Protect = append(pol.Protect, protect...)
		pol.Read = append(pol.Read, c.readable(keyRepository, g.Common, g.Dir)...)
	}
	if at.Main != "" {
		pol.Read = append(pol.Read, c.readable(keyRepository, at.Main)...)
		pol.Protect = append(pol.Protect, confine.Path{Path: at.Main, Key: keyMainTree})
		for _, p := range at.Linked {
			// A linked folder is written only where confine_write_paths
			// says so.
			if !slices.ContainsFunc(c.base.Write, func(w confine.Path) bool { return w.Key == confine.KeyWritePaths && safefs.Within(p, w.Path) }) {
				pol.Protect = append(pol.Protect, confine.Path{Path: p, Key: keyLinked})
			}
		}
	}
	for _, p := range realWithin(at.Writable, at.Main) {
		pol.Write = append(pol.Write, confine.Path{Path: p, Key: keyIgnored, Data: true})
	}
	if c.tcp {
		pol.TCP = &confine.TCP{Connect: slices.Clone(c.loopback)}
	}
	call := &confine.Call{Mode: c.mode, Access: pol, Proxy: c.proxy, Allow: c.allow, EnvPass: append(slices.Clone(c.cacheVars), c.envPass...), Env: slices.Clone(c.gitEnv)}
	if c.unenforced {
		call.Mode = confine.Off // no rules, as where the kernel has none
	}
	sup := c.support // confine_network_namespace = false: less than Probe turns on
	call.Support = &sup
	if kind == nil {
		return call
	}
	own := credentialOf + kind.Name
	call.Access.Deny = slices.DeleteFunc(call.Access.Deny, func(p confine.Path) bool { return p.Key == own })
	for _, d := range c.paths(kind.Confine.Folders) {
		if !c.describing {
			os.MkdirAll(d, 0o700) // the CLI makes it itself when it can; a grant of a missing folder grants nothing
		}
		call.Access.Write = append(call.Access.Write, confine.Path{Path: d, Key: kind.Name + "'s folders"})
	}
	call.Access.Read = append(call.Access.Read, confine.Paths(kind.Name+"'s configuration", c.paths(kind.Confine.Reads)...)...)
	call.Access.Read = append(call.Access.Read, confine.Paths(keyAgentInstall, c.agents...)...)
	call.EnvPass = append(call.EnvPass, kind.Confine.Env...)
	call.EnvPass = append(call.EnvPass, kind.Confine.BaseURLs...)
	call.Withhold = c.keys.withholds(kind)
	hosts := slices.Clone(kind.Confine.Hosts)
	baseURLs := kind.Confine.BaseURLs
	if !c.describing && !c.unenforced {
		if call.Keys = c.keys.hold(kind); call.Keys != nil {
			// The call's base URLs name peal's endpoint; their hosts are
			// peal's to reach.
			baseURLs = nil
		}
	}
	for _, name := range baseURLs {
		host, port, ok := baseURLHost(lookupEnv(env, name))
		if !ok {
			continue
		}
		hosts = append(hosts, net.JoinHostPort(host, port))
		if p, ok := loopbackPort(net.JoinHostPort(host, port)); ok && call.Access.TCP != nil {
			// A loopback API (a local model): some clients never send a
			// loopback request through a proxy, so the port is open to
			// the call directly too.
			call.Access.TCP.Connect = append(call.Access.TCP.Connect, p)
		}
	}
	if allow, err := call.Allow.With(kind.Name+"'s API", hosts...); err == nil {
		call.Allow = allow
	}
	return call
}

// readable are those of paths that lie in a hidden folder, each under key:
// the others are read anyway.
func (c *Rules) readable(key string, paths ...string) []confine.Path {
	var out []confine.Path
	for _, p := range paths {
		if under(realPath(p), c.hidden) && !slices.ContainsFunc(out, func(o confine.Path) bool { return safefs.Within(p, o.Path) }) {
			out = append(out, confine.Path{Path: p, Key: key})
		}
	}
	return out
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

// Proxy is the run's proxy (nil under off, and in a description).
func (c *Rules) Proxy() *confine.Proxy {
	if c == nil {
		return nil
	}
	return c.proxy
}

// Support is what the kernel enforces.
func (c *Rules) Support() confine.Support { return c.support }

// Note is what the run record says of the run's confinement.
func (c *Rules) Note() string {
	if c == nil {
		return "off"
	}
	return c.mode.String() + ": " + c.support.String()
}

// AsUnenforced makes the rules those of a machine whose kernel confines no
// files (macOS, an older Linux): the allowed environment and the proxy,
// and no Landlock rules. Tests of what a run does there use it.
func (c *Rules) AsUnenforced() {
	if c != nil {
		c.support, c.unenforced = confine.Support{Why: "as if the kernel confined no files"}, true
	}
}

// realWithin are the paths (of entries of tree) that are what they say:
// each one's real path is itself beneath the real tree. An entry that is a
// link, or lies beneath one, is left out: a grant follows links, and a link
// a call left ignored in the work tree would grant where it points (a
// folder outside, the repository's hooks).
func realWithin(paths []string, tree string) []string {
	top := realPath(tree)
	return slices.DeleteFunc(slices.Clone(paths), func(p string) bool {
		rel, err := filepath.Rel(tree, p)
		return err != nil || !filepath.IsLocal(rel) || realPath(p) != filepath.Join(top, rel)
	})
}
