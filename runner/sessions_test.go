package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"peal/agent"
	"peal/internal/testkit/fakes"
	"peal/phase"
	"peal/prompt"
	"peal/state"
)

// sessionKinds are the kinds that continue sessions.
func sessionKinds(t *testing.T) []*agent.Kind {
	t.Helper()
	var out []*agent.Kind
	for _, name := range agent.Names() {
		if k, _ := agent.Lookup(name); k.Session != nil {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		t.Fatal("no kind continues sessions")
	}
	return out
}

// sessionArgs are the arguments of a call's argv that name a session.
func sessionArgs(k *agent.Kind, argv []string) []string {
	var out []string
	for i, a := range argv {
		switch {
		case a == "--session-id" || a == "--resume" || a == "--session" || a == "-c" || a == "--continue" || a == "--last":
			out = append(out, argv[i:min(i+2, len(argv))]...)
		case k.Name == "codex" && a == "resume":
			out = append(out, argv[i:min(i+2, len(argv))]...)
		}
	}
	return out
}

// wantSessionArgs are the session arguments a call of kind k makes that
// begins (resume false) or continues session id.
func wantSessionArgs(k *agent.Kind, id string, resume bool) []string {
	return k.Session.Args(id, resume)
}

// ends are the fake agent's end records, in order.
func (h *harness) ends() []fakes.Call {
	h.t.Helper()
	c, err := fakes.ReadCalls(h.agentDir)
	if err != nil {
		h.t.Fatal(err)
	}
	return fakes.Ends(c)
}

// usageEvents are the run record's usage lines, as "phase began|continued
// id in/cached/out" strings, in order.
func (h *harness) usageEvents() []state.Event {
	h.t.Helper()
	events, _, err := state.ReadRecord(filepath.Join(h.stateDir, state.RecordName))
	if err != nil {
		h.t.Fatal(err)
	}
	var out []state.Event
	for _, ev := range events {
		if ev.Ev == state.EvUsage {
			out = append(out, ev)
		}
	}
	return out
}

// keptSessions are the sessions the state folder keeps, as
// "task:role:kind:id" strings.
func (h *harness) keptSessions() []string {
	h.t.Helper()
	data, err := os.ReadFile(filepath.Join(h.stateDir, state.SessionsName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		h.t.Fatal(err)
	}
	var f struct{ Sessions []state.Session }
	if err := json.Unmarshal(data, &f); err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, x := range f.Sessions {
		out = append(out, fmt.Sprintf("%d:%s:%s:%s", x.Task, x.Role, x.Kind, x.ID))
	}
	return out
}

// sessionsPutBack reports whether every session the state folder keeps is
// marked as one whose work was put back.
func (h *harness) sessionsPutBack() bool {
	h.t.Helper()
	data, err := os.ReadFile(filepath.Join(h.stateDir, state.SessionsName))
	if err != nil {
		h.t.Fatal(err)
	}
	var f struct{ Sessions []state.Session }
	if err := json.Unmarshal(data, &f); err != nil {
		h.t.Fatal(err)
	}
	return len(f.Sessions) > 0 && !slices.ContainsFunc(f.Sessions, func(x state.Session) bool { return !x.PutBack })
}

// promptOf is the prompt a fake agent's call was given: what it read on
// its standard input, or its last argument.
func promptOf(c fakes.Call) string {
	if c.Stdin != "" {
		return c.Stdin
	}
	return c.Argv[len(c.Argv)-1]
}

// sessionTask is one task whose plan call tries to edit (refused: it is
// read-only), whose execute call edits and breaks the project's check, and
// whose one address round fixes it; each call reports its tokens.
func sessionTask(h *harness) ([]string, map[string][]fakes.Outcome) {
	// Written where the calls work (the work tree, or the run's worktree).
	planTry, exeEdit := "plan-wrote.txt", "execute-wrote.txt"
	rules := map[string][]fakes.Outcome{
		"plan":    {{Stdout: "THE PLAN", Edits: map[string]string{planTry: "x"}, InputTokens: 100, CachedTokens: 40, OutputTokens: 10, CostUSD: 0.01}},
		"execute": {{Edits: map[string]string{exeEdit: "written"}, WriteFiles: map[string]string{"status.txt": "broken\n"}, InputTokens: 200, CachedTokens: 90, OutputTokens: 20, CostUSD: 0.02}},
		"address": {{WhenPrompt: fixesWhenShown.WhenPrompt, InputTokens: 300, CachedTokens: 180, OutputTokens: 30, CostUSD: 0.03}},
	}
	return []string{checksEnv(statusCheck), "PEAL_MAX_ADDRESS_ROUNDS=1"}, rules
}

// TestSessionsEveryKind: with agent_session = "task", a task's plan,
// execute and address calls continue one session through each CLI's
// stand-in, as the CLI's own flags say: the plan call begins it (with an id
// peal chose, or one the CLI names in its events), the execute and address
// calls resume it and each carries its own phase's permissions (the plan's
// edit refused, the execute's made); the run record has each call's tokens
// with the session it began or continued, codex's thread-wide counts taken
// apart per call; a task that completes leaves no session behind.
func TestSessionsEveryKind(t *testing.T) {
	t.Parallel()
	for _, k := range sessionKinds(t) {
		t.Run(k.Name, func(t *testing.T) {
			t.Parallel()
			h, env := kindHarness(t, k.Name, "## Task 1\nA\n")
			more, rules := sessionTask(h)
			h.scenario(rules)
			out, err := h.run(append(append(env, more...), "PEAL_AGENT_SESSION=task")...)
			if err != nil || !slices.Equal(out.Completed, []int{1}) {
				t.Fatalf("err %v, outcome %+v\n%s", err, out, h.log)
			}
			if got := h.keys(); got != "plan:1 execute:1 address:1" {
				t.Fatalf("calls %q", got)
			}
			c := h.ends()
			id := c[0].Session
			if id == "" || !k.Session.ValidID(id) || c[0].Resumed {
				t.Fatalf("the plan call began no session of the CLI's: %+v", c[0])
			}
			if k.Session.Chosen != (len(sessionArgs(k, c[0].Argv)) > 0) {
				t.Fatalf("plan argv %q", c[0].Argv)
			}
			if k.Session.Chosen && !slices.Equal(sessionArgs(k, c[0].Argv), wantSessionArgs(k, id, false)) {
				t.Fatalf("plan argv %q: want it to begin %s", c[0].Argv, id)
			}
			for i, history := range [][]string{{"plan"}, {"plan", "execute"}} {
				call := c[i+1]
				if call.Session != id || !call.Resumed || !slices.Equal(call.History, history) ||
					!slices.Equal(sessionArgs(k, call.Argv), wantSessionArgs(k, id, true)) {
					t.Fatalf("%s call: session %q resumed %v history %q argv %q; want %s resumed after %q", call.Phase, call.Session, call.Resumed,
						call.History, call.Argv, id, history)
				}
			}
			if !slices.Equal(c[0].Denied, []string{"edit plan-wrote.txt"}) || len(c[1].Denied) > 0 {
				t.Fatalf("permissions: plan denied %q, execute denied %q", c[0].Denied, c[1].Denied)
			}
			if data, err := os.ReadFile(filepath.Join(h.repo, "execute-wrote.txt")); err != nil || string(data) != "written" {
				t.Fatalf("the resumed execute could not edit: %v", err)
			}
			var got []string
			for _, ev := range h.usageEvents() {
				got = append(got, fmt.Sprintf("%s %s %s %d/%d/%d", ev.Phase, ev.Session, ev.SessionID, ev.Usage.InputTokens, ev.Usage.CachedTokens, ev.Usage.OutputTokens))
				if ev.Call == "" {
					t.Fatalf("a usage line names no call: %+v", ev)
				}
			}
			want := []string{"plan began " + id + " 100/40/10", "execute continued " + id + " 200/90/20", "address continued " + id + " 300/180/30"}
			if !slices.Equal(got, want) {
				t.Fatalf("usage lines\n%q\nwant\n%q", got, want)
			}
			if kept := h.keptSessions(); len(kept) != 0 {
				t.Fatalf("a completed task's sessions are kept: %q", kept)
			}
		})
	}
}

// TestSessionsFreshByDefault: without agent_session, every call begins a
// session of its own, and no argv names one; with structured output the
// record still has each call's tokens.
func TestSessionsFreshByDefault(t *testing.T) {
	t.Parallel()
	for _, k := range sessionKinds(t) {
		t.Run(k.Name, func(t *testing.T) {
			t.Parallel()
			h, env := kindHarness(t, k.Name, "## Task 1\nA\n")
			more, rules := sessionTask(h)
			h.scenario(rules)
			if _, err := h.run(append(append(env, more...), "PEAL_STRUCTURED_OUTPUT=true")...); err != nil {
				t.Fatal(err)
			}
			c := h.ends()
			seen := map[string]bool{}
			for _, call := range c {
				if call.Resumed || seen[call.Session] || len(sessionArgs(k, call.Argv)) > 0 {
					t.Fatalf("%s call: session %q resumed %v, argv %q", call.Phase, call.Session, call.Resumed, call.Argv)
				}
				seen[call.Session] = true
			}
			var got []string
			for _, ev := range h.usageEvents() {
				got = append(got, fmt.Sprintf("%s %q %d", ev.Phase, ev.Session, ev.Usage.InputTokens))
			}
			// codex's thread-wide count is the call's own in a new thread.
			if want := []string{`plan "" 100`, `execute "" 200`, `address "" 300`}; !slices.Equal(got, want) {
				t.Fatalf("usage lines %q, want %q", got, want)
			}
			if _, err := os.Stat(filepath.Join(h.stateDir, state.SessionsName)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("fresh sessions write a sessions file: %v", err)
			}
		})
	}
}

// TestSessionsTriageStartsFresh: a triage call judges the review's
// findings without the task's conversation, while the address call after it
// continues the task's session.
func TestSessionsTriageStartsFresh(t *testing.T) {
	t.Parallel()
	h, env := kindHarness(t, "claude", "## Task 1\nA\n")
	env = append(env, h.withStet(fakes.StetScenario{})...)
	h.scenario(map[string][]fakes.Outcome{"execute": plants(twoFindings()...), "triage": {{Stdout: "We need to fix F001 and F002."}},
		"address": {{StetFix: -1}}})
	if _, err := h.run(append(env, "PEAL_AGENT_SESSION=task")...); err != nil {
		t.Fatal(err)
	}
	if got := h.keys(); got != "plan:1 execute:1 triage:1 address:1" {
		t.Fatalf("calls %q", got)
	}
	c := h.ends()
	k, _ := agent.Lookup("claude")
	id := c[0].Session
	if c[2].Resumed || c[2].Session == id || len(sessionArgs(k, c[2].Argv)) > 0 {
		t.Fatalf("triage: session %q resumed %v argv %q", c[2].Session, c[2].Resumed, c[2].Argv)
	}
	if c[3].Session != id || !slices.Equal(c[3].History, []string{"plan", "execute"}) {
		t.Fatalf("address: session %q history %q, want %s after plan and execute", c[3].Session, c[3].History, id)
	}
}

// TestSessionsParallelTasksNeverShare: the tasks of a parallel block, each
// in its worktree, each continue a session of their own.
func TestSessionsParallelTasksNeverShare(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"claude", "codex"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			h, env := kindHarness(t, kind, "## Task 1 (parallel)\nA\n## Task 2 (parallel)\nB\n## Task 3 (parallel)\nC\n")
			rules := map[string][]fakes.Outcome{}
			for i := 1; i <= 3; i++ {
				rules[fmt.Sprintf("execute:%d", i)] = []fakes.Outcome{writes(fmt.Sprintf("t%d.txt", i), "x")}
			}
			h.scenario(rules)
			out, err := h.run(append(env, "PEAL_AGENT_SESSION=task", "PEAL_PARALLEL=true")...)
			if err != nil || !slices.Equal(out.Completed, []int{1, 2, 3}) {
				t.Fatalf("err %v, outcome %+v", err, out)
			}
			byTask := map[string][]fakes.Call{}
			for _, c := range h.ends() {
				byTask[c.Task] = append(byTask[c.Task], c)
			}
			owner := map[string]string{}
			for task, calls := range byTask {
				if len(calls) != 2 || calls[0].Phase != "plan" || calls[1].Phase != "execute" {
					t.Fatalf("task %s calls %v", task, fakes.Keys(calls))
				}
				id := calls[0].Session
				if calls[1].Session != id || !calls[1].Resumed || !slices.Equal(calls[1].History, []string{"plan"}) || calls[0].Cwd != calls[1].Cwd {
					t.Fatalf("task %s: execute %+v does not continue the plan's session %s", task, calls[1], id)
				}
				if other, taken := owner[id]; taken {
					t.Fatalf("tasks %s and %s share the session %s", other, task, id)
				}
				owner[id] = task
			}
		})
	}
}

// broke is an attempt that fails, in the events of a CLI asked for them.
var broke = fakes.Outcome{EventError: "agent broke"}

// failAtAddress is a task whose address call fails (no retry): the task
// fails after its execute, its sessions kept for the next run.
func failAtAddress(h *harness) ([]string, map[string][]fakes.Outcome) {
	more, rules := sessionTask(h)
	rules["address"] = []fakes.Outcome{broke}
	return append(more, "PEAL_PHASE_3_RETRY_COUNT=0"), rules
}

// TestSessionsContinueOnTheNextRun: a task that failed keeps its session in
// the state folder, and the next run continues it from its plan call.
func TestSessionsContinueOnTheNextRun(t *testing.T) {
	t.Parallel()
	for _, k := range sessionKinds(t) {
		t.Run(k.Name, func(t *testing.T) {
			t.Parallel()
			h, env := kindHarness(t, k.Name, "## Task 1\nA\n")
			more, rules := failAtAddress(h)
			h.scenario(rules)
			env = append(append(env, more...), "PEAL_AGENT_SESSION=task")
			if _, err := h.run(env...); err == nil {
				t.Fatal("the first run did not fail")
			}
			id := h.ends()[0].Session
			if kept := h.keptSessions(); !slices.Equal(kept, []string{"1:primary:" + k.Name + ":" + id}) {
				t.Fatalf("kept %q, want the task's session %s", kept, id)
			}
			if !h.sessionsPutBack() {
				t.Fatal("the session of the task whose work was put back is not marked so")
			}
			rules["address"] = []fakes.Outcome{fixesWhenShown}
			h.scenario(rules)
			if _, err := h.run(env...); err != nil {
				t.Fatal(err)
			}
			c := h.ends()[3:]
			if c[0].Phase != "plan" || c[0].Session != id || !c[0].Resumed || !slices.Equal(c[0].History, []string{"plan", "execute", "address"}) ||
				!slices.Equal(sessionArgs(k, c[0].Argv), wantSessionArgs(k, id, true)) {
				t.Fatalf("the next run's plan call %+v does not continue %s", c[0], id)
			}
			// Its work was put back: the conversation is told so once, by
			// the first call that continues it.
			told := prompt.PutBack("")
			if p := promptOf(c[0]); !strings.HasPrefix(p, told) || !strings.Contains(p, "---TASK---") {
				t.Fatalf("the plan call that continues the session was not told its work was put back:\n%s", p)
			}
			if p := promptOf(c[1]); c[1].Phase != "execute" || strings.Contains(p, told) {
				t.Fatalf("the execute call %s was told again:\n%s", c[1].Phase, p)
			}
			if kept := h.keptSessions(); len(kept) != 0 {
				t.Fatalf("kept %q after the task completed", kept)
			}
		})
	}
}

// TestSessionLostFallsBackOnce: a session the CLI cannot resume any more
// (its files gone) is followed at once by a fresh session, without
// spending a retry (none is allowed here), said in one line; the fresh
// session is the one the task continues. A second failure of the same call
// is the call's, not a loop.
func TestSessionLostFallsBackOnce(t *testing.T) {
	t.Parallel()
	for _, k := range sessionKinds(t) {
		t.Run(k.Name, func(t *testing.T) {
			t.Parallel()
			h, env := kindHarness(t, k.Name, "## Task 1\nA\n")
			more, rules := failAtAddress(h)
			h.scenario(rules)
			env = append(append(env, more...), "PEAL_AGENT_SESSION=task", "PEAL_PHASE_RETRY_COUNT=0")
			if _, err := h.run(env...); err == nil {
				t.Fatal("the first run did not fail")
			}
			old := h.ends()[0].Session
			if err := fakes.ForgetSessions(h.agentDir); err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(h.agentDir, fakes.CallsFile))
			rules["address"] = []fakes.Outcome{fixesWhenShown}
			h.scenario(rules)
			h.log = &lockedLog{}
			if _, err := h.run(env...); err != nil {
				t.Fatal(err)
			}
			if got := h.keys(); got != "plan:1 plan:1 execute:1 address:1" {
				t.Fatalf("calls %q", got)
			}
			c := h.ends()
			if c[0].Session != old || !c[0].Resumed || c[0].Exit == 0 {
				t.Fatalf("first attempt %+v, want a failed resume of %s", c[0], old)
			}
			fresh := c[1].Session
			if fresh == old || c[1].Resumed || c[1].Env["PEAL_ATTEMPT"] != "2" {
				t.Fatalf("second attempt %+v, want a fresh session", c[1])
			}
			if k.Session.Chosen && !slices.Equal(sessionArgs(k, c[1].Argv), wantSessionArgs(k, fresh, false)) {
				t.Fatalf("second attempt argv %q", c[1].Argv)
			}
			if c[2].Session != fresh || !c[2].Resumed || !slices.Equal(c[2].History, []string{"plan"}) {
				t.Fatalf("execute %+v does not continue the fresh session %s", c[2], fresh)
			}
			lines := strings.Count(h.log.String(), "could not resume the task's session "+old)
			if lines != 1 || !strings.Contains(h.log.String(), "without spending a retry") {
				t.Fatalf("the fallback is said %d times:\n%s", lines, h.log)
			}
		})
	}
	// A fresh session that fails in turn ends the call: no second fallback.
	h, env := kindHarness(t, "claude", "## Task 1\nA\n")
	more, rules := failAtAddress(h)
	h.scenario(rules)
	env = append(append(env, more...), "PEAL_AGENT_SESSION=task", "PEAL_PHASE_RETRY_COUNT=0")
	h.run(env...)
	rules["plan"] = []fakes.Outcome{{SessionLost: true}, broke}
	h.scenario(rules)
	os.Remove(filepath.Join(h.agentDir, fakes.CallsFile))
	_, err := h.run(env...)
	var failed *phase.FailedError
	if !errors.As(err, &failed) || failed.Attempts != 2 || h.keys() != "plan:1 plan:1" {
		t.Fatalf("err %v, calls %q: want the call to fail after its fresh attempt", err, h.keys())
	}
}

// TestSessionsNotContinued: a session kept for another folder, another CLI,
// or with an id the CLI would misread, and a sessions file that cannot be
// read, all begin a fresh session (a resume from another folder would hang
// opencode) and say why.
func TestSessionsNotContinued(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		kind   string
		change func(t *testing.T, path string)
		said   string
	}{
		{"another folder", "opencode", editSession(func(x *state.Session) { x.Dir = "/elsewhere/worktree" }), "it was made in /elsewhere/worktree"},
		{"another CLI", "claude", editSession(func(x *state.Session) { x.Kind = "gemini" }), "it is a session of the gemini CLI"},
		{"an id the CLI would misread", "codex", editSession(func(x *state.Session) { x.ID = "latest" }), "is not one the codex CLI gives or takes"},
		{"an unreadable file", "gemini", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte(`{"sessions":[`), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "is unreadable (it is not valid JSON (line 1, column 13))"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k, _ := agent.Lookup(tc.kind)
			h, env := kindHarness(t, tc.kind, "## Task 1\nA\n")
			more, rules := failAtAddress(h)
			h.scenario(rules)
			env = append(append(env, more...), "PEAL_AGENT_SESSION=task")
			h.run(env...)
			old := h.ends()[0].Session
			tc.change(t, filepath.Join(h.stateDir, state.SessionsName))
			os.Remove(filepath.Join(h.agentDir, fakes.CallsFile))
			h.log = &lockedLog{}
			if _, err := h.run(env...); err == nil || !strings.Contains(err.Error(), "agent broke") {
				t.Fatalf("err %v, want the address call to fail again", err)
			}
			c := h.ends()
			if h.keys() != "plan:1 execute:1 address:1" || c[0].Resumed || c[0].Session == old || len(sessionArgs(k, c[0].Argv)) > 0 && !k.Session.Chosen {
				t.Fatalf("calls %q, plan %+v: want a fresh session", h.keys(), c[0])
			}
			if !strings.Contains(h.log.String(), tc.said) {
				t.Fatalf("the log does not say %q:\n%s", tc.said, h.log.String())
			}
		})
	}
}

// editSession changes the one session the sessions file keeps.
func editSession(change func(*state.Session)) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Sessions []state.Session `json:"sessions"`
		}
		if err := json.Unmarshal(data, &f); err != nil || len(f.Sessions) != 1 {
			t.Fatalf("sessions file %s: %v", data, err)
		}
		change(&f.Sessions[0])
		data, _ = json.Marshal(f)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSessionFirstCallFailed: a first call that failed takes a new id when
// peal chooses them (the CLI would refuse the old one); a CLI that named
// its session before failing has it continued.
func TestSessionFirstCallFailed(t *testing.T) {
	t.Parallel()
	for _, k := range sessionKinds(t) {
		t.Run(k.Name, func(t *testing.T) {
			t.Parallel()
			h, env := kindHarness(t, k.Name, "## Task 1\nA\n")
			h.scenario(map[string][]fakes.Outcome{"plan": {broke, ok}})
			if _, err := h.run(append(env, "PEAL_AGENT_SESSION=task", "PEAL_PHASE_RETRY_COUNT=1")...); err != nil {
				t.Fatal(err)
			}
			if got := h.keys(); got != "plan:1 plan:1 execute:1" {
				t.Fatalf("calls %q", got)
			}
			c := h.ends()
			first, second := c[0].Session, c[1].Session
			switch {
			case k.Session.Chosen && (second == first || c[1].Resumed || !slices.Equal(sessionArgs(k, c[1].Argv), wantSessionArgs(k, second, false))):
				t.Fatalf("the retry %+v did not take a new id (the first was %s)", c[1], first)
			case !k.Session.Chosen && (second != first || !c[1].Resumed):
				t.Fatalf("the retry %+v did not continue the session %s the CLI named", c[1], first)
			}
			if c[2].Session != second || !c[2].Resumed {
				t.Fatalf("execute %+v does not continue %s", c[2], second)
			}
		})
	}
}

// TestSessionOverContextWindow: a continued session that the model's
// context window no longer holds is retried once in a fresh session,
// without spending a retry; a fresh call refused the same way is fatal, as
// without sessions.
func TestSessionOverContextWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		exec  []fakes.Outcome
		calls string
		ok    bool
	}{
		{"a fresh session fits", []fakes.Outcome{{Failure: fakes.FailOverContext}, ok}, "plan:1 execute:1 execute:1", true},
		{"a fresh session does not fit either", []fakes.Outcome{{Failure: fakes.FailOverContext}}, "plan:1 execute:1 execute:1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, env := kindHarness(t, "codex", "## Task 1\nA\n")
			h.scenario(map[string][]fakes.Outcome{"execute": tc.exec})
			_, err := h.run(append(env, "PEAL_AGENT_SESSION=task", "PEAL_PHASE_RETRY_COUNT=0")...)
			if got := h.keys(); got != tc.calls {
				t.Fatalf("calls %q, want %q", got, tc.calls)
			}
			c := h.ends()
			if !c[1].Resumed || c[2].Resumed || c[2].Session == c[0].Session {
				t.Fatalf("execute attempts %+v, %+v: want a resumed one, then a fresh one", c[1], c[2])
			}
			var window *agent.ContextWindowError
			if tc.ok != (err == nil) || (!tc.ok && !errors.As(err, &window)) {
				t.Fatalf("err %v", err)
			}
		})
	}
}

// TestSessionsDroppedOnAPlateau: an address loop that ends on a plateau
// drops the task's sessions, so that a deferred task's next run begins
// afresh; a loop that only ran out of rounds keeps them.
func TestSessionsDroppedOnAPlateau(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  []string
		kept int
	}{
		{"plateau", []string{"PEAL_MAX_ADDRESS_ROUNDS=3", "PEAL_PLATEAU_ROUNDS=1"}, 0},
		{"rounds used up", []string{"PEAL_MAX_ADDRESS_ROUNDS=1"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, env := kindHarness(t, "claude", "## Task 1\nA\n")
			h.scenario(map[string][]fakes.Outcome{"execute": {breaks}})
			out, err := h.run(append(append(env, tc.env...), "PEAL_AGENT_SESSION=task", checksEnv(statusCheck), "PEAL_ON_FINDINGS_REMAINING=defer")...)
			if err != nil || !slices.Equal(out.Deferred, []int{1}) {
				t.Fatalf("err %v, outcome %+v", err, out)
			}
			if kept := h.keptSessions(); len(kept) != tc.kept {
				t.Fatalf("kept %q, want %d", kept, tc.kept)
			}
		})
	}
}

// TestSessionsInterruptedRunContinues: a run stopped by a signal between
// the execute and the address call leaves the task's session for the next
// run, which continues it.
func TestSessionsInterruptedRunContinues(t *testing.T) {
	t.Parallel()
	h, env := kindHarness(t, "gemini", "## Task 1\nA\n")
	running := readyPipe(t)
	more, rules := sessionTask(h)
	rules["address"] = []fakes.Outcome{{WriteFiles: map[string]string{running: "x"}, Hang: true}, fixesWhenShown}
	h.scenario(rules)
	env = append(append(env, more...), "PEAL_AGENT_SESSION=task")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := h.runCtx(ctx, h.config(env...))
		done <- err
	}()
	waitReady(t, running) // the address call runs
	cancel()
	if err := <-done; !isInterrupted(err) {
		t.Fatalf("err %v, want an interruption", err)
	}
	id := h.calls()[0].Argv[slices.Index(h.calls()[0].Argv, "--session-id")+1]
	if _, err := h.run(env...); err != nil {
		t.Fatal(err)
	}
	c := h.ends()
	last := c[len(c)-3] // the second run's plan call
	if last.Phase != "plan" || last.Session != id || !last.Resumed || !slices.Equal(last.History, []string{"plan", "execute", "address"}) {
		t.Fatalf("the second run's plan call %+v does not continue %s", last, id)
	}
}
