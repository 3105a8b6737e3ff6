// Command demo shows a real peal run on a fresh machine with only Go: it
// builds peal, a simulated agent and a simulated stet (or takes them from the
// go command's cache, where a run before left them), makes a scratch git
// repository, and runs the plan in this folder. The simulated agent fails its
// first execute of task 1 (so peal retries it); its second leaves a bug that
// the project's check (a stand-in for the project's tests) catches, and the
// address round, shown the check's output, fixes it; the review of task 2
// reports two findings: one dismissed by triage, one fixed in an address round.
// Then `peal report` tells the run as the Markdown table CI shows.
//
// Run it from the repository root: go run ./testdata/demo; with -keep
// (go run ./testdata/demo -keep) the scratch folder stays, and the demo
// prints the peal status and peal report commands to try on it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"peal/internal/gitrepo"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testbin"
)

func main() {
	keep := len(os.Args) > 1 && os.Args[1] == "-keep"
	if err := run(keep); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(keep bool) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "peal-demo-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(work)
	}
	step("building peal and the simulated agent and stet")
	if err := os.Chdir(root); err != nil {
		return err
	}
	bins, err := testbin.Programs(filepath.Join(work, "bin"), "peal/cmd/peal", "peal/testdata/fakeagent", "peal/testdata/fakestet")
	if err != nil {
		return err
	}

	repo, agentDir, stetDir := filepath.Join(work, "repo"), filepath.Join(work, "agent"), filepath.Join(work, "stet")
	for _, d := range []string{repo, agentDir, stetDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	gitEnv := []string{"GIT_AUTHOR_NAME=peal demo", "GIT_AUTHOR_EMAIL=demo@example.com",
		"GIT_COMMITTER_NAME=peal demo", "GIT_COMMITTER_EMAIL=demo@example.com"}
	for _, args := range [][]string{{"init", "-q"}, {"commit", "-q", "--allow-empty", "-m", "start"}} {
		if _, err := gitrepo.Plain(repo, gitEnv...).Command(args...).Run(context.Background()); err != nil {
			return err
		}
	}
	if err := writeScenarios(agentDir, stetDir); err != nil {
		return err
	}

	plan := filepath.Join(root, "testdata", "demo", "plan.md")
	args := []string{"run", "--plan", plan, "--repo", repo, "--state-dir", filepath.Join(work, "state"),
		"--agent-cmd", bins["fakeagent"], "--stet-path", bins["fakestet"],
		"--phase-retry-count", "1", "--phase-timeout-sec", "60", "--check-command", greetCheck,
		// The simulated agent keeps its scenario and its notes outside the
		// repository, which a confined call may not write by default.
		"--confine-env-pass", "FAKE_*", "--confine-write-paths", agentDir}
	step("peal " + strings.Join(args, " "))
	cmd := exec.Command(bins["peal"], args...)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), gitEnv...)
	cmd.Env = append(cmd.Env, fakes.AgentDirEnv+"="+agentDir, fakes.StetDirEnv+"="+stetDir, "CURSOR_API_KEY=demo-key")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("peal run: %w", err)
	}

	if err := show(work, plan, repo, agentDir, stetDir, bins["peal"]); err != nil {
		return err
	}
	if keep {
		// The run's state is found from the repository: these work from
		// any folder, without --state-dir.
		pealBin, err := keepCopy(bins["peal"], filepath.Join(work, "bin", "peal"))
		if err != nil {
			return err
		}
		step("kept the scratch folder " + work + "; look at the run with")
		for _, cmd := range []string{"status", "report"} {
			fmt.Printf("  %s %s --plan %s --repo %s\n", pealBin, cmd, plan, repo)
		}
		fmt.Printf("and remove it with\n  rm -rf %s\n", work)
	}
	return nil
}

// show prints what the demo's run did: the agent's and stet's calls, the
// state files, peal report's table and the scratch repository's history.
func show(work, plan, repo, agentDir, stetDir, peal string) error {
	calls, err := fakes.ReadCalls(agentDir)
	if err != nil {
		return err
	}
	step("agent calls, in order (phase:task)")
	fmt.Println("  " + strings.Join(fakes.Keys(fakes.Starts(calls)), "  "))
	for _, c := range fakes.Starts(calls) {
		if c.Key == "address:1" && len(c.Argv) > 0 {
			prompt := c.Argv[len(c.Argv)-1]
			if i := strings.Index(prompt, "---CHECK---"); i >= 0 {
				step("the failing check, as the address round of task 1 was shown it")
				fmt.Println(prompt[i:])
			}
		}
	}
	stetCalls, err := fakes.ReadStetCalls(stetDir)
	if err != nil {
		return err
	}
	step("stet calls, in order")
	fmt.Println("  " + strings.Join(fakes.StetCmds(stetCalls), " | "))
	for _, f := range []string{"state/state.json", "state/run_summary.json"} {
		data, err := os.ReadFile(filepath.Join(work, f))
		if err != nil {
			return err
		}
		step(f)
		fmt.Print(string(data))
	}
	// The report reads what the run wrote; it needs no agent.
	reportArgs := []string{"report", "--plan", plan, "--repo", repo, "--state-dir", filepath.Join(work, "state")}
	step("peal " + strings.Join(reportArgs, " "))
	report := exec.Command(peal, reportArgs...)
	report.Dir, report.Stdout, report.Stderr = work, os.Stdout, os.Stderr
	if err := report.Run(); err != nil {
		return fmt.Errorf("peal report: %w", err)
	}
	out, err := gitrepo.Plain(repo).Command("log", "--oneline").Run(context.Background())
	if err != nil {
		return err
	}
	step("git log of the scratch repository")
	fmt.Print(out)
	return nil
}

// greetCheck stands in for the project's tests (a shell snippet, as
// check_commands are): Greet must greet with "Hello, ".
const greetCheck = `test ! -f greet.go || grep -q '"Hello, "' greet.go || { echo "--- FAIL: TestGreet: Greet(\"Ann\") = \"Helo, Ann\", want \"Hello, Ann\""; exit 1; }`

// writeScenarios scripts the simulated agent and stet.
func writeScenarios(agentDir, stetDir string) error {
	agent := fakes.Scenario{Rules: map[string][]fakes.Outcome{
		"plan:1": {{Stdout: "Add greet.go with a Greet function and a test.\n"}},
		"execute:1": {
			{Exit: 1, Stderr: "simulated agent: connection to the model dropped"},
			{Stdout: "Wrote greet.go.\n", WriteFiles: map[string]string{"greet.go": "package greet\n\nfunc Greet(name string) string { return \"Helo, \" + name }\n"}},
		},
		// It fixes the typo only when the prompt quotes the failing test.
		"address:1": {{Stdout: "Fixed the greeting.\n", WhenPrompt: &fakes.PromptWrites{Contains: `--- FAIL: TestGreet: Greet("Ann") = "Helo, Ann"`,
			WriteFiles: map[string]string{"greet.go": "package greet\n\nfunc Greet(name string) string { return \"Hello, \" + name }\n"}}}},
		"plan:2": {{Stdout: "Add a README section on Greet.\n"}},
		// The simulated stet reports the findings planted in README.md.
		"execute:2": {{Stdout: "Wrote README.md.\n", WriteFiles: map[string]string{"README.md": "# greet\n\nGreet(name) says hello.\n"},
			Plant: []fakes.Finding{
				{ID: "S001", File: "README.md", Severity: "nitpick", Category: "style", Confidence: 0.4, Message: "title could be capitalised"},
				{ID: "S002", File: "README.md", Severity: "warning", Category: "documentation", Confidence: 0.9, Message: "example does not show the result", Suggestion: "show what Greet returns"},
			}}},
		"triage:2":  {{Stdout: "S001 is a matter of taste. We need to fix S002.\n"}},
		"address:2": {{Stdout: "Fixed the example.\n", StetFix: -1}},
	}}
	if err := fakes.WriteScenario(agentDir, agent); err != nil {
		return err
	}
	return fakes.WriteStetScenario(stetDir, fakes.StetScenario{})
}

func step(s string) { fmt.Printf("\n== %s\n", s) }

// keepCopy copies the program at from to to (unless it is there already),
// so that the kept folder holds the peal it names, whatever becomes of the
// go command's cache.
func keepCopy(from, to string) (string, error) {
	if from == to {
		return to, nil
	}
	data, err := os.ReadFile(from)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(to), 0o755)
	}
	if err == nil {
		err = os.WriteFile(to, data, 0o755)
	}
	return to, err
}

// moduleRoot finds the folder holding go.mod, from this file's place or the
// working folder.
func moduleRoot() (string, error) {
	_, file, _, _ := runtime.Caller(0)
	for _, start := range []string{filepath.Dir(file), "."} {
		dir, err := filepath.Abs(start)
		if err != nil {
			continue
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", fmt.Errorf("cannot find the peal module root: run the demo from the repository")
}
