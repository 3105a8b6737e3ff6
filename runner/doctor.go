package runner

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"peal/agent"
	"peal/config"
	"peal/phase"
	"peal/policy"
	"peal/review"
)

// DoctorLine is one line of `peal doctor`: one thing a run needs from the
// machine, and whether it is there.
type DoctorLine struct {
	Name   string
	Status string // DoctorOK, DoctorWarn or DoctorFail
	Detail string
}

// Statuses of a DoctorLine.
const (
	DoctorOK   = "ok"
	DoctorWarn = "warn"
	DoctorFail = "FAIL"
)

// Doctor checks what a run of cfg needs from the machine, without running
// a plan: for the agent (and the fallback agent) its binary, its version and
// whether it can authenticate (the same check a run makes before its first
// call), then stet. env is the environment the agents would get. cfg need
// not be validated: no plan or repository is required.
func Doctor(ctx context.Context, cfg *config.Config, env []string) []DoctorLine {
	var lines []DoctorLine
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
	for _, w := range wants {
		k, err := agent.Lookup(w.kind)
		if err != nil {
			lines = append(lines, DoctorLine{w.role + " kind", DoctorFail, err.Error()})
			continue
		}
		name := fmt.Sprintf("%s (%s)", w.role, k.Name)
		path, err := config.ResolveCommand(w.cmd)
		if err != nil {
			lines = append(lines, DoctorLine{name + " binary", DoctorFail, fmt.Sprintf("%q %v: install the %s CLI or set agent_cmd", w.cmd, err, k.Name)})
			continue
		}
		lines = append(lines, DoctorLine{name + " binary", DoctorOK, path})
		lines = append(lines, version(ctx, name, k, path, dir, env))
		st := k.CheckAuth(ctx, path, dir, env)
		switch {
		case st.OK:
			lines = append(lines, DoctorLine{name + " login", DoctorOK, st.Detail})
		case st.Known || (k.Auth.BeforeRun && !st.Unclear):
			lines = append(lines, DoctorLine{name + " login", DoctorFail, st.Detail + "; " + k.Auth.LoginHint})
		default:
			lines = append(lines, DoctorLine{name + " login", DoctorWarn, st.Detail})
		}
	}
	lines = append(lines, stetLine(cfg))
	return append(lines, confinementLines(cfg)...)
}

// confinementLines are what the confinement of cfg gives each kind of call
// here: a failure when confine = on cannot be enforced, a warning when
// auto cannot enforce files.
func confinementLines(cfg *config.Config) []DoctorLine {
	d, err := policy.Describe(cfg)
	if err != nil {
		return []DoctorLine{{"confinement", DoctorFail, err.Error()}}
	}
	status := DoctorOK
	if !d.Off && !d.Support.Files {
		status = DoctorWarn
	}
	out := []DoctorLine{{"confinement", status, d.Lines[0]}}
	for _, l := range d.Lines[1:] {
		out = append(out, DoctorLine{"confinement", DoctorOK, l})
	}
	return out
}

// version runs the CLI's version command.
func version(ctx context.Context, name string, k *agent.Kind, path, dir string, env []string) DoctorLine {
	res, err := runCommand(ctx, phase.Spec{Phase: "version", Argv: append([]string{path}, k.VersionArgs...), Dir: dir, Env: env,
		Timeout: agent.StatusTimeout, KillGrace: time.Second})
	if err != nil {
		return DoctorLine{name + " version", DoctorFail, err.Error()}
	}
	v := phase.LastMeaningful(res.Stdout)
	if v == "" {
		v = phase.LastMeaningful(res.Stderr)
	}
	return DoctorLine{name + " version", DoctorOK, v}
}

// stetLine says how Phase 3 would review, as a run would resolve it.
func stetLine(cfg *config.Config) DoctorLine {
	switch {
	case len(cfg.StetCommands) > 0:
		return DoctorLine{"stet", DoctorOK, "custom review commands: " + strings.Join(cfg.StetCommands, "; ")}
	case cfg.StetPath != "":
		if !review.Executable(cfg.StetPath) {
			return DoctorLine{"stet", DoctorFail, fmt.Sprintf("stet_path %s is not an executable file: a run would skip Phase 3", cfg.StetPath)}
		}
		return DoctorLine{"stet", DoctorOK, cfg.StetPath}
	}
	p, err := config.ResolveCommand("stet")
	if err != nil {
		return DoctorLine{"stet", DoctorWarn, "stet is not on PATH: runs skip Phase 3 (review)"}
	}
	return DoctorLine{"stet", DoctorOK, p}
}
