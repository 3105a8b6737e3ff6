package report

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"peal/phase"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"peal/state"
	"peal/tickets"
)

// largeRun is the record of a long run: tasks tasks, in parallel blocks of
// four, each with a plan, an execute retried after a timeout, a review and
// address rounds (calls per task in all, about), and the git and stet calls
// between them.
func largeRun(tasks, callsPerTask int) Input {
	start := time.Date(2026, 3, 1, 22, 0, 0, 0, time.UTC)
	var evs []state.Event
	add := func(ev state.Event) { evs = append(evs, ev) }
	add(state.Event{Ev: state.EvRunStart, Time: start, Run: "bench", PID: 1, PlanPath: "/work/plan.md", RepoPath: "/work/repo", Parallel: true})
	var status state.StatusReport
	id := 0
	call := func(task int, at time.Time, name string, attempt int, d time.Duration, class string, wait time.Duration) time.Time {
		id++
		cid := fmt.Sprintf("abc/1/%d", id)
		add(state.Event{Ev: state.EvCallStart, Time: at, Task: state.TaskOf(task), Call: cid, Phase: phase.Name(name), Attempt: attempt, Of: 2, Allowed: 2,
			Network: 2, Role: "primary", Argv: []string{"agent", "--print", "--workspace", "/work/repo", "--model", "gpt-5", "--sandbox", "disabled", "--trust", "--force", "<prompt len=4182>"}})
		code := 0
		if class != "success" {
			code = 1
		}
		add(state.Event{Ev: state.EvCallEnd, Time: at.Add(d), Call: cid, ExitCode: &code, DurationMS: d.Milliseconds(), TimedOut: class == "timeout"})
		reason := ""
		if code != 0 {
			reason = "execute call exited with status 1: error: the model's API returned 500 Internal Server Error"
		}
		add(state.Event{Ev: state.EvAttempt, Time: at.Add(d), Call: cid, Class: class, Reason: reason, Retry: code != 0, WaitMS: wait.Milliseconds()})
		return at.Add(d + wait)
	}
	t0 := start
	for i := 1; i <= tasks; i++ {
		// Four lanes run side by side; a block starts when the last ended.
		if i%4 == 1 && i > 1 {
			t0 = t0.Add(20 * time.Minute)
		}
		at := t0.Add(time.Duration(i%4) * 7 * time.Second)
		add(state.Event{Ev: state.EvTaskStart, Time: at, Task: state.TaskOf(i)})
		at = call(i, at, "plan", 1, 90*time.Second, "success", 0)
		at = call(i, at, "execute", 1, 4*time.Minute, "ordinary", 30*time.Second)
		at = call(i, at, "execute", 2, 3*time.Minute, "success", 0)
		for k := 3; k < callsPerTask; k++ {
			phase := []string{"stet", "triage", "address"}[k%3]
			at = call(i, at, phase, 1, 40*time.Second, "success", 0)
		}
		counts := tickets.Counts{Major: i % 3}
		add(state.Event{Ev: state.EvTaskEnd, Time: at, Task: state.TaskOf(i), Result: "completed", Findings: &counts})
		status.Tasks = append(status.Tasks, state.TaskStatus{Index: i, Status: "completed", Ticket: fmt.Sprintf("plan-%d", i), Attempts: 1})
	}
	code := 0
	add(state.Event{Ev: state.EvRunEnd, Time: evs[len(evs)-1].Time, ExitCode: &code})
	return Input{Events: evs, Status: status, Now: evs[len(evs)-1].Time}
}

// BenchmarkHTMLLarge writes the page of a run of 500 tasks and 5,000 calls
// and reports its size.
func BenchmarkHTMLLarge(b *testing.B) {
	in := largeRun(500, 10)
	var size int
	for b.Loop() {
		var buf bytes.Buffer
		if err := HTML(&buf, Build(in)); err != nil {
			b.Fatal(err)
		}
		size = buf.Len()
	}
	b.ReportMetric(float64(size), "bytes/page")
}

// BenchmarkOpenLargePage opens that page in headless chromium and reports
// how long the page takes to load (navigation start to the load event, as
// the page measures it) and to show a call on hover. Skipped without
// chromium.
func BenchmarkOpenLargePage(b *testing.B) {
	bin := chromium()
	if bin == "" {
		b.Skip("no chromium on PATH")
	}
	var buf bytes.Buffer
	if err := HTML(&buf, Build(largeRun(500, 10))); err != nil {
		b.Fatal(err)
	}
	probe := `<script>window.addEventListener("load", function () {
  var loaded = performance.now();
  var bars = document.querySelectorAll(".bar");
  var t = performance.now();
  bars[bars.length - 1].dispatchEvent(new MouseEvent("mouseover", {bubbles: true}));
  var shown = document.getElementById("detail").textContent.indexOf("argv") >= 0;
  var hover = performance.now() - t;
  setTimeout(function () {
    var out = document.createElement("pre"); out.id = "probe";
    out.textContent = "load=" + loaded.toFixed(1) + " hover=" + hover.toFixed(2) + " shown=" + shown + " bars=" + bars.length;
    document.body.appendChild(out);
  }, 0);
});</script>`
	page := strings.Replace(buf.String(), "</body>", probe+"</body>", 1)
	path := filepath.Join(b.TempDir(), "large.html")
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		b.Fatal(err)
	}
	re := regexp.MustCompile(`load=([0-9.]+) hover=([0-9.]+) shown=true bars=5000`)
	var load, hover float64
	for b.Loop() {
		m := re.FindStringSubmatch(dumpDOM(b, bin, path))
		if m == nil {
			b.Fatal("the probe did not report, or not every bar was drawn")
		}
		l, _ := strconv.ParseFloat(m[1], 64)
		h, _ := strconv.ParseFloat(m[2], 64)
		load, hover = load+l, hover+h
	}
	b.ReportMetric(load/float64(b.N), "ms-to-load")
	b.ReportMetric(hover/float64(b.N), "ms-to-hover")
	b.ReportMetric(float64(len(page)), "bytes/page")
}
