package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"peal/config"
	"peal/runner"
	"peal/tickets"
)

// RetryStateCmd is `peal retry-state`: the retry-state store shared with
// ticketflow.
type RetryStateCmd struct {
	Show   RetryStateShowCmd   `cmd:"" help:"Show a ticket's attempts, retry count and the models its next attempt would get."`
	Reset  RetryStateResetCmd  `cmd:"" help:"Back up a ticket's retry state so that its next attempt is a fresh attempt 1."`
	Detect RetryStateDetectCmd `cmd:"" help:"Run ticketflow's close detection on a ticket folder (close-summary.md, review.md)."`
}

// loadStore resolves the configuration of a retry-state command and its
// store, by the rule of every command (config.Config.ResolveStore), with the
// working folder standing in for an unset repo_path.
func (f *configFlags) loadStore(e *env) (*config.Config, error) {
	in := f.inputs(e)
	in.DefaultRepo = "."
	cfg, err := config.Load(in)
	if err == nil {
		err = cfg.ResolveStore()
	}
	if err == nil {
		warn(e, cfg.Warnings)
	}
	return cfg, err
}

// warn prints warnings, a line each.
func warn(e *env, warnings []string) {
	for _, w := range warnings {
		fmt.Fprintf(e.stderr, "peal: warning: %s\n", w)
	}
}

// RetryStateShowCmd is `peal retry-state show`.
type RetryStateShowCmd struct {
	Ticket string `arg:"" help:"Ticket id, e.g. planlinoj-2 (task 2 of a plan.md at the top of the repository; peal status shows each task's ticket) or pt-te9b."`
	configFlags
	JSON bool `name:"json" help:"Print the retry-state.json file as it is."`
}

// Run prints the ticket's state.
func (c *RetryStateShowCmd) Run(e *env) error {
	if !tickets.ValidID(c.Ticket) {
		return failf("%s is not a ticket id (like planlinoj-2 or pt-te9b: peal status shows each task's ticket)", config.Quote(c.Ticket))
	}
	cfg, err := c.loadStore(e)
	if err != nil {
		return failf("%v", err)
	}
	st, err := tickets.Load(cfg.KnowledgeDir, c.Ticket)
	for _, store := range cfg.NotedStores() {
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
		// Started outside the folder of the run: its state folder is
		// noted in the repository.
		if st, err = tickets.Load(store, c.Ticket); err == nil {
			fmt.Fprintf(e.stderr, "peal: note: ticket %s is in the store %s, of a state folder the repository notes\n", c.Ticket, store)
			cfg.KnowledgeDir = store
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		msg := fmt.Sprintf("no retry state for ticket %s in %s", c.Ticket, cfg.KnowledgeDir)
		if ids := ticketsIn(cfg.KnowledgeDir); len(ids) > 0 {
			msg += "; its tickets: " + strings.Join(ids, ", ")
		}
		return failf("%s (peal status shows each task's ticket)", msg)
	}
	if err != nil {
		return failf("ticket %s: %v", c.Ticket, err)
	}
	for _, w := range st.Warnings {
		fmt.Fprintf(e.stderr, "peal: warning: ticket %s: %s\n", c.Ticket, w)
	}
	if c.JSON {
		return printJSON(e.stdout, st)
	}
	printRetryState(e.stdout, st, cfg)
	return nil
}

// maxListed is how many tickets a message lists.
const maxListed = 8

// ticketsIn are the tickets of the store (the first maxListed, and how
// many more there are).
func ticketsIn(store string) []string {
	entries, err := os.ReadDir(filepath.Join(store, "tickets"))
	if err != nil {
		return nil
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && tickets.ValidID(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	if len(ids) > maxListed {
		ids = append(ids[:maxListed], fmt.Sprintf("and %d more", len(ids)-maxListed))
	}
	return ids
}

func printRetryState(w io.Writer, st tickets.RetryState, cfg *config.Config) {
	fmt.Fprintf(w, "ticket %s: status %s, retryCount %d, last attempt at %s\n\n", st.TicketID, st.Status, st.RetryCount, st.LastAttemptAt)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\ttrigger\tstatus\tstarted\tcompleted\tcritical/major/minor/warnings/suggestions\tmodels (fixer, second opinion, worker)")
	for _, a := range st.Attempts {
		counts := "-"
		if g := a.QualityGate; g != nil {
			c := g.Counts
			counts = fmt.Sprintf("%d/%d/%d/%d/%d", c.Critical, c.Major, c.Minor, c.Warnings, c.Suggestions)
		}
		completed := a.CompletedAt
		if completed == "" {
			completed = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.AttemptNumber, a.Trigger, a.Status, a.StartedAt, completed, counts, models(a.Escalation))
	}
	tw.Flush()
	next := st.NextAttempt()
	if !cfg.EscalationEnabled {
		fmt.Fprintf(w, "\nnext attempt %d: base models (escalation is off)\n", next)
		return
	}
	esc := tickets.ModelsFor(next, cfg.EscalationFixer, cfg.EscalationSecondOpinion, cfg.EscalationWorker)
	fmt.Fprintf(w, "\nnext attempt %d: %s", next, models(&esc))
	if st.Exhausted(int(cfg.EscalationMaxRetries)) {
		fmt.Fprintf(w, " — but the ticket is exhausted (%d blocked attempts, max_retries %d): a run skips it", st.RetryCount, cfg.EscalationMaxRetries)
	}
	fmt.Fprintln(w)
}

func models(e *tickets.Escalation) string {
	if e == nil {
		return "-"
	}
	name := func(p *string) string {
		if p == nil {
			return "base"
		}
		return *p
	}
	return fmt.Sprintf("%s, %s, %s", name(e.Fixer), name(e.ReviewerSecondOpinion), name(e.Worker))
}

// RetryStateResetCmd is `peal retry-state reset`.
type RetryStateResetCmd struct {
	Ticket string `arg:"" help:"Ticket id."`
	configFlags
}

// Run renames the ticket's retry-state.json aside and prints the backup's name.
func (c *RetryStateResetCmd) Run(e *env) error {
	if !tickets.ValidID(c.Ticket) {
		return failf("%s is not a ticket id (like planlinoj-2 or pt-te9b: peal status shows each task's ticket)", config.Quote(c.Ticket))
	}
	cfg, err := c.loadStore(e)
	if err != nil {
		return failf("%v", err)
	}
	dir := cfg.KnowledgeDir
	backup, err := tickets.Reset(dir, c.Ticket, e.now())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return failf("no retry state for ticket %s in %s", c.Ticket, dir)
	case errors.Is(err, tickets.ErrLocked):
		return failf("ticket %s is being worked on by a peal run: try again when it ends", c.Ticket)
	case err != nil:
		return failf("ticket %s: %v", c.Ticket, err)
	}
	_, err = fmt.Fprintln(e.stdout, backup)
	return err
}

// RetryStateDetectCmd is `peal retry-state detect`.
type RetryStateDetectCmd struct {
	Dir string `arg:"" help:"Ticket folder holding close-summary.md and/or review.md." type:"path"`
	configFlags
	JSON bool `name:"json" help:"Print the report as JSON."`
}

// Run prints what ticketflow's detection finds in the folder, blocking on
// the severities of fail_on.
func (c *RetryStateDetectCmd) Run(e *env) error {
	if info, err := os.Stat(c.Dir); err != nil || !info.IsDir() {
		return failf("ticket folder %s does not exist or is not a folder", c.Dir)
	}
	cfg, err := c.load(e)
	if err != nil {
		return failf("%v", err)
	}
	report, err := tickets.Detect(c.Dir, cfg.FailOn)
	if err != nil {
		return failf("%v", err)
	}
	if c.JSON {
		data, err := json.Marshal(report)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(e.stdout, string(data))
		return err
	}
	source := report.Source
	if source == "" {
		source = "-"
	}
	fmt.Fprintf(e.stdout, "blocked: %v\nsource: %s\nclose status: %s\n", report.Blocked, source, report.CloseStatus)
	for _, sev := range tickets.Severities {
		if n, ok := report.Counts[sev]; ok {
			fmt.Fprintf(e.stdout, "%s: %s\n", sev, n)
		}
	}
	return nil
}

func failf(format string, args ...any) error {
	return &exitError{code: runner.ExitFailure, msg: "error: " + fmt.Sprintf(format, args...)}
}

// printJSON writes v as indented JSON, the form of every --json output.
func printJSON(w io.Writer, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(data))
	return err
}
