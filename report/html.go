package report

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"

	"peal/check"
	"peal/phase"
)

//go:embed timeline.html
var pageText string

// The script is added as it is: html/template would drop the CDATA markers
// that let an XML parser read the page.
//
//go:embed timeline.js
var scriptText string

var page = template.Must(template.New("page").Parse(pageText))

// barData is what the page's script shows of a call on hover or click; the
// short names keep a page of 5,000 calls small.
type barData struct {
	Task    int        `json:"t"`
	Phase   phase.Name `json:"p"`
	Attempt string     `json:"a"`
	Role    phase.Role `json:"r,omitempty"`
	Argv    []string   `json:"v"`
	Started string     `json:"s"`
	Dur     string     `json:"d"`
	Exit    string     `json:"x"`
	Outcome string     `json:"o"`
	Reason  string     `json:"why,omitempty"`
	Wait    string     `json:"w,omitempty"`
	Log     []string   `json:"l,omitempty"`
	// Out is the end of a check's output.
	Out string `json:"out,omitempty"`
	// Confined is what the confinement refused the call.
	Confined string `json:"c,omitempty"`
	// Session is how an agent call stood to its task's session, Usage what
	// it reported.
	Session string `json:"ss,omitempty"`
	Usage   string `json:"u,omitempty"`
}

type pageBar struct {
	I           int
	Class       string
	Left, Width string
	Wait        string // the wait's width, "" when none
	WaitLeft    string
}

type pageLane struct {
	Name, Result string // Result: the task's result as a class name
	Text         string // the lane's label
	Bars         []pageBar
}

type pageData struct {
	Title, RunLine string
	Totals         string
	Lanes          []pageLane
	Ticks          []tick
	Table          taskTable
	CutOff         []string
	Notes          []string
	Calls          template.JS
	Phases         []phase.Name
	Script         template.HTML
}

type tick struct{ Left, Label string }

// HTML writes the report as one self-contained page: a timeline with a lane
// per task and a bar per call, and the table of the Markdown summary. It
// loads nothing: its style and script are inside it.
func HTML(w io.Writer, r Report) error {
	d := pageData{Title: "peal run " + r.Run.ID, RunLine: runLine(r), Totals: totalsLine(r.Totals), Notes: r.Notes}
	start, total := span(r)
	tl := &timeline{r: r, d: &d, lanes: map[int]int{}, total: total, phases: map[phase.Name]bool{}}
	// The run's own lane comes first, then the tasks in index order.
	if hasNoTask(r.Calls) {
		tl.laneOf(-1)
	}
	for _, t := range r.Tasks {
		tl.laneOf(t.Index)
	}
	calls := make([]barData, len(r.Calls))
	for i, c := range r.Calls {
		calls[i] = tl.callBar(i, c, c.Started.Sub(start).Milliseconds())
	}
	// A check's bar shows the end of its output; a merge has a bar of its
	// own in its task's lane, after the calls' in the page's data.
	tails := map[string]string{}
	for _, c := range r.Checks {
		if c.Call != "" {
			tails[c.Call] = c.Tail
		}
	}
	for i, c := range r.Calls {
		calls[i].Out = tails[c.ID]
	}
	for _, m := range r.Merges {
		calls = append(calls, tl.mergeBar(len(calls), m, m.Started.Sub(start).Milliseconds()))
	}
	d.Phases = tl.phaseOrder()
	for k := 0; k <= 10; k++ {
		ms := total * int64(k) / 10
		d.Ticks = append(d.Ticks, tick{Left: tl.pos(ms), Label: formatMS(ms)})
	}
	d.Table = r.table()
	data, err := json.Marshal(calls) // escapes <, > and &: safe inside a script element
	if err != nil {
		return err
	}
	d.Calls = template.JS(data)
	d.Script = template.HTML("<script>\n//<![CDATA[\n" + scriptText + "//]]>\n</script>")
	return page.Execute(w, d)
}

// timeline lays the bars of a run out in its lanes: one per task, and the
// run's own for calls of no task.
type timeline struct {
	r      Report
	d      *pageData
	lanes  map[int]int // lane index by task (-1: the run's)
	total  int64       // the run's span, in milliseconds
	phases map[phase.Name]bool
}

// pos is where a time ms into the run lies in a lane: the run spans 99% of
// it, so that the last bar, however short, stays inside it.
func (tl *timeline) pos(ms int64) string {
	return fmt.Sprintf("%.4f%%", float64(ms)*99/float64(tl.total))
}

// laneOf is the lane of task (-1: the run's), made at its first use.
func (tl *timeline) laneOf(task int) *pageLane {
	i, ok := tl.lanes[task]
	if !ok {
		i = len(tl.d.Lanes)
		tl.lanes[task] = i
		name, result := "run", ""
		if task >= 0 {
			name = fmt.Sprintf("task %d", task)
			if t, found := tl.r.task(task); found {
				result = t.Result
			}
		}
		text := name
		if result != "" {
			text += " · " + resultText(Task{Result: result})
		}
		tl.d.Lanes = append(tl.d.Lanes, pageLane{Name: name, Result: result, Text: text})
	}
	return &tl.d.Lanes[i]
}

// callBar puts call c (the i-th, off milliseconds into the run) in its
// lane and returns what its hover shows.
func (tl *timeline) callBar(i int, c Call, off int64) barData {
	outcome := c.Outcome
	if c.Phase == check.Phase && outcome == CallExited {
		outcome = CallOrdinary // a failed check is a failure, drawn as one
	}
	bar := pageBar{I: i, Class: "ph-" + cssName(string(c.Phase)) + " oc-" + string(outcome), Left: tl.pos(off), Width: tl.pos(c.DurationMS)}
	if c.WaitMS > 0 {
		bar.WaitLeft, bar.Wait = tl.pos(off+c.DurationMS), tl.pos(c.WaitMS)
	}
	lane := tl.laneOf(c.Task)
	lane.Bars = append(lane.Bars, bar)
	tl.phases[c.Phase] = true
	data := barData{Task: c.Task, Phase: c.Phase, Attempt: phase.Attempt{N: c.Attempt, Of: c.Of, Allowed: c.Allowed, Network: c.Network, Counted: c.Counted}.String(), Role: c.Role, Argv: c.Argv,
		Started: c.Started.UTC().Format("2006-01-02 15:04:05.000Z"), Dur: formatMS(c.DurationMS), Exit: exitText(c),
		Outcome: strings.ReplaceAll(string(c.Outcome), "_", " "), Reason: c.Reason, Log: c.LogHead, Session: sessionText(c)}
	if c.WaitMS > 0 {
		data.Wait = formatMS(c.WaitMS)
	}
	switch {
	case c.Denial != "":
		data.Confined = c.Denial
	case c.RefusedCount > 0:
		data.Confined = fmt.Sprintf("%d connection(s) refused: %s", c.RefusedCount, strings.Join(c.Refused, ", "))
	}
	if c.Usage != nil {
		data.Usage = usageText(*c.Usage)
	}
	if c.Outcome == CallCutOff {
		tl.d.CutOff = append(tl.d.CutOff, callLine(c))
	}
	return data
}

// mergeBar puts merge m (the i-th bar, off milliseconds into the run) in
// its task's lane and returns what its hover shows.
func (tl *timeline) mergeBar(i int, m Merge, off int64) barData {
	lane := tl.laneOf(m.Task)
	lane.Bars = append(lane.Bars, pageBar{I: i, Class: "ph-merge mg-" + cssName(string(m.Result)), Left: tl.pos(off), Width: tl.pos(m.DurationMS)})
	tl.phases[phase.Merge] = true
	return barData{Task: m.Task, Phase: phase.Merge, Attempt: strings.ReplaceAll(string(m.Result), "_", " "),
		Argv: []string{"git", "merge", "--no-ff", m.Branch}, Started: m.Started.UTC().Format("2006-01-02 15:04:05.000Z"),
		Dur: formatMS(m.DurationMS), Exit: "–", Outcome: mergeText(m)}
}

// phaseOrder are the phases the bars show, in the order of a task, then
// any other.
func (tl *timeline) phaseOrder() []phase.Name {
	var out []phase.Name
	for _, p := range []phase.Name{phase.Normalize, phase.Plan, phase.Execute, phase.Check, phase.Stet, phase.Triage, phase.Address, phase.Merge, phase.Git, phase.PostRun} {
		if tl.phases[p] {
			out = append(out, p)
			delete(tl.phases, p)
		}
	}
	for p := range tl.phases {
		out = append(out, p)
	}
	return out
}

// span is the start of the timeline and its length in milliseconds (at
// least 1), taking in every call and the waits after them.
func span(r Report) (startAt time.Time, total int64) {
	if r.Run.Started != nil {
		startAt = *r.Run.Started
	}
	for _, c := range r.Calls {
		if startAt.IsZero() || c.Started.Before(startAt) {
			startAt = c.Started
		}
	}
	total = r.Run.DurationMS
	for _, c := range r.Calls {
		total = max(total, c.Started.Sub(startAt).Milliseconds()+c.DurationMS+c.WaitMS)
	}
	for _, m := range r.Merges {
		total = max(total, m.Started.Sub(startAt).Milliseconds()+m.DurationMS)
	}
	return startAt, max(total, 1)
}

func hasNoTask(calls []Call) bool { // the run's own calls, start checks included
	for _, c := range calls {
		if c.Task < 0 {
			return true
		}
	}
	return false
}

// cssName keeps letters, digits and dashes of a phase name for a class.
func cssName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(s))
}

func exitText(c Call) string {
	switch {
	case c.ExitCode == nil:
		return "none (" + strings.ReplaceAll(string(c.Outcome), "_", " ") + ")"
	case *c.ExitCode < 0:
		return "killed by a signal"
	}
	return fmt.Sprint(*c.ExitCode)
}
