package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// pealIn runs peal in the folder dir.
func (s *sandbox) pealIn(dir string, env []string, args ...string) result {
	s.t.Helper()
	cmd := exec.Command(bins["peal"], args...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		s.t.Fatal(err)
	}
	return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

// TestStateFoundFromTheRepository: a run started in the repository keeps
// its state in .peal there; `peal status`, `peal report` and `peal run`
// started from another folder find it (and say where it is), and give the
// same answers as from the repository. A state_dir set to a folder that
// holds none of the plan's state, or state in two folders, stops a run
// with one line saying where the state is (nothing starts the plan over),
// while status and report read the state where it is and say so.
func TestStateFoundFromTheRepository(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, plan3)
	elsewhere := filepath.Join(s.dir, "elsewhere")
	os.Mkdir(elsewhere, 0o755)
	env := without(s.env(), "PEAL_STATE_DIR")
	state := filepath.Join(s.repo, ".peal")
	if r := s.pealIn(s.repo, env, "run"); r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	calls := s.keys()
	if _, err := os.Stat(filepath.Join(state, "state.json")); err != nil {
		t.Fatalf("the state is not in .peal of the working folder: %v", err)
	}
	note := "peal: note: state folder " + state + ": where the last run of this plan kept its state (noted in " + filepath.Join(s.repo, ".git", "peal", "states") + ")\n"
	for _, args := range [][]string{{"status"}, {"status", "--json"}, {"report"}} {
		here, there := s.pealIn(s.repo, env, args...), s.pealIn(elsewhere, env, args...)
		if here.code != 0 || there.code != 0 || here.stdout != there.stdout {
			t.Fatalf("%v: from the repository (exit %d):\n%s\nfrom elsewhere (exit %d):\n%s%s", args, here.code, here.stdout, there.code, there.stdout, there.stderr)
		}
		if here.stderr != "" || there.stderr != note {
			t.Fatalf("%v: stderr %q here, %q elsewhere; want %q elsewhere", args, here.stderr, there.stderr, note)
		}
	}
	if r := s.pealIn(elsewhere, env, "status"); !strings.Contains(r.stdout, "1     completed") || !strings.Contains(r.stdout, "3     completed") {
		t.Fatalf("status elsewhere:\n%s", r.stdout)
	}
	// A run from elsewhere goes on where the state is: nothing runs again.
	if r := s.pealIn(elsewhere, env, "run"); r.code != 0 || !strings.Contains(r.stderr, "every selected task is already completed") {
		t.Fatalf("run elsewhere: exit %d\n%s", r.code, r.stderr)
	}
	if got := s.keys(); got != calls {
		t.Fatalf("a run from elsewhere called %q, after %q", got, calls)
	}
	if _, err := os.Stat(filepath.Join(elsewhere, ".peal")); !os.IsNotExist(err) {
		t.Fatalf("a state folder was made in the other folder: %v", err)
	}

	// A state folder set by hand that holds none of the plan's state.
	fresh := filepath.Join(elsewhere, "fresh")
	want := "peal: error: the state of plan " + s.plan + " is in " + state + ", where its last run kept it, and state_dir " + fresh +
		" (set by PEAL_STATE_DIR) holds none: point state_dir at " + state + " to go on, or remove that folder to start the plan over\n"
	if r := s.pealIn(elsewhere, append(env, "PEAL_STATE_DIR="+fresh), "run"); r.code != 1 || r.stderr != want || r.stdout != "" {
		t.Fatalf("run with a fresh state folder: exit %d, stdout %q, stderr %q; want %q", r.code, r.stdout, r.stderr, want)
	}
	// The commands that only read never refuse over where the state is:
	// they read it there, and say so.
	read := "peal: note: state folder " + state + ": where the last run of this plan kept its state; " + fresh +
		" (set by PEAL_STATE_DIR) holds none of it, and a run there would be refused\n"
	for _, args := range [][]string{{"status"}, {"report"}} {
		r, here := s.pealIn(elsewhere, append(env, "PEAL_STATE_DIR="+fresh), args...), s.pealIn(s.repo, env, args...)
		if r.code != 0 || r.stderr != read || r.stdout != here.stdout {
			t.Fatalf("%v with a fresh state folder: exit %d, stdout %q, stderr %q; want %q", args, r.code, r.stdout, r.stderr, read)
		}
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Fatalf("the fresh state folder was made: %v", err)
	}

	// State in two folders: .peal here, and where the last run kept it.
	os.Mkdir(filepath.Join(elsewhere, ".peal"), 0o755)
	data, _ := os.ReadFile(filepath.Join(state, "state.json"))
	os.WriteFile(filepath.Join(elsewhere, ".peal", "state.json"), data, 0o644)
	want = "peal: error: plan " + s.plan + " has state in " + state + ", where its last run kept it, and in " + filepath.Join(elsewhere, ".peal") +
		" (.peal in the working folder): choose one with --state-dir or PEAL_STATE_DIR\n"
	if r := s.pealIn(elsewhere, env, "run"); r.code != 1 || r.stderr != want {
		t.Fatalf("state in two folders: exit %d, stderr %q; want %q", r.code, r.stderr, want)
	}
	read = "peal: note: state folder " + state + ": where the last run of this plan kept its state; " + filepath.Join(elsewhere, ".peal") +
		" (.peal in the working folder) holds some too, and a run there would be refused\n"
	if r := s.pealIn(elsewhere, env, "status"); r.code != 0 || r.stderr != read {
		t.Fatalf("status, state in two folders: exit %d, stderr %q; want %q", r.code, r.stderr, read)
	}
	if r := s.pealIn(elsewhere, append(env, "PEAL_STATE_DIR=.peal"), "status"); r.code != 0 ||
		r.stderr != "peal: warning: plan "+s.plan+" also has state in "+state+", where its last run kept it; this command uses "+filepath.Join(elsewhere, ".peal")+" (set by PEAL_STATE_DIR)\n" {
		t.Fatalf("state in two folders, one chosen: exit %d, stderr %q", r.code, r.stderr)
	}
	if got := s.keys(); got != calls {
		t.Fatalf("agent called: %q, after %q", got, calls)
	}
}
