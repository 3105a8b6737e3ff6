package config

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"

	"peal/agent"
	"peal/confine"
	"peal/internal/safefs"
	"peal/state"
	"peal/tickets"
)

// Validate checks everything `peal run` needs before any child process
// runs: ValidateWithoutAgent, then ResolveAgents. It writes nothing.
func (c *Config) Validate() error {
	if err := c.ValidateWithoutAgent(); err != nil {
		return err
	}
	return c.ResolveAgents()
}

// ValidateWithoutAgent checks what commands that read the plan and the state
// need (run, status, the dry run): the required keys, the plan, the repo,
// the numbers, the ticket ids, and that no output path overwrites the state
// folder's own files. It makes PlanPath, RepoPath, StateDir and KnowledgeDir
// absolute. It does not look for the agent CLI: only a real run calls it.
func (c *Config) ValidateWithoutAgent() error {
	for _, k := range Keys {
		if k.Required && c.Value(k.Name) == nil {
			return missing(k.Name)
		}
	}
	if c.Task != nil && c.FromTask != nil {
		return fmt.Errorf("--task and --from-task cannot be used together: choose one")
	}
	if err := c.absolutePaths(); err != nil {
		return err
	}
	var err error
	info, err := os.Stat(c.PlanPath)
	switch {
	case err != nil:
		return fmt.Errorf("plan file %s does not exist: check %s", c.PlanPath, describe("plan_path", c.Sources))
	case !info.Mode().IsRegular():
		return fmt.Errorf("plan %s is not a regular file: check %s", c.PlanPath, describe("plan_path", c.Sources))
	}
	if c.RepoPath, err = filepath.Abs(c.RepoPath); err != nil {
		return fmt.Errorf("repo %s: %w", c.RepoPath, err)
	}
	info, err = os.Stat(c.RepoPath)
	switch {
	case err != nil:
		return fmt.Errorf("repo folder %s does not exist: check %s", c.RepoPath, describe("repo_path", c.Sources))
	case !info.IsDir():
		return fmt.Errorf("repo %s is not a folder: check %s", c.RepoPath, describe("repo_path", c.Sources))
	case !insideGitWorkTree(c.RepoPath) && gitFolder(c.RepoPath):
		return fmt.Errorf("repo %s is a bare repository (git's data, without a work tree for the tasks to change): clone it (git clone %s FOLDER) and point %s at the clone",
			c.RepoPath, c.RepoPath, describe("repo_path", c.Sources))
	case !insideGitWorkTree(c.RepoPath):
		return fmt.Errorf("repo %s is not inside a git work tree: run `git init` there or point %s at a git checkout", c.RepoPath, describe("repo_path", c.Sources))
	}
	if err := c.findStateDir(); err != nil {
		return err
	}
	if c.MaxCostUSD != nil {
		switch {
		case *c.MaxCostUSD <= 0:
			return fmt.Errorf("max_cost_usd must be above 0 (set by %s): it would stop the run before its first call", describe("max_cost_usd", c.Sources))
		case !c.Structured():
			c.Warnings = append(c.Warnings, "max_cost_usd has no effect without structured_output: only the agent's event stream reports cost")
		}
	}
	if c.MaxTokens != nil {
		switch {
		case *c.MaxTokens == 0:
			return fmt.Errorf("max_tokens must be above 0 (set by %s): it would stop the run before its first call", describe("max_tokens", c.Sources))
		case !c.Structured() && (c.Confine == ConfineOff || c.ConfineKeyProxy == KeyProxyOff):
			c.Warnings = append(c.Warnings, "max_tokens has no effect without structured_output or peal's model endpoint (confine and confine_key_proxy): nothing else counts tokens")
		}
	}
	if c.AgentSession == SessionTask {
		for i, name := range []string{c.AgentKind, c.FallbackKind()} {
			if k, err := agent.Lookup(name); err == nil && k.Session == nil && (i == 0 || name != c.AgentKind) {
				c.Warnings = append(c.Warnings, fmt.Sprintf("agent_session = \"task\" (set by %s): the %s CLI cannot continue a session, so its calls each start a fresh one",
					describe("agent_session", c.Sources), k.CLI))
			}
		}
	}
	if c.PhaseTimeoutSec == 0 {
		return fmt.Errorf("phase_timeout_sec must be at least 1 (set by %s)", describe("phase_timeout_sec", c.Sources))
	}
	if c.NormalizePromptPath != "" {
		if info, err := os.Stat(c.NormalizePromptPath); err != nil || !info.Mode().IsRegular() {
			return fmt.Errorf("normalize prompt %s is not a readable file: check %s", c.NormalizePromptPath, describe("normalize_prompt_path", c.Sources))
		}
	}
	if err := c.checkWorktreePaths(); err != nil {
		return err
	}
	if err := c.checkConfine(); err != nil {
		return err
	}
	if err := c.ResolveStore(); err != nil {
		return err
	}
	if err := c.confinePathsError(); err != nil {
		return err
	}
	if err := c.checkOutputs(); err != nil {
		return err
	}
	if err := c.checkHolders(); err != nil {
		return err
	}
	return c.checkTickets()
}

// ResolveAgents finds agent_cmd, and fallback_agent_cmd when set, as
// executables and stores them in AgentPath and FallbackPath; a stet_path
// that is set must be an executable file (a run would otherwise review
// nothing and still exit 0).
func (c *Config) ResolveAgents() error {
	if err := c.checkStetPath(); err != nil {
		return err
	}
	var err error
	if c.AgentPath, err = ResolveCommand(c.AgentCmd); err != nil {
		return fmt.Errorf("agent command %s not found (%v): install the %s CLI or set %s", Quote(c.AgentCmd), err, c.AgentKind, describe("agent_cmd", c.Sources))
	}
	if c.FallbackAgentCmd != "" {
		if c.FallbackPath, err = ResolveCommand(c.FallbackAgentCmd); err != nil {
			return fmt.Errorf("fallback agent command %s not found (%v): check %s", Quote(c.FallbackAgentCmd), err, describe("fallback_agent_cmd", c.Sources))
		}
	}
	return nil
}

// checkStetPath refuses a stet_path that is set and is not an executable
// file.
func (c *Config) checkStetPath() error {
	if c.StetPath == "" {
		return nil
	}
	what := ""
	if _, err := os.Stat(c.StetPath); err != nil {
		what = "does not exist"
	} else if _, err := ResolveCommand(c.StetPath); err != nil {
		what = "is not an executable file"
	}
	if what == "" {
		return nil
	}
	return fmt.Errorf("stet_path %s %s (set by %s): point it at the stet program, or unset it to use stet on PATH", c.StetPath, what, describe("stet_path", c.Sources))
}

// checkHolders refuses an agent log folder, log file, run summary or
// retry-state store set by a layer whose folder does not exist: peal makes
// the file or folder itself, but a folder missing above it is more likely a
// mistyped path than one to create. The state folder, and what lies in it,
// peal makes whole.
func (c *Config) checkHolders() error {
	for _, o := range []struct{ key, path string }{
		{"agent_log_dir", c.AgentLogDir}, {"log_file", c.LogFile}, {"run_summary_path", c.RunSummaryPath}, {"knowledge_dir", c.KnowledgeDir},
	} {
		if o.path == "" || c.Sources[o.key] == SourceDefault {
			continue
		}
		holder := filepath.Dir(o.path)
		if safefs.Within(holder, c.StateDir) {
			continue
		}
		switch info, err := os.Stat(holder); {
		case err != nil:
			return fmt.Errorf("%s %s: the folder that would hold it, %s, does not exist (set by %s): create it, or correct the path", o.key, o.path, holder, describe(o.key, c.Sources))
		case !info.IsDir():
			return fmt.Errorf("%s %s: %s is not a folder (set by %s): correct the path", o.key, o.path, holder, describe(o.key, c.Sources))
		}
	}
	return nil
}

// ResolveStore makes StateDir absolute and resolves the retry-state store,
// the one rule for every command: knowledge_dir when set; else
// <repo>/.tf/knowledge in a ticketflow project (the working folder standing in
// for an unset repo_path); else {state_dir}/knowledge.
func (c *Config) ResolveStore() error {
	var err error
	if c.StateDir, err = filepath.Abs(c.StateDir); err != nil {
		return fmt.Errorf("state dir %s: %w", c.StateDir, err)
	}
	if c.KnowledgeDir == "" {
		c.KnowledgeDir = filepath.Join(c.StateDir, "knowledge")
		if info, err := os.Stat(filepath.Join(c.RepoPath, ".tf")); err == nil && info.IsDir() {
			// A ticketflow project: share its store.
			c.KnowledgeDir = filepath.Join(c.RepoPath, ".tf", "knowledge")
		} else if c.ticketIn(c.TicketStore) && !c.ticketIn(c.KnowledgeDir) {
			// The ticket's attempts are in the store of its previous run's
			// state folder: this run is their next one.
			c.Notes = append(c.Notes, fmt.Sprintf("ticket %s: its attempts are in %s, where this run records its own", c.TicketID, c.TicketStore))
			c.KnowledgeDir = c.TicketStore
		}
	}
	if c.KnowledgeDir, err = filepath.Abs(c.KnowledgeDir); err != nil {
		return fmt.Errorf("knowledge dir %s: %w", c.KnowledgeDir, err)
	}
	return nil
}

// ticketIn reports whether the store knowledge ("" none) has a folder of
// the run's ticket.
func (c *Config) ticketIn(knowledge string) bool {
	if knowledge == "" || c.TicketID == "" || !tickets.ValidID(c.TicketID) {
		return false
	}
	info, err := os.Lstat(filepath.Join(knowledge, "tickets", c.TicketID))
	return err == nil && info.IsDir()
}

// ResolvePaths makes every path key absolute, as a run reads it (relative
// to the working folder), and resolves the retry-state store: what the
// commands that need no plan (`peal doctor`, `peal config`) do before they
// probe or describe what a run would do, so that they take every path form
// a run takes (".peal", "--repo ."). It checks nothing else.
func (c *Config) ResolvePaths() error {
	if err := c.absolutePaths(); err != nil {
		return err
	}
	return c.ResolveStore()
}

// absolutePaths makes every path key absolute, relative to the working
// folder as documented: children run in the repository, so a relative path
// (a stet_path of tools/stet) would otherwise be looked up there instead.
func (c *Config) absolutePaths() error {
	rv := reflect.ValueOf(c).Elem()
	for _, k := range Keys {
		if k.Kind != KindPath {
			continue
		}
		f := rv.FieldByName(k.Field)
		if f.String() == "" {
			continue
		}
		abs, err := filepath.Abs(f.String())
		if err != nil {
			return fmt.Errorf("%s %s: %w", k.Name, Quote(f.String()), err)
		}
		f.SetString(abs)
	}
	return nil
}

// checkOutputs refuses a run summary, log file or agent log folder that
// would overwrite the state folder's own files (state.json, its lock, kept-
// aside and temporary copies, the run record) or the retry-state store, or
// each other.
// StateDir and KnowledgeDir are absolute here.
func (c *Config) checkOutputs() error {
	outputs := []struct{ key, path string }{{"run_summary_path", c.RunSummaryPath}, {"log_file", c.LogFile}, {"agent_log_dir", c.AgentLogDir}}
	for i, o := range outputs {
		if o.path == "" {
			continue
		}
		abs, err := filepath.Abs(o.path)
		if err != nil {
			return fmt.Errorf("%s %s: %w", o.key, o.path, err)
		}
		if what := c.stateFile(abs); what != "" {
			return fmt.Errorf("%s %s would overwrite %s: point %s somewhere else", o.key, abs, what, describe(o.key, c.Sources))
		}
		for _, other := range outputs[:i] {
			if otherAbs, _ := filepath.Abs(other.path); other.path != "" && otherAbs == abs {
				return fmt.Errorf("%s and %s are both %s: point %s somewhere else", other.key, o.key, abs, describe(o.key, c.Sources))
			}
		}
	}
	return nil
}

// checkWorktreePaths refuses an entry of worktree_copy, worktree_sparse_paths
// or worktree_link that is not a path inside repo_path (absolute, climbing
// out, the repository itself, or git's own folder): each names a place of
// every task's worktree. A linked path may hold no other linked path and no
// copied one, nor lie in one: a copy would write into the folder the tasks
// share, or over the link.
func (c *Config) checkWorktreePaths() error {
	for _, k := range []struct {
		key, example string
		paths        []string
	}{{"worktree_copy", ".env", c.WorktreeCopy}, {"worktree_sparse_paths", "services/api", c.WorktreeSparsePaths}, {"worktree_link", "node_modules", c.WorktreeLink}} {
		for _, p := range k.paths {
			if !worktreePath(p) {
				return fmt.Errorf("%s entry %s is not a path inside the repository (set by %s): name files or folders relative to repo_path, such as %s",
					k.key, Quote(p), describe(k.key, c.Sources), k.example)
			}
		}
	}
	for i, link := range c.WorktreeLink {
		for _, other := range c.WorktreeLink[:i] {
			if overlaps(link, other) {
				return fmt.Errorf("worktree_link entries %s and %s overlap (set by %s): link each folder once", Quote(other), Quote(link), describe("worktree_link", c.Sources))
			}
		}
		for _, copied := range c.WorktreeCopy {
			if overlaps(link, copied) {
				return fmt.Errorf("worktree_copy entry %s and worktree_link entry %s overlap (set by %s and %s): a path is either copied or linked", Quote(copied), Quote(link),
					describe("worktree_copy", c.Sources), describe("worktree_link", c.Sources))
			}
		}
	}
	return nil
}

// worktreePath reports whether p names a file or folder inside the
// repository, outside git's folders.
func worktreePath(p string) bool {
	if !filepath.IsLocal(p) || filepath.Clean(p) == "." {
		return false
	}
	for _, part := range strings.Split(filepath.ToSlash(filepath.Clean(p)), "/") {
		if part == ".git" {
			return false
		}
	}
	return true
}

// overlaps reports whether the paths a and b are the same or one holds the
// other.
func overlaps(a, b string) bool {
	a, b = filepath.Clean(a), filepath.Clean(b)
	return a == b || safefs.Within(a, b) || safefs.Within(b, a)
}

// stateFile names the state file or store that path is, or is inside; "".
func (c *Config) stateFile(path string) string {
	dir, base := filepath.Dir(path), filepath.Base(path)
	switch {
	case dir == c.StateDir && (base == state.FileName || base == state.LockName ||
		strings.HasPrefix(base, state.FileName+".") || strings.HasPrefix(base, "."+state.FileName+".tmp")):
		return "the state file " + filepath.Join(c.StateDir, state.FileName) + " or its companions"
	case dir == c.StateDir && (base == state.RecordName || base == state.RecordPrevName):
		return "the run record " + filepath.Join(c.StateDir, state.RecordName)
	case path == c.KnowledgeDir || safefs.Within(path, filepath.Join(c.KnowledgeDir, "tickets")):
		return "the retry-state store " + c.KnowledgeDir
	case safefs.Within(path, filepath.Join(c.StateDir, "review")) || safefs.Within(path, filepath.Join(c.StateDir, "tmp")):
		return "peal's review or temporary files in " + c.StateDir
	case path == c.PlanPath || safefs.Same(path, c.PlanPath):
		return "the plan " + c.PlanPath
	case safefs.Same(path, filepath.Join(c.StateDir, state.FileName)):
		return "the state file " + filepath.Join(c.StateDir, state.FileName)
	}
	return ""
}

// checkTickets fills the ticket prefix and checks the ids this run will use.
func (c *Config) checkTickets() error {
	if c.TicketID != "" {
		if !tickets.ValidID(c.TicketID) {
			return fmt.Errorf("ticket id %s is not a ticket id (lower-case letters, a dash, lower-case letters or digits, like pt-te9b): check %s", Quote(c.TicketID), describe("ticket_id", c.Sources))
		}
		return nil
	}
	if c.TicketPrefix == "" {
		c.TicketPrefix = DefaultTicketPrefix(c.PlanPath, c.RepoPath)
	}
	if id := c.TicketPrefix + "-1"; !tickets.ValidID(id) {
		return fmt.Errorf("ticket prefix %s gives ids like %s, which are not ticket ids (use lower-case letters only): check %s", Quote(c.TicketPrefix), Quote(id), describe("ticket_prefix", c.Sources))
	}
	return nil
}

// DefaultTicketPrefix is the prefix of a plan's per-task tickets when
// ticket_prefix is unset: the plan file's name without its extension,
// lower-cased, keeping the letters a–z only and at most 12 of them ("task"
// when none is left), then five letters a–z taken from a SHA-256 of the
// plan's path relative to the repository. Two plans (feature1.md and
// feature2.md, x/plan.md and y/plan.md) thus never share a ticket, and a plan
// keeps its tickets wherever the repository is checked out.
func DefaultTicketPrefix(planPath, repoPath string) string {
	base := strings.ToLower(strings.TrimSuffix(filepath.Base(planPath), filepath.Ext(planPath)))
	var b strings.Builder
	for _, r := range base {
		if r >= 'a' && r <= 'z' && b.Len() < 12 {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		b.WriteString("task")
	}
	rel, err := filepath.Rel(repoPath, planPath)
	if err != nil {
		rel = planPath
	}
	sum := sha256.Sum256([]byte(filepath.ToSlash(rel)))
	for _, c := range sum[:5] {
		b.WriteByte('a' + c%26)
	}
	return b.String()
}

// ResolveCommand finds a command the way the agent command is found: a bare
// name is looked up on PATH, a path must be an executable file.
func ResolveCommand(cmd string) (string, error) {
	if cmd == "" {
		return "", fmt.Errorf("empty command")
	}
	p, err := exec.LookPath(cmd)
	if err != nil {
		if filepath.Base(cmd) == cmd {
			return "", fmt.Errorf("not on PATH")
		}
		return "", fmt.Errorf("not an executable file")
	}
	return filepath.Abs(p)
}

func missing(name string) error {
	return fmt.Errorf("%s is not set: use %s", name, describe(name, nil))
}

// describe names where a key can be (and, when known, was) set, for messages.
func describe(name string, sources map[string]Source) string {
	return Describe(name, sources)
}

// Describe names where key name was set (its flag, its variable, the key in
// the config file or ticketflow's settings), or, when it was not, every place that can set it:
// what an error tells the user to change.
func Describe(name string, sources map[string]Source) string {
	k, _ := KeyByName(name)
	switch sources[name] {
	case SourceFlag:
		return k.FlagName()
	case SourceEnv:
		return k.Env()
	case SourceFile:
		return k.Name + " in the config file"
	case SourceTFSettings:
		return k.Name + " from ticketflow's " + tfSettingsPath
	}
	where := k.Env() + " or " + k.Name + " in the config file"
	if k.Flag != "" {
		where = k.FlagName() + ", " + where
	}
	return where
}

// insideGitWorkTree reports whether dir or one of its parents holds a .git
// entry (a folder, or a file for worktrees and submodules).
func insideGitWorkTree(dir string) bool { return workTreeTop(dir) != "" }

// gitFolder reports whether dir, or a folder above it, is git's data
// itself (a bare repository, or a .git folder): HEAD, objects and refs.
func gitFolder(dir string) bool {
	for {
		_, head := os.Stat(filepath.Join(dir, "HEAD"))
		objects, oerr := os.Stat(filepath.Join(dir, "objects"))
		refs, rerr := os.Stat(filepath.Join(dir, "refs"))
		if head == nil && oerr == nil && rerr == nil && objects.IsDir() && refs.IsDir() {
			return true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return false
		}
		dir = parent
	}
}

// checkConfine refuses the confinement keys' values that could not be
// applied, naming the key, and makes the paths full (expandConfinePaths);
// what the paths name is checked once the state folder is known
// (confinePathsError).
func (c *Config) checkConfine() error {
	if err := c.expandConfinePaths(); err != nil {
		return err
	}
	for _, p := range c.ConfineGitPass {
		if !validGitPattern(p) {
			return fmt.Errorf("confine_git_pass %q (set by %s): want a git setting's name (section.name, e.g. core.editor), or a section ending in .* (e.g. alias.*)", p, describe("confine_git_pass", c.Sources))
		}
	}
	for _, p := range c.ConfineEnvPass {
		if !confine.ValidEnvPattern(p) {
			return fmt.Errorf("confine_env_pass %q (set by %s): want a variable's name, or a prefix ending in * (e.g. NPM_CONFIG_*)", p, describe("confine_env_pass", c.Sources))
		}
	}
	if _, err := confine.ParseAllow("confine_network_allow", c.ConfineNetworkAllow...); err != nil {
		return fmt.Errorf("%v (set by %s): want host, host:port or *.domain", strings.TrimPrefix(err.Error(), "confine: "), describe("confine_network_allow", c.Sources))
	}
	return nil
}

// gitSetting is a git setting's name (section[.subsection].name) or a
// section's (or subsection's) settings, section.*.
var gitSetting = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]*\.(\*|([^\x00\n]+\.)?([A-Za-z][A-Za-z0-9-]*|\*))$`)

// validGitPattern tells whether p names git settings for confine_git_pass.
func validGitPattern(p string) bool { return gitSetting.MatchString(p) }

// fullPath is p with a leading ~ made the home folder; an error when it is
// not then a full path, or holds a ".." segment.
func fullPath(p, home string) (string, error) {
	for _, seg := range strings.Split(filepath.ToSlash(p), "/") {
		if seg == ".." {
			return "", fmt.Errorf("holds \"..\": name the folder itself")
		}
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home == "" {
			return "", fmt.Errorf("~ names the home folder, and HOME is not set")
		}
		p = filepath.Join(home, p[1:])
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("not a full path: start it with / or ~/")
	}
	return filepath.Clean(p), nil
}
