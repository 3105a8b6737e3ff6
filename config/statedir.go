package config

import (
	"fmt"
	"path/filepath"

	"peal/confine"
	"peal/internal/safefs"
	"peal/state"
)

// findStateDir makes sure a command finds the state of its plan wherever
// it is started. A new plan's state goes, as in Peal, to state_dir (.peal
// in the working folder by default); a run notes in the repository's git
// folder where its plan's state lives (state.NoteStateDir). When that note
// names another folder that holds the plan's state:
//
//   - state_dir unset, and .peal here holds none of it: the noted folder
//     is the state folder (a note says so);
//   - state_dir unset, and .peal here holds some too: an error naming both;
//   - state_dir set to a folder that holds none of it: an error (a run
//     there would start the plan over, paying for every task again);
//   - state_dir set to a folder that holds some too: a warning.
//
// It needs PlanPath, RepoPath and StateDir absolute, and sets StateNotes.
func (c *Config) findStateDir() error {
	top := workTreeTop(c.RepoPath)
	if top == "" {
		return nil
	}
	g, err := confine.FindGit(top)
	if err != nil {
		return nil
	}
	c.StateNotes = state.NotesDir(g.Common)
	plan := state.Plan{Path: c.PlanPath, Repo: c.RepoPath}
	noted, ok := state.NotedStateDir(c.StateNotes, plan)
	if !ok || safefs.Same(noted, c.StateDir) || !state.Holds(noted, plan) {
		return nil
	}
	set, here := c.Sources["state_dir"] != SourceDefault, state.Holds(c.StateDir, plan)
	switch {
	case set && here:
		c.Warnings = append(c.Warnings, fmt.Sprintf("plan %s also has state in %s, where its last run kept it; this command uses %s (set by %s)",
			c.PlanPath, noted, c.StateDir, describe("state_dir", c.Sources)))
	case set:
		return fmt.Errorf("the state of plan %s is in %s, where its last run kept it, and state_dir %s (set by %s) holds none: point state_dir at %s to go on, or remove that folder to start the plan over",
			c.PlanPath, noted, c.StateDir, describe("state_dir", c.Sources), noted)
	case here:
		return fmt.Errorf("plan %s has state in %s, where its last run kept it, and in %s (.peal in the working folder): choose one with --state-dir or PEAL_STATE_DIR",
			c.PlanPath, noted, c.StateDir)
	default:
		c.Notes = append(c.Notes, fmt.Sprintf("state folder %s: where the last run of this plan kept its state (noted in %s)", noted, c.StateNotes))
		c.StateDir = noted
		if c.Sources["run_summary_path"] == SourceDefault {
			c.RunSummaryPath = filepath.Join(noted, state.SummaryName)
		}
	}
	return nil
}

// NotedStores are the retry-state stores of the state folders the
// repository's notes name (see findStateDir), but KnowledgeDir: where a
// retry-state command started outside the folder of a run looks for a
// ticket that is not in its own store. None when state_dir or
// knowledge_dir is set: the person said where to look.
func (c *Config) NotedStores() []string {
	if c.Sources["state_dir"] != SourceDefault || c.Sources["knowledge_dir"] != SourceDefault {
		return nil
	}
	repo, err := filepath.Abs(c.RepoPath)
	if err != nil {
		return nil
	}
	top := workTreeTop(repo)
	if top == "" {
		return nil
	}
	g, err := confine.FindGit(top)
	if err != nil {
		return nil
	}
	var stores []string
	for _, dir := range state.NotedStateDirs(state.NotesDir(g.Common)) {
		if k := filepath.Join(dir, "knowledge"); k != c.KnowledgeDir {
			stores = append(stores, k)
		}
	}
	return stores
}
