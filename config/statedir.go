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
//   - state_dir set to a folder that holds some too: a warning;
//   - a command that only reads (ReadOnly: status, report, the dry run)
//     reads the noted folder, and says so, in every other case;
//   - ticket mode: a run with a state folder of its own (set, or .peal
//     here) is the ticket's next attempt; a note names the folder of its
//     previous run, whose store keeps the ticket's attempts (TicketStore);
//   - otherwise an error: a run in a folder without the plan's state would
//     start the plan over, paying for every task again; with state in two
//     folders, it cannot tell which to go on from.
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
	if !ok {
		if was, in, moved := state.NotedMoved(c.StateNotes, plan, c.StateDir); moved {
			c.Warnings = append(c.Warnings, fmt.Sprintf("plan %s is new to state folder %s; the state of plan %s, which is no longer there, is in %s: if this plan is that one moved, point state_dir at %s (its tasks then keep their progress)",
				c.PlanPath, c.StateDir, was, in, in))
		}
		return nil
	}
	if safefs.Same(noted, c.StateDir) || !state.Holds(noted, plan) {
		return nil
	}
	set, here := c.Sources["state_dir"] != SourceDefault, state.Holds(c.StateDir, plan)
	chosen := ".peal in the working folder"
	if set {
		chosen = "set by " + describe("state_dir", c.Sources)
	}
	switch {
	case set && here:
		c.Warnings = append(c.Warnings, fmt.Sprintf("plan %s also has state in %s, where its last run kept it; this command uses %s (set by %s)",
			c.PlanPath, noted, c.StateDir, describe("state_dir", c.Sources)))
	case !set && !here:
		c.Notes = append(c.Notes, fmt.Sprintf("state folder %s: where the last run of this plan kept its state (noted in %s)", noted, c.StateNotes))
		c.useStateDir(noted)
	case c.ReadOnly:
		holds := "holds none of it"
		if here {
			holds = "holds some too"
		}
		c.Notes = append(c.Notes, fmt.Sprintf("state folder %s: where the last run of this plan kept its state; %s (%s) %s, and a run there would be refused",
			noted, c.StateDir, chosen, holds))
		c.useStateDir(noted)
	case c.TicketID != "":
		c.Notes = append(c.Notes, fmt.Sprintf("ticket %s: this run is its next attempt, with state folder %s (%s); the previous run of plan %s kept its state in %s",
			c.TicketID, c.StateDir, chosen, c.PlanPath, noted))
		c.TicketStore = filepath.Join(noted, "knowledge")
	case here:
		return fmt.Errorf("plan %s has state in %s, where its last run kept it, and in %s (.peal in the working folder): choose one with --state-dir or PEAL_STATE_DIR",
			c.PlanPath, noted, c.StateDir)
	default:
		next := "point state_dir at " + noted + " to go on, or remove that folder to start the plan over"
		if run, ok := state.Running(c.StateNotes); ok && safefs.Same(run.StateDir, noted) {
			// Never a word of removing a folder a run is using.
			next = fmt.Sprintf("a peal run is using that folder now (pid %d, started %s): wait for it to end, then point state_dir at %s to go on", run.PID, run.StartedAt, noted)
		}
		return fmt.Errorf("the state of plan %s is in %s, where its last run kept it, and state_dir %s (set by %s) holds none: %s",
			c.PlanPath, noted, c.StateDir, describe("state_dir", c.Sources), next)
	}
	return nil
}

// useStateDir makes dir the state folder, with the run summary in it when
// run_summary_path is not set.
func (c *Config) useStateDir(dir string) {
	c.StateDir = dir
	if c.Sources["run_summary_path"] == SourceDefault {
		c.RunSummaryPath = filepath.Join(dir, state.SummaryName)
	}
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
