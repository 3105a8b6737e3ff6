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
	"peal/review"
)

// Check is one line of `peal doctor`.
type Check struct {
	Name   string
	Status string // CheckOK, CheckWarn or CheckFail
	Detail string
}

// Statuses of a Check.
const (
	CheckOK   = "ok"
	CheckWarn = "warn"
	CheckFail = "FAIL"
)

// Doctor checks what a run of cfg needs from the machine, without running
// a plan: for the agent (and the fallback agent) its binary, its version and
// whether it can authenticate (the same check a run makes before its first
// call), then stet. env is the environment the agents would get. cfg need
// not be validated: no plan or repository is required.
func Doctor(ctx context.Context, cfg *config.Config, env []string) []Check {
	var checks []Check
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
			checks = append(checks, Check{w.role + " kind", CheckFail, err.Error()})
			continue
		}
		name := fmt.Sprintf("%s (%s)", w.role, k.Name)
		path, err := config.ResolveCommand(w.cmd)
		if err != nil {
			checks = append(checks, Check{name + " binary", CheckFail, fmt.Sprintf("%q %v: install the %s CLI or set agent_cmd", w.cmd, err, k.Name)})
			continue
		}
		checks = append(checks, Check{name + " binary", CheckOK, path})
		checks = append(checks, version(ctx, name, k, path, dir, env))
		st := k.CheckAuth(ctx, path, dir, env)
		switch {
		case st.OK:
			checks = append(checks, Check{name + " login", CheckOK, st.Detail})
		case st.Known || (k.Auth.BeforeRun && !st.Unclear):
			checks = append(checks, Check{name + " login", CheckFail, st.Detail + "; " + k.Auth.LoginHint})
		default:
			checks = append(checks, Check{name + " login", CheckWarn, st.Detail})
		}
	}
	return append(checks, stetCheck(cfg))
}

// version runs the CLI's version command.
func version(ctx context.Context, name string, k *agent.Kind, path, dir string, env []string) Check {
	res, err := phase.Run(ctx, phase.Spec{Phase: "version", Argv: append([]string{path}, k.VersionArgs...), Dir: dir, Env: env,
		Timeout: agent.StatusTimeout, KillGrace: time.Second})
	if err == nil {
		err = phase.CheckExit(res)
	}
	if err != nil {
		return Check{name + " version", CheckFail, err.Error()}
	}
	v := phase.LastMeaningful(res.Stdout)
	if v == "" {
		v = phase.LastMeaningful(res.Stderr)
	}
	return Check{name + " version", CheckOK, v}
}

// stetCheck says how Phase 3 would review, as a run would resolve it.
func stetCheck(cfg *config.Config) Check {
	switch {
	case len(cfg.StetCommands) > 0:
		return Check{"stet", CheckOK, "custom review commands: " + strings.Join(cfg.StetCommands, "; ")}
	case cfg.StetPath != "":
		if !review.Executable(cfg.StetPath) {
			return Check{"stet", CheckFail, fmt.Sprintf("stet_path %s is not an executable file: a run would skip Phase 3", cfg.StetPath)}
		}
		return Check{"stet", CheckOK, cfg.StetPath}
	}
	p, err := config.ResolveCommand("stet")
	if err != nil {
		return Check{"stet", CheckWarn, "stet is not on PATH: runs skip Phase 3 (review)"}
	}
	return Check{"stet", CheckOK, p}
}
