package report

import (
	"fmt"
	"io"
	"peal/phase"
	"sort"
	"strconv"
	"strings"

	"peal/check"
	"peal/internal/text"
	"peal/state"
	"peal/tickets"
)

// Markdown writes the report as GitHub-flavoured Markdown, keeping to what a
// job summary renders: a heading, paragraphs, one table and a list.
func Markdown(w io.Writer, r Report) error {
	var b strings.Builder
	b.WriteString("## peal run\n\n")
	fmt.Fprintf(&b, "%s\n\n", mdText(runLine(r)))
	if line := totalsLine(r.Totals); line != "" {
		fmt.Fprintf(&b, "%s\n\n", mdText(line))
	}
	tab := r.table()
	cols := tab.columns()
	heads, seps := make([]string, len(cols)), make([]string, len(cols))
	for i, c := range cols {
		heads[i], seps[i] = c.head, "---"
		if c.right {
			seps[i] = "---:"
		}
	}
	b.WriteString("| " + strings.Join(heads, " | ") + " |\n|" + strings.Join(seps, "|") + "|\n")
	for _, row := range tab.Rows {
		cells := make([]string, len(cols))
		for i, c := range cols {
			cells[i] = mdText(c.cell(row))
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	b.WriteString("\n")
	for _, sec := range r.sections() {
		switch {
		case sec.para != "":
			fmt.Fprintf(&b, "%s\n\n", mdText(sec.para))
		case sec.title != "":
			mdList(&b, sec.title, sec.lines)
		default:
			for _, l := range sec.lines {
				fmt.Fprintf(&b, "- %s\n", mdText(l))
			}
		}
	}
	_, err := io.WriteString(w, strings.TrimRight(b.String(), "\n")+"\n")
	return err
}

// column is one column of the task table, as both forms show it.
type column struct {
	head  string
	right bool // numbers, aligned right
	cell  func(taskRow) string
}

// columns are the table's columns: those of checks, merges and usage only
// when the run had any.
func (tab taskTable) columns() []column {
	cols := []column{
		{"Task", true, func(r taskRow) string { return strconv.Itoa(r.Index) }},
		{"Result", false, func(r taskRow) string { return r.Result }},
		{"Phases and attempts", false, func(r taskRow) string { return r.Phases }},
		{"Review rounds", true, func(r taskRow) string { return r.Rounds }},
		{"Findings left", false, func(r taskRow) string { return r.Findings }},
	}
	if tab.WithChecks {
		cols = append(cols, column{"Checks", false, func(r taskRow) string { return r.Checks }})
	}
	if tab.WithMerges {
		cols = append(cols, column{"Merge", false, func(r taskRow) string { return r.Merge }})
	}
	cols = append(cols, column{"Duration", true, func(r taskRow) string { return r.Duration }})
	if tab.WithUsage {
		cols = append(cols, column{"Tokens in/out", true, func(r taskRow) string { return r.Tokens }},
			column{"Cost", true, func(r taskRow) string { return r.Cost }})
	}
	return append(cols, column{"Ticket", false, func(r taskRow) string { return r.Ticket }},
		column{"Ticket attempts", true, func(r taskRow) string { return r.Attempts }})
}

// section is a part of the report after its table, as both forms show it:
// a paragraph, or lines under a title (a list), or lines alone.
type section struct {
	para  string
	title string
	lines []string
}

// sections are the parts of the report after its table, in order: the
// checks, the merges, the usage, the agent calls, what the confinement
// refused, the calls a kill cut off, the tasks' errors and the notes. A
// part with nothing to say is left out.
func (r Report) sections() []section {
	var out []section
	list := func(title string, lines []string) {
		if len(lines) > 0 {
			out = append(out, section{title: title, lines: lines})
		}
	}
	list("Checks", checkLines(r))
	var merges []string
	for _, m := range r.Merges {
		merges = append(merges, fmt.Sprintf("task %d: %s", m.Task, mergeText(m)))
	}
	list("Merges", merges)
	if u := r.Usage; u != nil {
		out = append(out, section{para: "Usage: " + usageText(*u) + "."})
	}
	list("Agent calls", agentCallLines(r))
	list("Confinement", confinedLines(r))
	var kept []string
	for _, k := range r.Kept {
		kept = append(kept, k.Line())
	}
	list("Kept for you (in the repository; they outlive the state folder)", kept)
	if len(r.Run.CutOff) > 0 {
		var cut []string
		for _, c := range r.Calls {
			if c.Outcome == CallCutOff {
				cut = append(cut, callLine(c))
			}
		}
		list("Calls cut off when the run was killed", cut)
	}
	var errs []string
	for _, t := range r.Tasks {
		if t.Error != "" {
			errs = append(errs, fmt.Sprintf("task %d: %s", t.Index, t.Error))
		}
	}
	list("Errors", errs)
	for _, n := range r.Notes {
		out = append(out, section{para: "Note: " + n})
	}
	return out
}

// runLine is the run's one line: its exit code and reason, or where it
// stands.
func runLine(r Report) string {
	run := r.Run
	dur := formatMS(run.DurationMS)
	switch run.State {
	case RunFinished:
		code := 0
		if run.ExitCode != nil {
			code = *run.ExitCode
		}
		reason := run.Reason
		if reason == "" {
			reason = "every task completed"
		}
		return fmt.Sprintf("Exit code %d after %s: %s", code, dur, reason)
	case RunRunning:
		return fmt.Sprintf("Still running (%s so far); %d calls started.", dur, len(r.Calls))
	case RunCutOff:
		calls := fmt.Sprintf("%d calls were", len(run.CutOff))
		if len(run.CutOff) == 1 {
			calls = "1 call was"
		}
		return fmt.Sprintf("Cut off after %s: the run ended without its last line (killed, or the machine stopped); %s cut off.", dur, calls)
	}
	if run.ExitCode != nil {
		return fmt.Sprintf("No run record; the last run summary says exit code %d.", *run.ExitCode)
	}
	return "No run record: no run yet in this state folder."
}

// totalsLine says where the time and the retries went: "Time in calls:
// execute 4 min 10 s (62%), plan 1 min 02 s (15%); waits before retries
// 1 min 00 s. Failed attempts: 2 timeout, 1 network." "" without calls.
func totalsLine(t Totals) string {
	var all int64
	for _, ms := range t.CallMSByPhase {
		all += ms
	}
	if len(t.CallMSByPhase) == 0 {
		return ""
	}
	phases := make([]phase.Name, 0, len(t.CallMSByPhase))
	for p := range t.CallMSByPhase {
		phases = append(phases, p)
	}
	sort.Slice(phases, func(i, j int) bool {
		a, b := t.CallMSByPhase[phases[i]], t.CallMSByPhase[phases[j]]
		return a > b || a == b && phases[i] < phases[j]
	})
	parts := make([]string, len(phases))
	for i, p := range phases {
		parts[i] = fmt.Sprintf("%s %s (%d%%)", p, formatMS(t.CallMSByPhase[p]), t.CallMSByPhase[p]*100/max(all, 1))
	}
	s := "Time in calls: " + strings.Join(parts, ", ")
	if t.WaitMS > 0 {
		s += "; waits before retries " + formatMS(t.WaitMS)
	}
	s += "."
	if t.CheckRuns > 0 {
		s += fmt.Sprintf(" Checks: %d runs, %d did not pass.", t.CheckRuns, t.FailedChecks)
	}
	if len(t.Merges) > 0 {
		results := make([]string, 0, len(t.Merges))
		for _, res := range []MergeResult{MergeMerged, MergeConflict, MergeChecksFailed, MergeFailed, MergeInterrupted} {
			if n := t.Merges[res]; n > 0 {
				results = append(results, fmt.Sprintf("%d %s", n, strings.ReplaceAll(string(res), "_", " ")))
			}
		}
		s += " Merges: " + strings.Join(results, ", ") + "."
	}
	if len(t.FailedAttempts) > 0 {
		outcomes := make([]string, 0, len(t.FailedAttempts))
		for o := range t.FailedAttempts {
			outcomes = append(outcomes, o)
		}
		sort.Strings(outcomes)
		fails := make([]string, len(outcomes))
		for i, o := range outcomes {
			fails[i] = fmt.Sprintf("%d %s", t.FailedAttempts[o], strings.ReplaceAll(o, "_", " "))
		}
		s += " Failed attempts: " + strings.Join(fails, ", ") + "."
	} else {
		s += " No attempt failed."
	}
	return s
}

// checkLines say, for the starting tree and each task, how each check
// went, run after run: "task 1: `go test ./...` failed after execute
// (exited with status 1: --- FAIL: TestAdd), passed after round 1".
func checkLines(r Report) []string {
	type key struct {
		task int
		cmd  string
	}
	var order []key
	runs := map[key][]CheckRun{}
	for _, c := range r.Checks {
		k := key{c.Task, c.Command}
		if _, ok := runs[k]; !ok {
			order = append(order, k)
		}
		runs[k] = append(runs[k], c)
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].task < order[j].task })
	var lines []string
	for _, k := range order {
		parts := make([]string, 0, len(runs[k]))
		for _, c := range runs[k] {
			parts = append(parts, checkRunText(c))
		}
		who := fmt.Sprintf("task %d", k.task)
		if k.task < 0 {
			who = "run"
		}
		lines = append(lines, fmt.Sprintf("%s: `%s` %s", who, text.Snippet(k.cmd, 80), strings.Join(parts, ", ")))
	}
	return lines
}

// checkRunText is one run of a check: "passed on the starting tree",
// "failed after execute (exited with status 1: FAIL x)".
func checkRunText(c CheckRun) string {
	when := check.When(c.Stage, c.Round)
	switch c.Outcome {
	case CheckPassed:
		return "passed " + when
	case CheckTimeout:
		return "timed out " + when
	case CheckInterrupted:
		return "was interrupted " + when
	case CheckNotStarted:
		return "could not start " + when
	}
	how := "failed"
	if c.ExitCode != nil {
		how = fmt.Sprintf("failed (exit %d", *c.ExitCode)
		if line := text.Quote(text.LastMeaningful(c.Tail)); line != "" {
			how += ": " + text.Snippet(line, 120)
		}
		how += ")"
	}
	return how + " " + when
}

// resultText is a task's result for people.
func resultText(t Task) string {
	switch t.Result {
	case "findings_left":
		return "completed, findings left"
	case "done_before":
		return "completed earlier"
	case "cut_off":
		return "cut off"
	}
	return t.Result
}

// phasesText is "plan 1, execute 3 (timeout, network), address 2": each
// phase with its attempts and the outcome of each attempt that failed.
func phasesText(phases []Phase) string {
	if len(phases) == 0 {
		return "–"
	}
	parts := make([]string, 0, len(phases))
	for _, p := range phases {
		s := fmt.Sprintf("%s %d", p.Name, p.Attempts)
		if len(p.Failures) > 0 {
			names := make([]string, len(p.Failures))
			for i, f := range p.Failures {
				names[i] = strings.ReplaceAll(string(f), "_", " ")
			}
			s += " (" + strings.Join(names, ", ") + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// findingsText is "2 Major, 1 Minor", or "–" for none.
func findingsText(c *tickets.Counts) string {
	if c == nil {
		return "–"
	}
	var parts []string
	for _, s := range []struct {
		name string
		n    int
	}{{"Critical", c.Critical}, {"Major", c.Major}, {"Minor", c.Minor}, {"Warnings", c.Warnings}, {"Suggestions", c.Suggestions}} {
		if s.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", s.n, s.name))
		}
	}
	if len(parts) == 0 {
		return "–"
	}
	return strings.Join(parts, ", ")
}

func durationText(t Task) string {
	if t.Started == nil {
		return "–"
	}
	return formatMS(t.DurationMS)
}

// callLine names a call: "task 2 execute, attempt 1 of 2, started
// 10:15:02Z: agent --print …".
func callLine(c Call) string {
	who := "run"
	if c.Task >= 0 {
		who = fmt.Sprintf("task %d", c.Task)
	}
	return fmt.Sprintf("%s %s, attempt %d, started %s: %s", who, c.Phase, max(c.Attempt, 1), c.Started.UTC().Format("15:04:05Z"), strings.Join(c.Argv, " "))
}

// usageText is what calls reported: "1200 input tokens (800 cached), 96
// output tokens, $0.0123", and, for calls through peal's model endpoint,
// ", 3 model requests (41 KiB sent, 6 KiB received)".
func usageText(u state.Usage) string {
	cached := ""
	if u.CachedTokens > 0 {
		cached = fmt.Sprintf(" (%d cached)", u.CachedTokens)
	}
	out := fmt.Sprintf("%d input tokens%s, %d output tokens, $%.4f", u.InputTokens, cached, u.OutputTokens, u.CostUSD)
	if u.Requests > 0 {
		out += fmt.Sprintf(", %d model request%s (%s sent, %s received)", u.Requests, plural(u.Requests), byteSize(u.BytesSent), byteSize(u.BytesReceived))
	}
	return out
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// byteSize is n bytes in the unit that suits it: "812 B", "41 KiB",
// "3.2 MiB".
func byteSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%d KiB", (n+1<<9)>>10)
	default:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
}

// sessionText is how a call stood to its task's agent session: "began
// session be06e92d-…", "continued session be06e92d-…"; "" for none.
func sessionText(c Call) string {
	if c.Session == "" {
		return ""
	}
	return c.Session + " session " + c.SessionID
}

// agentCallLines say, per agent call that reported usage or belongs to a
// session, what it cost and how it stood to its session: "task 1 execute,
// attempt 1 (primary): continued session be06e92d-…; 200 input tokens (90
// cached), 20 output tokens, $0.0200".
func agentCallLines(r Report) []string {
	var lines []string
	for _, c := range r.Calls {
		if c.Usage == nil && c.Session == "" {
			continue
		}
		who := "run"
		if c.Task >= 0 {
			who = fmt.Sprintf("task %d", c.Task)
		}
		var parts []string
		if s := sessionText(c); s != "" {
			parts = append(parts, s)
		}
		if c.Usage != nil {
			parts = append(parts, usageText(*c.Usage))
		}
		role := ""
		if c.Role != "" {
			role = " (" + string(c.Role) + ")"
		}
		lines = append(lines, fmt.Sprintf("%s %s, attempt %d%s: %s", who, c.Phase, max(c.Attempt, 1), role, strings.Join(parts, "; ")))
	}
	return lines
}

// mdText makes text safe in a Markdown table cell or list item: one line,
// with Markdown's punctuation and HTML's angle brackets escaped.
func mdText(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '\n', '\r', '\t':
			b.WriteByte(' ')
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '\\', '`', '*', '_', '[', ']', '|', '#', '~', '!':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// confinedLines say what the run's confinement refused: the calls that
// failed on it, with the line that explains each, and the connections its
// proxy refused; none when it refused nothing.
func confinedLines(r Report) []string {
	var lines []string
	for _, c := range r.Calls {
		if c.Denial == "" && c.RefusedCount == 0 {
			continue
		}
		who := fmt.Sprintf("task %d %s", c.Task, c.Phase)
		if c.Task < 0 {
			who = string(c.Phase)
		}
		if n := c.Attempt; n > 0 {
			if c.Counted > 0 {
				n = c.Counted // the attempt as the retry counts number it
			}
			who += fmt.Sprintf(" attempt %d", n)
		}
		switch {
		case c.Denial != "":
			lines = append(lines, who+": "+c.Denial)
		default:
			lines = append(lines, fmt.Sprintf("%s: %d connection(s) refused (%s)", who, c.RefusedCount, strings.Join(c.Refused, ", ")))
		}
	}
	return lines
}

// mdList writes a list of lines under its title, each as Markdown text;
// nothing when there are none.
func mdList(b *strings.Builder, title string, lines []string) {
	if len(lines) == 0 {
		return
	}
	b.WriteString(title + ":\n\n")
	for _, l := range lines {
		fmt.Fprintf(b, "- %s\n", mdText(l))
	}
	b.WriteString("\n")
}
