package integration

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"peal/internal/testkit/mockllm"
	"peal/internal/testkit/testbin"
	"peal/report"
)

// The files of the measured task: the careful agent reads each before it
// plans or writes, unless the conversation it is sent holds its content.
var contextFiles = map[string]string{
	"docs/design.txt": "DESIGN-NOTES-7f3a\n" + strings.Repeat("The status file records whether the service is healthy; it is written by the release step.\n", 40),
	"src/status.txt":  "STATUS-SPEC-91c2\n" + strings.Repeat("A healthy status is the single word fixed on the first line, nothing else.\n", 40),
}

// The markers of the files' contents, and of what the agent writes.
var (
	contentMarks = map[string]string{"docs/design.txt": "DESIGN-NOTES-7f3a", "src/status.txt": "STATUS-SPEC-91c2"}
	planAnswer   = "PLAN-SESSION: write status.txt after reading docs/design.txt and src/status.txt."
	firstTry     = "STATUS-FIRST-TRY\n"
	fixedStatus  = "fixed\n"
)

// sessionPhase is the peal phase a request belongs to: the fence of peal's
// latest prompt in the conversation it carries (a resumed conversation
// holds the earlier prompts too, before it).
func sessionPhase(userText string) string {
	phase, at := "", -1
	for _, f := range []struct{ fence, phase string }{{"---TASK---", "plan"}, {"---PLAN---", "execute"}, {"---CHECK---", "address"}} {
		if i := strings.LastIndex(userText, f.fence); i > at {
			phase, at = f.phase, i
		}
	}
	return phase
}

// carefulAgent answers as a careful agent does: before it plans or writes,
// it reads each context file whose content is not in the conversation it
// is sent (one tool call a request), and before it changes status.txt, the
// file as it is, unless the conversation holds it; then it answers the
// plan, writes the execute's first try, or, asked to address a failing
// check, writes the fix; once its write is in the conversation, it says it
// is done. Requests
// offering no tools (titles, summaries) are left to the script's default.
func carefulAgent(repo string) mockllm.Script {
	return mockllm.Script{BodyTokens: true, Answer: func(req mockllm.Request) (mockllm.Reply, bool) {
		phase := sessionPhase(req.UserText)
		if len(req.Tools) == 0 || phase == "" {
			return mockllm.Reply{}, false
		}
		body := string(req.Body)
		for _, name := range []string{"docs/design.txt", "src/status.txt"} {
			if !strings.Contains(body, contentMarks[name]) {
				return mockllm.Reply{Text: "Reading " + name + ".", Tool: mockllm.ReadFile(filepath.Join(repo, name))}, true
			}
		}
		status := filepath.Join(repo, "status.txt")
		if phase == "address" && !strings.Contains(body, strings.TrimSpace(firstTry)) {
			// The file to change, as it is now.
			return mockllm.Reply{Text: "Reading status.txt.", Tool: mockllm.ReadFile(status)}, true
		}
		switch phase {
		case "plan":
			return mockllm.Reply{Text: planAnswer}, true
		case "execute":
			if !strings.Contains(body, "EXECUTE-WRITES") {
				return mockllm.Reply{Text: "EXECUTE-WRITES status.txt.", Tool: mockllm.WriteFile(status, firstTry)}, true
			}
			return mockllm.Reply{Text: "EXECUTE-DONE"}, true
		}
		if !strings.Contains(body, "ADDRESS-WRITES") {
			return mockllm.Reply{Text: "ADDRESS-WRITES the fix.", Tool: mockllm.WriteFile(status, fixedStatus)}, true
		}
		return mockllm.Reply{Text: "ADDRESS-DONE"}, true
	}}
}

// sessionCheck fails while status.txt exists and is not fixed: it passes on
// the starting tree, fails after the execute's first try, and passes once
// the address round wrote the fix.
const sessionCheck = `test ! -e status.txt || grep -qx fixed status.txt || { echo "--- FAIL: status.txt is not fixed"; exit 1; }`

// phaseCost is what one phase's calls took from the model.
type phaseCost struct {
	requests, reads int
	bytes           int
	tokensIn        int64
	carried         bool // its first request held the execute's conversation
}

// sessionRun is one measured run of the task.
type sessionRun struct {
	mode    string
	phases  map[string]*phaseCost
	total   phaseCost
	elapsed time.Duration
}

// measureSessions runs the measured task through CLI a with agent_session
// = mode and returns what each phase took.
func measureSessions(t *testing.T, a agent, mode string) sessionRun {
	t.Helper()
	var srv *mockllm.Server
	p := startPeal(t, a, func(repo string) mockllm.Script {
		for name, content := range contextFiles {
			writeFile(t, filepath.Join(repo, name), content)
		}
		return carefulAgent(repo)
	}, testKey, "", mockllm.WithKey(testKey)) // unconfined: the CLI sends the key itself
	srv = p.srv
	gitIn(t, p.sb.repo, p.sb.base, "-c", "user.email=t@example.invalid", "-c", "user.name=t", "add", "-A")
	gitIn(t, p.sb.repo, p.sb.base, "-c", "user.email=t@example.invalid", "-c", "user.name=t", "commit", "-qm", "context")
	writeFile(t, p.plan, "# Plan\n\n## Task 1\n\nMake status.txt record the service's status, as docs/design.txt and src/status.txt describe.\n")
	extra := []string{"--agent-session", mode, "--structured-output", "--check-command", sessionCheck, "--max-address-rounds", "1", "--confine", "off"}
	for i, kv := range p.env { // no review: no stet on PATH
		if path, ok := strings.CutPrefix(kv, "PATH="); ok {
			p.env[i] = "PATH=" + testbin.PathWithout(path, "stet")
		}
	}
	if a.kind == "gemini" {
		extra = append(extra, "--model", "gemini-2.5-flash")
	}
	start := time.Now()
	r := p.run(t, 15*time.Minute, extra...)
	out := sessionRun{mode: mode, phases: map[string]*phaseCost{}, elapsed: time.Since(start)}
	if r.code != 0 {
		t.Fatalf("%s, agent_session = %s: want exit 0\n%s", a.kind, mode, p)
	}
	for _, req := range modelRequests(srv) {
		phase := sessionPhase(req.UserText)
		if len(req.Tools) == 0 || phase == "" {
			phase = "other"
		}
		pc := out.phases[phase]
		if pc == nil {
			pc = &phaseCost{carried: phase == "address" && strings.Contains(string(req.Body), "---PLAN---")}
			out.phases[phase] = pc
		}
		pc.requests++
		pc.bytes += len(req.Body)
		if req.Call != nil && req.Status == 200 && strings.HasPrefix(req.Text, "Reading ") {
			pc.reads++
		}
		out.total.requests++
		out.total.bytes += len(req.Body)
	}
	rep := p.report(t)
	for _, c := range rep.Calls {
		if c.Usage == nil {
			continue
		}
		if pc := out.phases[string(c.Phase)]; pc != nil {
			pc.tokensIn += c.Usage.InputTokens
		}
		out.total.tokensIn += c.Usage.InputTokens
	}
	return out
}

// report is `peal report --format json` of the run.
func (p *pealRun) report(t *testing.T) report.Report {
	t.Helper()
	r := run(t, p.sb.repo, p.env, nil, time.Minute, p.peal, "report", "--format", "json", "--plan", p.plan, "--repo", p.sb.repo, "--state-dir", p.state)
	var rep report.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, r)
	}
	return rep
}

// row is the run as a line of the table of docs/benchmarks.md.
func (s sessionRun) row(kind string) string {
	ph := func(name string) phaseCost {
		if pc := s.phases[name]; pc != nil {
			return *pc
		}
		return phaseCost{}
	}
	ex, ad := ph("execute"), ph("address")
	return fmt.Sprintf("| %s | %s | %d | %d | %d | %d | %d | %d | %d | %v | %s |", kind, s.mode, s.total.requests, s.total.bytes/1024, s.total.tokensIn,
		ex.reads, ad.reads, ad.requests, ad.bytes/1024, ad.carried, s.elapsed.Round(time.Second))
}

// TestSessionsMeasured: one task (plan, execute, one address round) through
// each real CLI against a model that reads a file only when its content is
// not in the conversation it is sent, run with fresh sessions and with
// agent_session = "task". With "task" the execute and the address round
// read no file the plan already read, and the address request carries the
// execute's conversation; fresh, each phase reads them all again. The
// table of docs/benchmarks.md is these runs' log.
func TestSessionsMeasured(t *testing.T) {
	t.Parallel()
	eachAgent(t, func(t *testing.T, a agent) {
		fresh := measureSessions(t, a, "fresh")
		task := measureSessions(t, a, "task")
		t.Logf("\n%s\n%s", fresh.row(a.kind), task.row(a.kind))
		for name, reads := range map[string]int{"plan": 2, "execute": 2, "address": 3} {
			f, k := fresh.phases[name], task.phases[name]
			if f == nil || k == nil {
				t.Fatalf("no %s request (fresh %v, task %v)", name, f != nil, k != nil)
			}
			if f.reads != reads {
				t.Errorf("fresh %s read %d files, want %d", name, f.reads, reads)
			}
		}
		if k := task.phases; k["plan"].reads != 2 || k["execute"].reads != 0 || k["address"].reads != 0 {
			t.Errorf("with task sessions: plan read %d files, execute %d, address %d; want 2, 0, 0", k["plan"].reads, k["execute"].reads, k["address"].reads)
		}
		if !task.phases["address"].carried || fresh.phases["address"].carried {
			t.Errorf("the address request carried the execute's conversation: task %v, fresh %v; want true, false",
				task.phases["address"].carried, fresh.phases["address"].carried)
		}
		if task.total.requests >= fresh.total.requests {
			t.Errorf("task sessions made %d model requests, fresh ones %d", task.total.requests, fresh.total.requests)
		}
	})
}
