package report

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// chromium is the headless browser of the system, "" when there is none.
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// probe is added to the page under test: the first part, at the top of the
// head, notes every script error; the second, at the end, hovers over a
// bar and writes what the page shows into an element that --dump-dom prints.
const (
	probeHead = `<script>window.__errors=[];window.addEventListener("error",function(e){window.__errors.push(String(e.message))});</script>`
	probeTail = `<script>
window.addEventListener("load", function () {
  var out = document.createElement("pre");
  out.id = "probe";
  try {
    var bar = document.querySelectorAll(".bar")[BAR];
    bar.dispatchEvent(new MouseEvent("mouseover", {bubbles: true}));
    out.textContent = "errors=" + window.__errors.length + " " + window.__errors.join(";") + "\nbars=" + document.querySelectorAll(".bar").length + "\nshown=" + document.getElementById("detail").textContent;
  } catch (e) {
    out.textContent = "errors=probe " + e;
  }
  document.body.appendChild(out);
});
</script>`
)

// TestHTMLInBrowser opens the page of a retried run in headless chromium:
// no script error, every bar drawn, and hovering a bar shows its call's
// argv, exit code and reason. Skipped where no chromium is installed.
func TestHTMLInBrowser(t *testing.T) {
	bin := chromium()
	if bin == "" {
		t.Skip("no chromium on PATH")
	}
	rep := fixture(t, "retried", false)
	// The bar of the failed execute of task 3 that timed out.
	bar := -1
	for i, c := range rep.Calls {
		if c.Task == 3 && c.Phase == "execute" && c.Outcome == CallTimeout {
			bar = i
		}
	}
	if bar < 0 {
		t.Fatal("the fixture has no timed-out execute of task 3")
	}
	var buf bytes.Buffer
	if err := HTML(&buf, rep); err != nil {
		t.Fatal(err)
	}
	page := strings.Replace(buf.String(), "<head>", "<head>"+probeHead, 1)
	page = strings.Replace(page, "</body>", strings.Replace(probeTail, "BAR", strconv.Itoa(bar), 1)+"</body>", 1)
	path := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := dumpDOM(t, bin, path)
	m := regexp.MustCompile(`(?s)<pre id="probe">(.*?)</pre>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the probe did not run; page:\n%.2000s", dom)
	}
	probe := m[1]
	if !strings.HasPrefix(probe, "errors=0 ") {
		t.Fatalf("script errors: %s", probe)
	}
	if !strings.Contains(probe, "bars="+strconv.Itoa(len(rep.Calls))) {
		t.Fatalf("not every call is drawn: %s", probe)
	}
	c := rep.Calls[bar]
	for _, want := range []string{"task 3: execute, attempt 1 of 2, +2 on network failures", "exit killed by a signal", "argv: " + strings.Join(c.Argv, " "), "timeout"} {
		if !strings.Contains(probe, htmlText(want)) {
			t.Fatalf("hovering bar %d shows\n%s\nwant it to contain %q", bar, probe, want)
		}
	}
}

// dumpDOM loads the page in headless chromium and returns the DOM after its
// scripts ran.
func dumpDOM(t testing.TB, bin, path string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
		"--user-data-dir="+filepath.Join(home, "profile"), "--virtual-time-budget=5000", "--dump-dom", "file://"+path)
	cmd.Env = append(os.Environ(), "HOME="+home)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%.2000s", err, stderr.String())
	}
	return out.String()
}

// htmlText is s as --dump-dom writes text: with &, < and > escaped.
func htmlText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// TestChecksAndMergesInBrowser: in headless chromium, hovering the bar of a
// failed check shows the end of its output, the bar of a merge that
// conflicted says how it went, and the bar of an agent call its session
// and usage. Skipped where no chromium is installed.
func TestChecksAndMergesInBrowser(t *testing.T) {
	bin := chromium()
	if bin == "" {
		t.Skip("no chromium on PATH")
	}
	checked := fixture(t, "checked", false)
	failedCall := ""
	for _, c := range checked.Checks {
		if c.Outcome == CheckFailed {
			failedCall = c.Call
		}
	}
	checkBar := slices.IndexFunc(checked.Calls, func(c Call) bool { return c.ID == failedCall })
	merged := fixture(t, "merged", false)
	mergeBar := len(merged.Calls) + slices.IndexFunc(merged.Merges, func(m Merge) bool { return m.Result == MergeConflict })
	sessions := fixture(t, "sessions", false)
	addressBar := slices.IndexFunc(sessions.Calls, func(c Call) bool { return c.Phase == "address" })
	for _, tc := range []struct {
		rep   Report
		bar   int
		wants []string
	}{
		{checked, checkBar, []string{"task 2: check", "output (its end): --- FAIL: TestStatus (status.txt is broken)"}},
		{merged, mergeBar, []string{"task 2: merge, conflict", "conflict in shared.txt, undone, work kept on " + merged.Merges[1].Kept + ", ran again alone"}},
		{sessions, addressBar, []string{"task 2: address", "session: continued session " + sessions.Calls[max(addressBar, 0)].SessionID,
			"usage: 3700 input tokens (2800 cached), 120 output tokens, $0.0110"}},
	} {
		if tc.bar < 0 {
			t.Fatal("the fixture lacks the bar to hover")
		}
		var buf bytes.Buffer
		if err := HTML(&buf, tc.rep); err != nil {
			t.Fatal(err)
		}
		tail := strings.Replace(probeTail, `document.querySelectorAll(".bar")[BAR]`, `document.querySelector('.bar[data-c="`+strconv.Itoa(tc.bar)+`"]')`, 1)
		page := strings.Replace(buf.String(), "<head>", "<head>"+probeHead, 1)
		page = strings.Replace(page, "</body>", tail+"</body>", 1)
		path := filepath.Join(t.TempDir(), "report.html")
		if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?s)<pre id="probe">(.*?)</pre>`).FindStringSubmatch(dumpDOM(t, bin, path))
		if m == nil || !strings.HasPrefix(m[1], "errors=0 ") {
			t.Fatalf("the probe did not run, or the page has script errors: %v", m)
		}
		for _, want := range tc.wants {
			if !strings.Contains(m[1], htmlText(want)) {
				t.Fatalf("hovering bar %d shows\n%s\nwant it to contain %q", tc.bar, m[1], want)
			}
		}
	}
}
