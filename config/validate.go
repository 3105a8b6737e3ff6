package config

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// Validate checks everything that must hold before any child process runs.
// It writes nothing. On success AgentPath holds the resolved agent command and
// PlanPath, RepoPath and StateDir are absolute.
func (c *Config) Validate() error {
	if c.PlanPath == "" {
		return missing("plan_path")
	}
	if c.RepoPath == "" {
		return missing("repo_path")
	}
	if c.Task != nil && c.FromTask != nil {
		return fmt.Errorf("--task and --from-task cannot be used together: choose one")
	}
	var err error
	if c.PlanPath, err = filepath.Abs(c.PlanPath); err != nil {
		return fmt.Errorf("plan %s: %w", c.PlanPath, err)
	}
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
	case !insideGitWorkTree(c.RepoPath):
		return fmt.Errorf("repo %s is not inside a git work tree: run `git init` there or point %s at a git checkout", c.RepoPath, describe("repo_path", c.Sources))
	}
	if c.StateDir, err = filepath.Abs(c.StateDir); err != nil {
		return fmt.Errorf("state dir %s: %w", c.StateDir, err)
	}
	if c.PhaseTimeoutSec == 0 {
		return fmt.Errorf("phase_timeout_sec must be at least 1 (set by %s)", describe("phase_timeout_sec", c.Sources))
	}
	if c.NormalizePromptPath != "" {
		if info, err := os.Stat(c.NormalizePromptPath); err != nil || !info.Mode().IsRegular() {
			return fmt.Errorf("normalize prompt %s is not a readable file: check %s", c.NormalizePromptPath, describe("normalize_prompt_path", c.Sources))
		}
	}
	if err := c.resolveTickets(); err != nil {
		return err
	}
	if c.AgentPath, err = ResolveCommand(c.AgentCmd); err != nil {
		return fmt.Errorf("agent command %q not found (%v): install the %s CLI or set %s", c.AgentCmd, err, c.AgentKind, describe("agent_cmd", c.Sources))
	}
	if c.FallbackAgentCmd != "" {
		if c.FallbackPath, err = ResolveCommand(c.FallbackAgentCmd); err != nil {
			return fmt.Errorf("fallback agent command %q not found (%v): check %s", c.FallbackAgentCmd, err, describe("fallback_agent_cmd", c.Sources))
		}
	}
	return nil
}

// TicketIDPattern is the form of ticketflow ticket ids.
var TicketIDPattern = regexp.MustCompile(`^[a-z]+-[a-z0-9]+$`)

// resolveTickets fills the retry-state store's defaults and checks the ids
// this run will use.
func (c *Config) resolveTickets() error {
	if c.KnowledgeDir == "" {
		c.KnowledgeDir = filepath.Join(c.StateDir, "knowledge")
		if info, err := os.Stat(filepath.Join(c.RepoPath, ".tf")); err == nil && info.IsDir() {
			// A ticketflow project: share its store.
			c.KnowledgeDir = filepath.Join(c.RepoPath, ".tf", "knowledge")
		}
	}
	var err error
	if c.KnowledgeDir, err = filepath.Abs(c.KnowledgeDir); err != nil {
		return fmt.Errorf("knowledge dir %s: %w", c.KnowledgeDir, err)
	}
	if c.TicketID != "" {
		if !TicketIDPattern.MatchString(c.TicketID) {
			return fmt.Errorf("ticket id %q is not a ticket id (lower-case letters, a dash, lower-case letters or digits, like pt-te9b): check %s", c.TicketID, describe("ticket_id", c.Sources))
		}
		return nil
	}
	if c.TicketPrefix == "" {
		c.TicketPrefix = DefaultTicketPrefix(c.PlanPath)
	}
	if id := c.TicketPrefix + "-1"; !TicketIDPattern.MatchString(id) {
		return fmt.Errorf("ticket prefix %q gives ids like %q, which are not ticket ids (use lower-case letters only): check %s", c.TicketPrefix, id, describe("ticket_prefix", c.Sources))
	}
	return nil
}

// DefaultTicketPrefix is the plan file's name without extension, lower-cased,
// keeping only a–z; "task" when nothing is left.
func DefaultTicketPrefix(planPath string) string {
	base := strings.ToLower(strings.TrimSuffix(filepath.Base(planPath), filepath.Ext(planPath)))
	var b strings.Builder
	for _, r := range base {
		if r >= 'a' && r <= 'z' {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "task"
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
	k, _ := KeyByName(name)
	return fmt.Errorf("%s is not set: use %s, %s or %s in the config file", name, k.FlagName(), k.Env(), k.Name)
}

// describe names where a key can be (and, when known, was) set, for messages.
func describe(name string, sources map[string]Source) string {
	k, _ := KeyByName(name)
	switch sources[name] {
	case SourceFlag:
		return k.FlagName()
	case SourceEnv:
		return k.Env()
	case SourceFile:
		return k.Name + " in the config file"
	}
	where := k.Env() + " or " + k.Name + " in the config file"
	if k.Flag != "" {
		where = k.FlagName() + ", " + where
	}
	return where
}

// insideGitWorkTree reports whether dir or one of its parents holds a .git
// entry (a folder, or a file for worktrees and submodules).
func insideGitWorkTree(dir string) bool {
	for {
		if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
			return true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return false
		}
		dir = parent
	}
}
