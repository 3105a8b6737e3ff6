package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"peal/config"
	"peal/internal/procs"
	"peal/internal/safefs"
	"peal/report"
	"peal/state"
)

// ReportCmd is `peal report`: the story of the last run of this
// configuration, as a job summary, a JSON document or an HTML timeline.
type ReportCmd struct {
	configFlags
	Format string `help:"text (for a person at a terminal), markdown (GitHub's job-summary subset), json (a stable document), html (one self-contained page with a timeline), or auto: text when stdout is a terminal, else markdown." enum:"auto,text,markdown,json,html" default:"auto"`
	Output string `help:"Write the report to this file (atomically) instead of stdout." placeholder:"FILE" type:"path"`
	// LogLines is how many first lines of each agent log the report quotes.
	LogLines uint `help:"First lines of each call's agent log (agent_log_dir) shown in the HTML and JSON reports." default:"8" placeholder:"N"`
}

// reportKeys are the keys `peal report` reads: those of status, and where
// the Markdown summary goes in CI.
var reportKeys = append(append([]string(nil), statusKeys...), "report_step_summary")

// Run writes the report. It reads the plan, the state folder, the store and
// the agent logs; it writes nothing but its output, and needs no agent CLI.
func (c *ReportCmd) Run(e *env) error {
	cfg, err := c.load(e)
	if err == nil {
		cfg.ReadOnly = true
		err = cfg.ValidateWithoutAgent()
	}
	if err != nil {
		return failf("%v", err)
	}
	status, warnings, err := report.Status(cfg)
	if err != nil {
		// A plan peal had to normalize has no tasks to read: the record
		// still tells the run.
		warnings = append(warnings, err.Error())
	}
	events, skipped, rerr := state.ReadRecord(filepath.Join(cfg.StateDir, state.RecordName))
	if rerr != nil && !os.IsNotExist(rerr) {
		warnings = append(warnings, fmt.Sprintf("run record %s cannot be read: %v", filepath.Join(cfg.StateDir, state.RecordName), safefs.Reason(rerr)))
	}
	if skipped > 0 {
		warnings = append(warnings, fmt.Sprintf("run record %s: %d lines that are not JSON objects were skipped", filepath.Join(cfg.StateDir, state.RecordName), skipped))
	}
	for _, n := range cfg.Notes {
		fmt.Fprintf(e.stderr, "peal: note: %s\n", n)
	}
	for _, w := range append(cfg.Warnings, warnings...) {
		fmt.Fprintf(e.stderr, "peal: warning: %s\n", w)
	}
	rep := report.Build(report.Input{Events: events, Status: status, Now: e.now(), Alive: procs.Alive, LogLines: int(c.LogLines)})

	format := c.Format
	if format == "auto" {
		format = "markdown"
		if _, onTerminal := terminalWidth(e.stdout); onTerminal && c.Output == "" {
			format = "text"
		}
	}
	var out bytes.Buffer
	switch format {
	case "text":
		err = report.Text(&out, rep)
	case "json":
		err = printJSON(&out, rep)
	case "html":
		err = report.HTML(&out, rep)
	default:
		err = report.Markdown(&out, rep)
	}
	if err != nil {
		return failf("report: %v", err)
	}
	var md []byte // the Markdown summary, when it is what was asked for
	if format == "markdown" {
		md = out.Bytes()
	}
	if err := c.stepSummary(e, rep, md, cfg.ReportStepSummary); err != nil {
		return err
	}
	if c.Output == "" {
		_, err := e.stdout.Write(out.Bytes())
		return err
	}
	if err := safefs.WriteFile(c.Output, out.Bytes()); err != nil {
		return failf("report %s cannot be written: %v (check --output)", c.Output, safefs.Reason(err))
	}
	return nil
}

// stepSummary appends the Markdown summary (md, or rendered from rep when
// nil) to $GITHUB_STEP_SUMMARY when it is set and report_step_summary is on
// (unset: on when CI=true).
func (c *ReportCmd) stepSummary(e *env, rep report.Report, md []byte, on config.StepSummary) error {
	path := lookupEnv(e.environ, "GITHUB_STEP_SUMMARY")
	enabled := on == config.StepSummaryTrue || on == config.StepSummaryAuto && lookupEnv(e.environ, "CI") == "true"
	if path == "" || !enabled {
		return nil
	}
	if md == nil {
		var buf bytes.Buffer
		if err := report.Markdown(&buf, rep); err != nil {
			return failf("report: %v", err)
		}
		md = buf.Bytes()
	}
	f, err := safefs.OpenAppend(path)
	if err == nil {
		_, err = f.Write(append(slices.Clip(md), '\n'))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return failf("job summary %s (GITHUB_STEP_SUMMARY) cannot be written: %v (turn report_step_summary off to skip it)", path, safefs.Reason(err))
	}
	return nil
}
