// Package doctor owns `peal doctor`: what a run of a configuration needs
// from the machine (each agent CLI found, its version, whether it can log
// in; stet; the confinement this machine enforces), checked without
// running a plan.
package doctor

import (
	"context"
	"fmt"
	"os"
	"time"

	"peal/agent"
	"peal/config"
	"peal/internal/text"
	"peal/phase"
	"peal/policy"
	"peal/review"
)

// Line is one line of `peal doctor`: one thing a run needs from the
// machine, and whether it is there.
type Line struct {
	Name   string
	Status string // OK, Warn or Fail
	Detail string
	// Items are what Detail lists, a thing each (a path, a host), for a
	// line of their own each.
	Items []string
}

// Statuses of a Line.
const (
	OK   = "ok"
	Warn = "warn"
	Fail = "FAIL"
)

// Check checks what a run of cfg needs from the machine, without running
// a plan: for the agent (and the fallback agent) its binary, its version and
// whether it can authenticate (the same check a run makes before its first
// call), then stet. env is the environment the agents would get. cfg need
// not be validated: no plan or repository is required.
func Check(ctx context.Context, cfg *config.Config, env []string) []Line {
	var lines []Line
	type want struct {
		role, kind, cmd string
	}
	wants := []want{{"agent", cfg.AgentKind, cfg.AgentCmd}}
	if cfg.FallbackAgentCmd != "" {
		wants = append(wants, want{"fallback agent", cfg.FallbackKind(), cfg.FallbackAgentCmd})
	}
	dir := cfg.RepoPath
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		dir = ""
	}
	// The probes run the agent CLI, whose own folders a confined call may
	// write: they are confined as its calls are, in the repository (or a
	// folder of their own).
	confined, cerr := probes(cfg, dir)
	defer confined.close()
	for _, w := range wants {
		k, err := agent.Lookup(w.kind)
		if err != nil {
			lines = append(lines, Line{w.role + " kind", Fail, err.Error(), nil})
			continue
		}
		name := fmt.Sprintf("%s (%s)", w.role, k.Name)
		path, err := config.ResolveCommand(w.cmd)
		if err != nil {
			lines = append(lines, Line{name + " binary", Fail, fmt.Sprintf("%q %v: install the %s CLI or set agent_cmd", w.cmd, err, k.Name), nil})
			continue
		}
		lines = append(lines, Line{name + " binary", OK, path, nil})
		if cerr != nil {
			lines = append(lines, Line{name + " version and login", Fail, "not checked: the confinement cannot be set up: " + cerr.Error(), nil})
			continue
		}
		prepare := confined.prepare(k)
		lines = append(lines, version(ctx, name, k, path, dir, env, prepare))
		st := k.CheckAuth(ctx, path, dir, env, prepare)
		switch {
		case st.OK:
			lines = append(lines, Line{name + " login", OK, st.Detail, nil})
		case st.Err != nil:
			// Why it could not run is the one thing to fix: a login
			// hint would send the person after credentials instead.
			status := Warn
			if k.Auth.BeforeRun {
				status = Fail
			}
			lines = append(lines, Line{name + " login", status, st.Detail, nil})
		case st.Known || (k.Auth.BeforeRun && !st.Unclear):
			// What the check found, then what to do, a line each.
			lines = append(lines, Line{name + " login", Fail, st.Detail, []string{k.Auth.LoginHint}})
		default:
			lines = append(lines, Line{name + " login", Warn, st.Detail, nil})
		}
	}
	lines = append(lines, stetLine(cfg))
	return append(lines, confinementLines(cfg)...)
}

// confinementLines are what the confinement of cfg gives each kind of call
// here, a line a section with its items: a failure when confine = on
// cannot be enforced, a warning when auto cannot enforce files.
func confinementLines(cfg *config.Config) []Line {
	d, err := policy.Describe(cfg)
	if err != nil {
		return []Line{{"confinement", Fail, err.Error(), nil}}
	}
	status := OK
	if !d.Off && !d.Support.Files {
		status = Warn
	}
	var out []Line
	for i, sec := range d.Sections {
		st := OK
		if i == 0 {
			st = status
		}
		out = append(out, Line{"confinement", st, sec.Head, sec.Items})
	}
	return out
}

// probeRules confine doctor's probes of the agent CLIs as a run confines
// its calls of their kinds.
type probeRules struct {
	rules *policy.Rules // nil: confine = off
	tree  string        // the site's tree: the repository, or tmp
	tmp   string        // the probes' temporary folders
}

// probes are the rules of doctor's probes under cfg, at dir (the
// repository; "" when there is none).
func probes(cfg *config.Config, dir string) (*probeRules, error) {
	rules, err := policy.New(cfg, nil)
	if err != nil || rules == nil {
		return &probeRules{}, err
	}
	tmp, err := os.MkdirTemp("", "peal-doctor-")
	if err != nil {
		return &probeRules{}, err
	}
	p := &probeRules{rules: rules, tree: dir, tmp: tmp}
	if p.tree == "" {
		p.tree = tmp
	}
	return p, nil
}

// prepare confines a probe of the CLI of kind k.
func (p *probeRules) prepare(k *agent.Kind) func(*phase.Spec) {
	if p.rules == nil {
		return nil
	}
	return func(spec *phase.Spec) {
		spec.TempRoot = p.tmp
		spec.Env = nil // it inherits the allowed part of peal's environment
		spec.Confine = p.rules.ForCall(policy.Site{Tree: p.tree}, k, nil)
	}
}

// close removes the probes' temporary folder.
func (p *probeRules) close() {
	if p.tmp != "" {
		os.RemoveAll(p.tmp)
	}
}

// version runs the CLI's version command, readied by prepare (nil: as it
// is).
func version(ctx context.Context, name string, k *agent.Kind, path, dir string, env []string, prepare func(*phase.Spec)) Line {
	spec := phase.Spec{Phase: phase.Version, Argv: append([]string{path}, k.VersionArgs...), Dir: dir, Env: env,
		Timeout: agent.StatusTimeout, KillGrace: time.Second}
	if prepare != nil {
		prepare(&spec)
	}
	res, err := phase.Run(ctx, spec)
	if err == nil {
		err = phase.CheckExit(res)
	}
	if err != nil {
		return Line{name + " version", Fail, err.Error(), nil}
	}
	v := text.LastMeaningful(res.Stdout)
	if v == "" {
		v = text.LastMeaningful(res.Stderr)
	}
	return Line{name + " version", OK, v, nil}
}

// stetLine says how Phase 3 would review, as a run would resolve it.
func stetLine(cfg *config.Config) Line {
	switch {
	case len(cfg.StetCommands) > 0:
		return Line{"stet", OK, "custom review commands", cfg.StetCommands}
	case cfg.StetPath != "":
		if !review.Executable(cfg.StetPath) {
			return Line{"stet", Fail, fmt.Sprintf("stet_path %s is not an executable file: a run would skip Phase 3", cfg.StetPath), nil}
		}
		return Line{"stet", OK, cfg.StetPath, nil}
	}
	p, err := config.ResolveCommand("stet")
	if err != nil {
		return Line{"stet", Warn, "stet is not on PATH: runs skip Phase 3 (review)", nil}
	}
	return Line{"stet", OK, p, nil}
}
