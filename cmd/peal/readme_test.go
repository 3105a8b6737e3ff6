package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"peal/check"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testbin"
	"peal/internal/testkit/testgit"
	"peal/state"
)

// readmeBlocks are the lines of the ```sh blocks of README.md's section
// under the heading "## "+section, a block each.
func readmeBlocks(t *testing.T, section string) [][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "\n## "+section+"\n")
	if start < 0 {
		t.Fatalf("README.md has no section %q", section)
	}
	text = text[start+1:]
	if end := strings.Index(text[3:], "\n## "); end >= 0 {
		text = text[:end+3]
	}
	var blocks [][]string
	for {
		open := strings.Index(text, "```sh\n")
		if open < 0 {
			return blocks
		}
		text = text[open+len("```sh\n"):]
		end := strings.Index(text, "```")
		var lines []string
		for _, l := range strings.Split(strings.TrimRight(text[:end], "\n"), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
		blocks = append(blocks, lines)
		text = text[end+3:]
	}
}

// readmeTwoTasks stands for the LLM's answer to `peal prompt` in the
// Quick start.
const readmeTwoTasks = "# Greeting\n\n## Task 1\nAdd a Greet function.\n\n## Task 2\nDocument Greet in NOTES.md.\n"

// TestReadmeQuickStart runs the Quick start of README.md as it is written,
// on a small Go project, with the simulated agent as `agent` and the
// simulated stet as `stet` on PATH: every command exits 0, the plan saved
// and committed as it says does not stop stet, the retry-state command
// names a real ticket, and `peal status` and `peal report` started from
// another folder say what they say in the project. The demo's lines are
// TestDemo's.
func TestReadmeQuickStart(t *testing.T) {
	t.Parallel()
	dir := testbin.ListSafeDir(t)
	proj, bin, agentDir, stetDir, elsewhere := filepath.Join(dir, "greet"), filepath.Join(dir, "bin"), filepath.Join(dir, "agent"), filepath.Join(dir, "stet"), filepath.Join(dir, "elsewhere")
	for _, d := range []string{proj, bin, agentDir, stetDir, elsewhere} {
		os.MkdirAll(d, 0o755)
	}
	for name, target := range map[string]string{"peal": bins["peal"], "agent": bins["fakeagent"], "stet": bins["fakestet"]} {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	// The project: a Go module whose tests pass, committed.
	testgit.Init(t, proj)
	for name, text := range map[string]string{
		"go.mod":        "module example.com/greet\n\ngo 1.21\n",
		"greet.go":      "package greet\n\nfunc Greet(name string) string { return \"Hi, \" + name }\n",
		"greet_test.go": "package greet\n\nimport \"testing\"\n\nfunc TestGreet(t *testing.T) {\n\tif Greet(\"Ann\") == \"\" {\n\t\tt.Fatal(\"empty\")\n\t}\n}\n",
	} {
		os.WriteFile(filepath.Join(proj, name), []byte(text), 0o644)
	}
	testgit.Git(t, proj, "add", "-A")
	testgit.Git(t, proj, "commit", "-q", "-m", "start")
	if err := fakes.WriteScenario(agentDir, fakes.Scenario{Rules: map[string][]fakes.Outcome{
		"execute:1": {{WriteFiles: map[string]string{"greet.go": "package greet\n\nfunc Greet(name string) string { return \"Hello, \" + name }\n"}}},
		"execute:2": {{WriteFiles: map[string]string{"NOTES.md": "Greet(name) says hello.\n"}}},
	}}); err != nil {
		t.Fatal(err)
	}
	fakes.WriteStetScenario(stetDir, fakes.StetScenario{})
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	env := append([]string{"PATH=" + bin + string(os.PathListSeparator) + testbin.PathWithout(os.Getenv("PATH"), "stet"), "HOME=" + dir,
		"CURSOR_API_KEY=test-key", fakes.AgentDirEnv + "=" + agentDir, fakes.StetDirEnv + "=" + stetDir,
		// What this machine lets the simulated agent do where it is
		// confined: keep its records; and the checks' go uses the tests'
		// build cache.
		"GOCACHE=" + strings.TrimSpace(string(gocache)), "PEAL_CONFINE_ENV_PASS=FAKE_*,GOCACHE", "PEAL_CONFINE_WRITE_PATHS=" + agentDir}, testgit.Env...)

	sh := func(where, line string) result {
		t.Helper()
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir, cmd.Env = where, env
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatal(err)
		}
		return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
	}
	saved, ran := false, 0
	for _, block := range readmeBlocks(t, "Quick start") {
		for _, line := range block {
			switch {
			case strings.HasPrefix(line, "go run ./testdata/demo"):
				continue // TestDemo's
			case strings.HasPrefix(line, "#"):
				if strings.Contains(line, "save its answer as plan.md") {
					os.WriteFile(filepath.Join(proj, "plan.md"), []byte(readmeTwoTasks), 0o644)
					saved = true
				}
				continue
			}
			r := sh(proj, line)
			ran++
			if r.code != 0 {
				t.Fatalf("%s\nexit %d\nstdout:\n%s\nstderr:\n%s", line, r.code, r.stdout, r.stderr)
			}
			switch {
			case strings.HasPrefix(line, "peal prompt") && !strings.Contains(line, ">"):
				if !strings.Contains(r.stdout, "## Task 1") || !strings.Contains(r.stdout, "---WHAT TO BUILD---\ngreet people by name\n") {
					t.Fatalf("peal prompt printed:\n%s", r.stdout)
				}
			case line == "peal doctor":
				// In the project, with the paths as a run takes them: the
				// agent's probes run (confined as its calls are).
				for _, want := range []string{"ok    agent (cursor) version: ", "ok    agent (cursor) login: CURSOR_API_KEY is set", "ok    stet: "} {
					if !strings.Contains(r.stdout, want) {
						t.Fatalf("peal doctor lacks %q:\n%s", want, r.stdout)
					}
				}
			case strings.HasPrefix(line, "peal config "):
				// The confinement is described with the full paths a run
				// makes of the relative ones.
				if !strings.Contains(r.stdout, filepath.Join(proj, ".peal")+" (peal's state folder)") {
					t.Fatalf("%s: the state folder is not named in full:\n%s", line, r.stdout)
				}
			case line == "peal clean":
				// The run's worktree and branch are gone, the work tree is
				// as the run left it.
				if got := testgit.Git(t, proj, "worktree", "list", "--porcelain"); strings.Count(got, "worktree ") != 1 {
					t.Fatalf("%s: worktrees left:\n%s\n%s", line, got, r.stdout)
				}
				if got := pealBranches(t, proj); got != "" {
					t.Fatalf("%s: branches left: %q\n%s", line, got, r.stdout)
				}
			case strings.Contains(line, "--check-command 'go test ./...'"):
				// The project's tests ran, and passed, after each execute.
				events, _, err := state.ReadRecord(filepath.Join(proj, ".peal", state.RecordName))
				passed := 0
				for _, ev := range events {
					if ev.Ev == state.EvCheck && ev.Command == "go test ./..." && check.Stage(ev.Stage) == check.Execute && ev.ExitCode != nil && *ev.ExitCode == 0 {
						passed++
					}
				}
				if err != nil || passed != 2 {
					t.Fatalf("%s: %d passing checks after an execute, want 2 (%v)\n%s", line, passed, err, r.stderr)
				}
			case strings.HasPrefix(line, "peal retry-state show "):
				if !strings.HasPrefix(r.stdout, "ticket "+strings.Fields(line)[3]+": status closed") {
					t.Fatalf("%s:\n%s", line, r.stdout)
				}
			}
		}
	}
	if !saved || ran < 10 {
		t.Fatalf("the Quick start changed: plan saved %v, %d commands run", saved, ran)
	}
	if got := strings.Join(fakes.Keys(fakes.Starts(mustCalls(t, agentDir))), " "); got != "plan:1 execute:1 plan:2 execute:2" {
		t.Fatalf("agent calls %q", got)
	}
	stet, err := fakes.ReadStetCalls(stetDir)
	if err != nil || !strings.Contains(strings.Join(fakes.StetCmds(stet), " | "), "start") {
		t.Fatalf("stet calls %v, %v", fakes.StetCmds(stet), err)
	}
	if got := testgit.Git(t, proj, "status", "--porcelain"); got != "" {
		t.Fatalf("the project is left with uncommitted changes:\n%s", got)
	}
	// The same answers from another folder.
	for _, cmd := range []string{"status", "report"} {
		here := sh(proj, "peal "+cmd+" --plan plan.md --repo .")
		there := sh(elsewhere, "peal "+cmd+" --plan ../greet/plan.md --repo ../greet")
		if here.code != 0 || there.code != 0 || here.stdout != there.stdout || !strings.Contains(here.stdout, "completed") {
			t.Fatalf("peal %s: in the project (exit %d):\n%s\nelsewhere (exit %d):\n%s%s", cmd, here.code, here.stdout, there.code, there.stdout, there.stderr)
		}
	}
	store := filepath.Join(proj, ".peal", "knowledge")
	if r := sh(elsewhere, "peal retry-state show planlinoj-2 --repo ../greet"); r.code != 0 || !strings.HasPrefix(r.stdout, "ticket planlinoj-2: status closed") ||
		r.stderr != "peal: note: ticket planlinoj-2 is in the store "+store+", of a state folder the repository notes\n" {
		t.Fatalf("retry-state from elsewhere: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := sh(proj, "peal retry-state show plan-2"); r.code != 1 ||
		r.stderr != "peal: error: no retry state for ticket plan-2 in "+store+"; its tickets: planlinoj-1, planlinoj-2 (peal status shows each task's ticket)\n" {
		t.Fatalf("retry-state of a ticket that is not there: exit %d\n%s", r.code, r.stderr)
	}
}

func mustCalls(t *testing.T, dir string) []fakes.Call {
	t.Helper()
	calls, err := fakes.ReadCalls(dir)
	if err != nil {
		t.Fatal(err)
	}
	return calls
}

// TestUncommittedPlanNamed: a plan saved in the repository and not
// committed stops a run with stet before any agent call, with one line
// that says it is the plan and how to keep it out of the review's way.
func TestUncommittedPlanNamed(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, plan3)
	stetDir := filepath.Join(s.dir, "stet")
	os.MkdirAll(stetDir, 0o755)
	fakes.WriteStetScenario(stetDir, fakes.StetScenario{})
	env := append(s.env("FAKE_STET_DIR="+stetDir, "PEAL_STET_PATH="+bins["fakestet"]), testgit.Env...)
	s.git(env, "commit", "-q", "--allow-empty", "-m", "root")
	os.WriteFile(filepath.Join(s.repo, "plan.md"), []byte(plan3), 0o644)
	r := s.peal(append(env, "PEAL_PLAN_PATH="+filepath.Join(s.repo, "plan.md")), "run")
	want := "peal: error: repository " + s.repo + " has uncommitted changes (plan.md), the plan plan.md among them: stet reviews commits only and refuses to start a review over them; " +
		"commit the plan (git add plan.md && git commit), or keep it outside the repository, and commit or stash the rest"
	if r.code != 1 || lastLine(r.stderr) != want || s.keys() != "" {
		t.Fatalf("exit %d, calls %q, last line:\n%s\nwant:\n%s", r.code, s.keys(), lastLine(r.stderr), want)
	}
}
