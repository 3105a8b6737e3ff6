package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"peal/phase"
	"peal/state"
	"peal/tickets"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// fixture is a recorded run: the run record and `peal status --json` that
// runs of peal with the fake agent left (TestReportOfRecordedRuns in
// cmd/peal writes them with PEAL_REPORT_FIXTURES set).
func fixture(t testing.TB, name string, alive bool) Report {
	t.Helper()
	dir := filepath.Join("testdata", "runs", name)
	events, skipped, err := state.ReadRecord(filepath.Join(dir, state.RecordName))
	if err != nil || skipped != 0 {
		t.Fatalf("record: %v (%d skipped)", err, skipped)
	}
	var status state.StatusReport
	data, err := os.ReadFile(filepath.Join(dir, "status.json"))
	if err != nil || json.Unmarshal(data, &status) != nil {
		t.Fatalf("status: %v %s", err, data)
	}
	last := events[len(events)-1].Time
	return Build(Input{Events: events, Status: status, Now: last.Add(5 * time.Second), Alive: func(int) bool { return alive }, LogLines: 8})
}

// golden compares got with testdata/golden/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the golden file (-update rewrites it):\n%s", name, got)
	}
}

var runs = []struct {
	name, fixture string
	alive         bool
}{
	{"sequential", "sequential", false},
	{"parallel", "parallel", false},
	{"retried", "retried", false},
	{"killed", "killed", false},
	{"reviewed", "reviewed", false},
	{"checked", "checked", false},
	{"merged", "merged", false},
	{"sessions", "sessions", false},
	// The killed run's record read while its process still runs.
	{"running", "killed", true},
}

func TestGoldenMarkdownAndJSON(t *testing.T) {
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			rep := fixture(t, r.fixture, r.alive)
			var md bytes.Buffer
			if err := Markdown(&md, rep); err != nil {
				t.Fatal(err)
			}
			// The JSON document as `peal report --format json` prints it.
			js, err := json.MarshalIndent(rep, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			var txt bytes.Buffer
			if err := Text(&txt, rep); err != nil {
				t.Fatal(err)
			}
			golden(t, r.name+".md", md.Bytes())
			golden(t, r.name+".json", append(js, '\n'))
			golden(t, r.name+".txt", txt.Bytes())
			for _, line := range strings.Split(txt.String(), "\n") {
				if n := utf8.RuneCountInString(line); n > TextWidth {
					t.Errorf("a line of %d columns in the text form: %q", n, line)
				}
			}
		})
	}
}

// TestReportFacts checks what the golden files hold that matters most, so
// that a rewritten golden file cannot hide its loss.
func TestReportFacts(t *testing.T) {
	retried := fixture(t, "retried", false)
	var classes []string
	for _, task := range retried.Tasks {
		for _, p := range task.Phases {
			classes = append(classes, fmt.Sprintf("%d %s %d %v", task.Index, p.Name, p.Attempts, p.Failures))
		}
	}
	want := []string{"1 plan 1 []", "1 execute 2 [ordinary]", "2 plan 2 [network]", "2 execute 1 []", "3 plan 1 []", "3 execute 2 [timeout ordinary]"}
	if !slices.Equal(classes, want) {
		t.Fatalf("phases %q\nwant %q", classes, want)
	}
	if code := retried.Run.ExitCode; code == nil || *code != 2 || !strings.HasPrefix(retried.Run.Reason, "finished with issues: failed tasks [3]") {
		t.Fatalf("run %+v", retried.Run)
	}

	killed := fixture(t, "killed", false)
	if killed.Run.State != RunCutOff || len(killed.Run.CutOff) != 1 {
		t.Fatalf("killed run %+v", killed.Run)
	}
	running := fixture(t, "killed", true)
	if running.Run.State != RunRunning || len(running.Run.CutOff) != 0 || running.Calls[len(running.Calls)-1].Outcome != CallRunning {
		t.Fatalf("running run %+v", running.Run)
	}
}

// TestTextForm: the text form says what the Markdown says, without its
// escapes and table rules, its columns aligned; text from the run cannot
// send the terminal a command.
func TestTextForm(t *testing.T) {
	rep := fixture(t, "merged", false)
	var md, txt bytes.Buffer
	Markdown(&md, rep)
	Text(&txt, rep)
	if strings.Contains(txt.String(), `\`) || strings.Contains(txt.String(), "|") || strings.Contains(txt.String(), "##") {
		t.Fatalf("Markdown in the text form:\n%s", txt.String())
	}
	words := strings.Join(strings.Fields(txt.String()), " ")
	for _, line := range strings.Split(md.String(), "\n") {
		// Every list line of the Markdown is in the text, unescaped (over
		// lines of its own when it is long).
		if item, ok := strings.CutPrefix(line, "- "); ok {
			unescaped := strings.NewReplacer(`\`, "", "&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(item)
			if !strings.Contains(words, strings.Join(strings.Fields(unescaped), " ")) {
				t.Errorf("the text lacks %q", unescaped)
			}
		}
	}
	lines := strings.Split(txt.String(), "\n")
	head := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "Task  Result") })
	if head < 0 || !slices.ContainsFunc(lines[head+1:], func(l string) bool { return strings.HasPrefix(l, "   1  completed") }) {
		t.Fatalf("table:\n%s", txt.String())
	}
	rep = Report{Run: Run{State: RunFinished, ExitCode: new(int), Reason: "a\x1b[2Jb"},
		Tasks: []Task{{Index: 1, Result: "failed", Error: "line one\nline \x1b]0;title\x07two", Phases: []Phase{}}}}
	txt.Reset()
	Text(&txt, rep)
	if strings.ContainsRune(txt.String(), 0x1b) || !strings.Contains(txt.String(), `task 1: line one line \x1b]0;title\x07two`) {
		t.Fatalf("control characters reach the terminal:\n%q", txt.String())
	}
}

// TestMarkdownEscapes: text from the run (an error, an argv) cannot break
// the table or inject HTML.
func TestMarkdownEscapes(t *testing.T) {
	rep := Report{Run: Run{State: RunFinished, ExitCode: new(int), Reason: "a|b <script>"},
		Tasks: []Task{{Index: 1, Result: "failed", Error: "line one\nline | two <b>", Phases: []Phase{}}}}
	var md bytes.Buffer
	if err := Markdown(&md, rep); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	for _, bad := range []string{"<script>", "<b>", "a|b", "one\nline"} {
		if strings.Contains(out, bad) {
			t.Fatalf("markdown holds %q unescaped:\n%s", bad, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "| 1 |") && strings.Count(strings.ReplaceAll(line, `\|`, ""), "|") != 9 {
			t.Fatalf("row has extra cells: %s", line)
		}
	}
}

// parsed is what TestHTML reads of the page: lanes, bars and table rows.
type parsed struct {
	lanes map[string]int // lane label → bars
	bars  []int          // data-c of every bar
	rows  []string       // data-task of every table row
	calls string         // the calls' JSON
}

// parsePage parses the page with the standard library's XML parser in its
// HTML mode, which fails on a tag that does not close.
func parsePage(t *testing.T, data []byte) parsed {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = false
	d.AutoClose = xml.HTMLAutoClose
	d.Entity = xml.HTMLEntity
	p := parsed{lanes: map[string]int{}}
	var lane string
	var inLabel, inCalls bool
	depth := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the page does not parse: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			depth++
			attr := func(name string) string {
				for _, a := range el.Attr {
					if a.Name.Local == name {
						return a.Value
					}
				}
				return ""
			}
			classes := strings.Fields(attr("class"))
			switch {
			case slices.Contains(classes, "label"):
				inLabel, lane = true, ""
			case slices.Contains(classes, "bar"):
				var i int
				fmt.Sscan(attr("data-c"), &i)
				p.bars = append(p.bars, i)
				p.lanes[lane]++
			case el.Name.Local == "tr" && attr("data-task") != "":
				p.rows = append(p.rows, attr("data-task"))
			case attr("id") == "calls":
				inCalls = true
			}
		case xml.EndElement:
			depth--
			if inLabel {
				p.lanes[lane] += 0 // a lane without bars is a lane too
			}
			inLabel, inCalls = false, false
		case xml.CharData:
			if inLabel {
				lane += string(el)
			}
			if inCalls {
				p.calls += string(el)
			}
		}
	}
	if depth != 0 {
		t.Fatalf("the page leaves %d elements open", depth)
	}
	return p
}

// TestHTML: every task has a lane and a table row, every call a bar in its
// task's lane, with its argv in the page's data; nothing is loaded from
// elsewhere.
func TestHTML(t *testing.T) {
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			rep := fixture(t, r.fixture, r.alive)
			var buf bytes.Buffer
			if err := HTML(&buf, rep); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			for _, ext := range []string{"http://", "https://", "src=", "@import", "url(", "<link"} {
				if strings.Contains(out, ext) {
					t.Fatalf("the page refers to something outside it (%q)", ext)
				}
			}
			p := parsePage(t, buf.Bytes())
			var want []string
			for _, task := range rep.Tasks {
				want = append(want, fmt.Sprint(task.Index))
				label := fmt.Sprintf("task %d · %s", task.Index, resultText(task))
				if _, ok := p.lanes[label]; !ok {
					t.Errorf("no lane %q (lanes: %v)", label, p.lanes)
				}
			}
			if !slices.Equal(p.rows, want) {
				t.Fatalf("table rows %v, want %v", p.rows, want)
			}
			if len(p.bars) != len(rep.Calls)+len(rep.Merges) {
				t.Fatalf("%d bars for %d calls and %d merges", len(p.bars), len(rep.Calls), len(rep.Merges))
			}
			var data []barData
			if err := json.Unmarshal([]byte(p.calls), &data); err != nil || len(data) != len(rep.Calls)+len(rep.Merges) {
				t.Fatalf("calls data: %v (%d entries for %d calls and %d merges)", err, len(data), len(rep.Calls), len(rep.Merges))
			}
			perLane := map[string]int{}
			for i, m := range rep.Merges {
				task, _ := rep.task(m.Task)
				perLane[fmt.Sprintf("task %d · %s", m.Task, resultText(task))]++
				if d := data[len(rep.Calls)+i]; d.Phase != "merge" || d.Task != m.Task || d.Outcome != mergeText(m) {
					t.Fatalf("merge bar %d shows %+v, want merge %+v", i, d, m)
				}
			}
			tails := 0
			for i, c := range rep.Calls {
				if c.Phase == "check" {
					if data[i].Out == "" && slices.ContainsFunc(rep.Checks, func(r CheckRun) bool { return r.Call == c.ID && r.Tail != "" }) {
						t.Fatalf("check bar %d does not show its output", i)
					}
					tails += len(data[i].Out)
				}
			}
			if r.name == "checked" && tails == 0 {
				t.Fatal("no check bar shows its output")
			}
			for i, c := range rep.Calls {
				lane := "run"
				if c.Task >= 0 {
					task, _ := rep.task(c.Task)
					lane = fmt.Sprintf("task %d · %s", c.Task, resultText(task))
				}
				perLane[lane]++
				if !slices.Equal(data[i].Argv, c.Argv) || data[i].Phase != c.Phase || data[i].Task != c.Task {
					t.Fatalf("bar %d shows %+v, want call %+v", i, data[i], c)
				}
				// An agent call's bar says how it stood to its session and
				// what it reported.
				want := ""
				if c.Usage != nil {
					want = usageText(*c.Usage)
				}
				if data[i].Session != sessionText(c) || data[i].Usage != want || (c.Session != "" && !strings.Contains(data[i].Session, c.SessionID)) {
					t.Fatalf("bar %d shows session %q and usage %q, want %q and %q", i, data[i].Session, data[i].Usage, sessionText(c), want)
				}
			}
			if r.name == "sessions" && !slices.ContainsFunc(data, func(d barData) bool { return strings.HasPrefix(d.Session, "continued session ") && d.Usage != "" }) {
				t.Fatal("no bar shows a continued session and its usage")
			}
			for lane, n := range perLane {
				if p.lanes[lane] != n {
					t.Fatalf("lane %q has %d bars, want %d", lane, p.lanes[lane], n)
				}
			}
		})
	}
}

// TestUsageAndClasses: the tokens and cost agent calls reported add up per
// task and for the run, and show as columns; each class the retry loop
// names becomes its outcome.
func TestUsageAndClasses(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	code, one := 0, 1
	task := state.TaskOf(4)
	var evs []state.Event
	for i, class := range []string{phase.RateLimited.String(), phase.Transient.String(), phase.Fatal.String()} {
		id := fmt.Sprint(i)
		evs = append(evs,
			state.Event{Ev: state.EvCallStart, Time: at, Task: task, Call: id, Phase: "execute", Attempt: i + 1, Allowed: 1, Role: "primary", Argv: []string{"claude"}},
			state.Event{Ev: state.EvCallEnd, Time: at.Add(time.Second), Call: id, ExitCode: &one},
			state.Event{Ev: state.EvAttempt, Time: at.Add(time.Second), Call: id, Class: class, Retry: class != "fatal"})
	}
	evs = append(evs,
		state.Event{Ev: state.EvUsage, Time: at, Task: task, Usage: &state.Usage{InputTokens: 100, OutputTokens: 20, CostUSD: 0.5}},
		state.Event{Ev: state.EvUsage, Time: at, Task: task, Usage: &state.Usage{InputTokens: 50, OutputTokens: 5, CostUSD: 0.25}},
		state.Event{Ev: state.EvRunEnd, Time: at.Add(time.Minute), ExitCode: &code})
	rep := Build(Input{Events: evs, Now: at})
	if len(rep.Tasks) != 1 || !slices.Equal(rep.Tasks[0].Phases[0].Failures, []CallOutcome{CallRateLimit, CallTransient, CallFatal}) {
		t.Fatalf("tasks %+v", rep.Tasks)
	}
	if u := rep.Tasks[0].Usage; u == nil || *u != (state.Usage{InputTokens: 150, OutputTokens: 25, CostUSD: 0.75}) || *rep.Usage != *u {
		t.Fatalf("usage %+v, run %+v", u, rep.Usage)
	}
	var md bytes.Buffer
	Markdown(&md, rep)
	if !strings.Contains(md.String(), "| 4 | pending | execute 3 (rate limit, transient, fatal) | 0 | – | – | 150/25 | $0.7500 |") {
		t.Fatalf("markdown:\n%s", md.String())
	}
}

// TestRunningWhileNormalizing: a live run whose record holds only its first
// line and the normalize call is running, not cut off.
func TestRunningWhileNormalizing(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	evs := []state.Event{
		{Ev: state.EvRunStart, Time: at, Run: "r", PID: 42, PlanPath: "/p"},
		{Ev: state.EvCallStart, Time: at.Add(time.Second), Task: state.TaskOf(-1), Call: "1", Phase: "normalize", Attempt: 1, Allowed: 1},
	}
	for _, alive := range []bool{true, false} {
		rep := Build(Input{Events: evs, Now: at.Add(time.Minute), Alive: func(pid int) bool { return alive && pid == 42 }})
		state, outcome := RunRunning, CallRunning
		if !alive {
			state, outcome = RunCutOff, CallCutOff
		}
		if rep.Run.State != state || len(rep.Calls) != 1 || rep.Calls[0].Outcome != outcome || !rep.Run.Started.Equal(at) {
			t.Fatalf("alive %v: run %+v, calls %+v", alive, rep.Run, rep.Calls)
		}
	}
}

// TestTaskRunsAgain: a task whose run ended failed (a conflict) and that
// runs again reads as running, or as cut off when the run is gone, from its
// first start.
func TestTaskRunsAgain(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	task := state.TaskOf(2)
	evs := []state.Event{
		{Ev: state.EvRunStart, Time: at, Run: "r", PID: 42},
		{Ev: state.EvTaskStart, Time: at.Add(time.Second), Task: task},
		{Ev: state.EvTaskEnd, Time: at.Add(2 * time.Second), Task: task, Result: "failed", Error: "conflict", Findings: &tickets.Counts{}},
		{Ev: state.EvTaskStart, Time: at.Add(3 * time.Second), Task: task},
		{Ev: state.EvCallStart, Time: at.Add(4 * time.Second), Task: task, Call: "1", Phase: "execute", Attempt: 1, Allowed: 1},
	}
	for _, alive := range []bool{true, false} {
		rep := Build(Input{Events: evs, Now: at.Add(time.Minute), Alive: func(int) bool { return alive }})
		want := "running"
		if !alive {
			want = "cut_off"
		}
		got, ok := rep.task(2)
		if !ok || got.Result != want || got.Error != "" || got.Ended != nil || got.Findings != nil || !got.Started.Equal(at.Add(time.Second)) {
			t.Fatalf("alive %v: task %+v, want %s", alive, got, want)
		}
	}
}

// TestEveryClassHasItsOutcome: each class the retry loop can name in the
// record, as it names it, becomes its own outcome.
func TestEveryClassHasItsOutcome(t *testing.T) {
	want := map[phase.Class]CallOutcome{phase.Succeeded: CallOK, phase.Ordinary: CallOrdinary, phase.Network: CallNetwork,
		phase.RateLimited: CallRateLimit, phase.Fatal: CallFatal, phase.Transient: CallTransient}
	n := 0
	// Class.String names a value that is no class "class N".
	for c := phase.Class(0); !strings.HasPrefix(c.String(), "class "); c++ {
		w, ok := want[c]
		if !ok {
			t.Fatalf("class %q has no outcome here", c)
		}
		if got := outcomeOf(c.String()); got != w {
			t.Errorf("class %q: outcome %q, want %q", c, got, w)
		}
		n++
	}
	if n != len(want) {
		t.Fatalf("%d classes, want %d", n, len(want))
	}
	if got := outcomeOf("no such class"); got != CallOrdinary {
		t.Fatalf("an unknown class: %q", got)
	}
}

// TestTablesAgree: the Markdown and the HTML table show the same columns;
// usage a call of no task reported (normalize) brings the usage columns to
// both.
func TestTablesAgree(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	code := 0
	evs := []state.Event{
		{Ev: state.EvRunStart, Time: at, Run: "r", PID: 42, Tasks: []int{1}},
		{Ev: state.EvUsage, Time: at, Task: state.TaskOf(-1), Phase: "normalize", Usage: &state.Usage{InputTokens: 7, OutputTokens: 3, CostUSD: 0.01}},
		{Ev: state.EvRunEnd, Time: at.Add(time.Minute), ExitCode: &code},
	}
	rep := Build(Input{Events: evs, Now: at})
	var md, page bytes.Buffer
	if err := Markdown(&md, rep); err != nil {
		t.Fatal(err)
	}
	if err := HTML(&page, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| 1 | pending | – | 0 | – | – | – | – | – | 0 |") {
		t.Fatalf("markdown:\n%s", md.String())
	}
	if !strings.Contains(page.String(), "<th>Tokens in/out</th>") ||
		!strings.Contains(page.String(), `<td class="n">–</td><td class="n">–</td><td>–</td><td class="n">0</td></tr>`) {
		t.Fatalf("page:\n%s", page.String())
	}
}

// TestFailedAttemptsAgree: a task's failures and the run's failed attempts
// count the same attempts: a running call and a git call's non-zero exit
// are no failure; an ordinary failure is.
func TestFailedAttemptsAgree(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	task := state.TaskOf(1)
	one := 1
	evs := []state.Event{
		{Ev: state.EvRunStart, Time: at, Run: "r", PID: 42},
		{Ev: state.EvCallStart, Time: at, Task: task, Call: "1", Phase: "execute", Attempt: 1, Allowed: 2},
		{Ev: state.EvCallEnd, Time: at.Add(time.Second), Call: "1", ExitCode: &one},
		{Ev: state.EvAttempt, Time: at.Add(time.Second), Call: "1", Class: phase.Ordinary.String(), Retry: true},
		{Ev: state.EvCallStart, Time: at.Add(time.Second), Task: task, Call: "2", Phase: "execute", Attempt: 2, Allowed: 2},
		{Ev: state.EvCallStart, Time: at.Add(time.Second), Task: task, Call: "3", Phase: "git", Attempt: 1},
		{Ev: state.EvCallEnd, Time: at.Add(2 * time.Second), Call: "3", ExitCode: &one},
	}
	rep := Build(Input{Events: evs, Now: at.Add(time.Minute), Alive: func(int) bool { return true }})
	var phases []string
	for _, p := range rep.Tasks[0].Phases {
		phases = append(phases, fmt.Sprintf("%s %d %v", p.Name, p.Attempts, p.Failures))
	}
	if want := []string{"execute 2 [ordinary]", "git 1 []"}; !slices.Equal(phases, want) {
		t.Fatalf("phases %q, want %q", phases, want)
	}
	if len(rep.Totals.FailedAttempts) != 1 || rep.Totals.FailedAttempts[string(CallOrdinary)] != 1 {
		t.Fatalf("failed attempts %v", rep.Totals.FailedAttempts)
	}
}

// TestLogStreams: the stream of each agent log is the one the record names,
// whatever the file is called; an older record's logs are stdout's, then
// stderr's.
func TestLogStreams(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.stderr.log")
	os.WriteFile(a, []byte("from stderr\n"), 0o644)
	os.WriteFile(b, []byte("from stdout\n"), 0o644)
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	evs := []state.Event{
		{Ev: state.EvRunStart, Time: at, Run: "r", PID: 42},
		{Ev: state.EvCallStart, Time: at, Task: state.TaskOf(1), Call: "1", Phase: "execute", Attempt: 1, StdoutLog: b, StderrLog: a},
		{Ev: state.EvCallStart, Time: at, Task: state.TaskOf(1), Call: "2", Phase: "execute", Attempt: 2, Logs: []string{b, a}},
	}
	rep := Build(Input{Events: evs, Now: at, LogLines: 4})
	want := []string{"stdout: from stdout", "stderr: from stderr"}
	for _, c := range rep.Calls {
		if !slices.Equal(c.LogHead, want) || !slices.Equal(c.Logs, []string{b, a}) {
			t.Fatalf("call %s: logs %q, head %q, want %q", c.ID, c.Logs, c.LogHead, want)
		}
	}
}

// TestWaitsAreNotAttemptsInTheTimeline: an attempt that followed waits on
// rate limits reads, on hover, with the number the retry counts give it and
// the attempts not counted; the confinement's refusals of a call show
// there too.
func TestWaitsAreNotAttemptsInTheTimeline(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	one, code := 1, 1
	evs := []state.Event{
		{Ev: state.EvRunStart, Time: at, Run: "r", Confinement: "on: files and TCP enforced by Landlock ABI 7"},
		{Ev: state.EvCallStart, Time: at, Task: state.TaskOf(1), Call: "c4", Phase: "plan", Attempt: 4, Of: 3, Allowed: 3, Counted: 2, Role: "primary", Argv: []string{"claude"}},
		{Ev: state.EvCallEnd, Time: at.Add(time.Second), Call: "c4", ExitCode: &one},
		{Ev: state.EvConfined, Time: at.Add(time.Second), Task: state.TaskOf(1), Call: "c4", RefusedCount: 2, Refused: []string{"evil.example:443"},
			Message: "peal refused the connection to evil.example:443"},
		{Ev: state.EvAttempt, Time: at.Add(time.Second), Call: "c4", Class: "ordinary"},
		{Ev: state.EvRunEnd, Time: at.Add(time.Minute), ExitCode: &code},
	}
	rep := Build(Input{Events: evs, Now: at})
	if rep.Run.Confinement != "on: files and TCP enforced by Landlock ABI 7" || rep.Totals.RefusedConnections != 2 || rep.Totals.DeniedCalls != 1 {
		t.Fatalf("run %+v, totals %+v", rep.Run, rep.Totals)
	}
	var page bytes.Buffer
	if err := HTML(&page, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"a":"attempt 2 of 3 (+2 not counted)"`, `"c":"peal refused the connection to evil.example:443"`} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	var md bytes.Buffer
	Markdown(&md, rep)
	if !strings.Contains(md.String(), "- task 1 plan attempt 2: peal refused the connection to evil.example:443") {
		t.Fatalf("markdown:\n%s", md.String())
	}
}

// TestWhyNoRound: a task with no review round says why, when the record
// does, in the table of both forms and in the JSON document; one with
// rounds, or from a record that does not say, shows the count alone.
func TestWhyNoRound(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 13, 0, 0, 0, time.UTC)
	var events []state.Event
	add := func(ev state.Event) {
		ev.Time = at
		at = at.Add(time.Second)
		events = append(events, ev)
	}
	add(state.Event{Ev: state.EvRunStart, Version: 1, Run: "r", PID: 1, PlanPath: "/p.md", RepoPath: "/r"})
	for i, why := range []string{"unreviewed", "no_findings", "all_dismissed", "review_skipped", ""} {
		add(state.Event{Ev: state.EvTaskStart, Task: state.TaskOf(i + 1)})
		add(state.Event{Ev: state.EvTaskEnd, Task: state.TaskOf(i + 1), Result: "completed", NoRound: why})
	}
	code := 0
	add(state.Event{Ev: state.EvRunEnd, ExitCode: &code})
	rep := Build(Input{Events: events, Now: at})
	var txt, md bytes.Buffer
	Text(&txt, rep)
	Markdown(&md, rep)
	for i, want := range []string{"0 (no review)", "0 (no findings)", "0 (all dismissed)", "0 (review skipped)", "0"} {
		if got := rep.table().Rows[i].Rounds; got != want {
			t.Errorf("task %d: review rounds %q, want %q", i+1, got, want)
		}
		if want != "0" && (!strings.Contains(txt.String(), want) || !strings.Contains(md.String(), "| "+want+" |")) {
			t.Errorf("task %d: %q missing:\n%s\n%s", i+1, want, txt.String(), md.String())
		}
	}
	if rep.Tasks[2].NoRound != NoRoundAllDismissed || rep.Tasks[4].NoRound != "" {
		t.Errorf("no_round in the document: %q, %q", rep.Tasks[2].NoRound, rep.Tasks[4].NoRound)
	}
}

// TestKeptForYou: what peal keeps for the user in the repository, as
// `peal status` reads it, is in the report: each with the commands that
// take it back, in the Markdown, the text and the JSON.
func TestKeptForYou(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	code := 1
	kept := []state.Kept{
		{Task: 2, What: state.KeptWork, Ref: "peal-kept/task-2-1a2b3c4d", Why: "the task did not complete: checks still fail",
			Look: "git log -p main..peal-kept/task-2-1a2b3c4d", Take: "git merge peal-kept/task-2-1a2b3c4d"},
		{Task: 1, What: state.KeptFiles, Ref: "refs/peal-kept/files/task-1-5e6f7a8b", Look: "git show --stat refs/peal-kept/files/task-1-5e6f7a8b",
			Files: []state.KeptFile{{Path: ".env", Restore: "git restore --source=refs/peal-kept/files/task-1-5e6f7a8b --worktree -- .env"}}},
	}
	rep := Build(Input{Events: []state.Event{{Ev: state.EvRunEnd, Time: at, ExitCode: &code}}, Status: state.StatusReport{Kept: kept}, Now: at})
	var md, txt bytes.Buffer
	Markdown(&md, rep)
	Text(&txt, rep)
	// The text form wraps its lines to the terminal's width: read as words.
	words := strings.Join(strings.Fields(txt.String()), " ")
	for _, want := range []string{
		"task 2's work is kept on branch peal-kept/task-2-1a2b3c4d, not on your branch (the task did not complete: checks still fail): see it with git log -p main..peal-kept/task-2-1a2b3c4d, take it with git merge peal-kept/task-2-1a2b3c4d",
		"files of yours that task 1 removed or replaced are kept on refs/peal-kept/files/task-1-5e6f7a8b: .env (put it back: git restore --source=refs/peal-kept/files/task-1-5e6f7a8b --worktree -- .env)",
	} {
		if !strings.Contains(md.String(), want) || !strings.Contains(words, want) {
			t.Fatalf("no %q in\n%s\n%s", want, md.String(), txt.String())
		}
	}
	data, err := json.Marshal(rep)
	if err != nil || !strings.Contains(string(data), `"kept":[{"at":"","task":2,"what":"work","ref":"peal-kept/task-2-1a2b3c4d"`) {
		t.Fatalf("json %s (%v)", data, err)
	}
}
