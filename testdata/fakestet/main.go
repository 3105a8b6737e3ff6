// Command fakestet stands in for the stet code-review CLI in tests. It keeps
// the contract of the real stet that peal depends on (see package
// peal/internal/testkit/fakes): a session in STET_STATE_DIR (default <repo>/.review),
// worktrees under STET_WORKTREE_ROOT, reviews of committed changes only,
// session-wide findings, exit codes 0/1/2, --stream events. It records each
// call in $FAKE_STET_DIR/stet-calls.jsonl and follows the scenario in
// $FAKE_STET_DIR/stet-scenario.json.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"peal/internal/gitrepo"
	"peal/internal/procs"
	"peal/internal/testkit/fakes"
	"peal/internal/unidiff"
)

func main() {
	dir := os.Getenv(fakes.StetDirEnv)
	if dir == "" {
		fmt.Fprintf(os.Stderr, "fakestet: %s is not set\n", fakes.StetDirEnv)
		os.Exit(fakes.ExitNoStetDir)
	}
	scenario, err := fakes.ReadStetScenario(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakestet: bad scenario: %v\n", err)
		os.Exit(fakes.ExitBadScenario)
	}

	var cmd string
	var args []string
	if len(os.Args) > 1 {
		cmd, args = os.Args[1], os.Args[2:]
	}
	cwd, _ := os.Getwd()
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && (strings.HasPrefix(k, "STET_") || strings.HasPrefix(k, "PEAL_")) {
			env[k] = v
		}
	}
	self := procs.Self()
	call, err := fakes.RecordStetStart(dir, fakes.StetCall{
		Cmd: cmd, Args: args, Cwd: cwd, PID: self.PID, PIDNS: self.NS, PIDStart: self.Start, Time: time.Now(), Env: env,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakestet: record start: %v\n", err)
		os.Exit(fakes.ExitFakeError)
	}

	s := &stet{sc: scenario}
	code := s.handle(cmd, args, call.N)

	call.Time = time.Now()
	call.Exit = code
	call.Reviewed = s.reviewed
	call.Env = nil
	if err := fakes.RecordStetEnd(dir, call); err != nil {
		fmt.Fprintf(os.Stderr, "fakestet: record end: %v\n", err)
		os.Exit(fakes.ExitFakeError)
	}
	os.Exit(code)
}

type stet struct {
	sc                  fakes.StetScenario
	root                string // the repository's top folder
	stateDir, worktrees string
	reviewed            []string
}

// flags are the options of start and run that matter here.
type flags struct {
	json, stream, allowDirty bool
	positional               []string
}

func parseFlags(args []string) (flags, error) {
	var f flags
	output := "human"
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--output" && i+1 < len(args):
			output = args[i+1]
			i++
		case strings.HasPrefix(a, "--output="):
			output = strings.TrimPrefix(a, "--output=")
		case a == "--json":
			output = "json"
		case a == "--stream":
			f.stream = true
		case a == "--allow-dirty":
			f.allowDirty = true
		case a == "--context" || a == "--strictness" || a == "--timeout":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			f.positional = append(f.positional, a)
		}
	}
	if output != "human" && output != "json" {
		return f, errors.New("Invalid output format; use human or json.")
	}
	f.json = output == "json"
	if f.stream && !f.json {
		return f, errors.New("--stream requires --output=json or --json.")
	}
	return f, nil
}

// handle applies any scenario rule for the n-th call of cmd and otherwise
// performs the sub-command, returning the exit code.
func (s *stet) handle(cmd string, args []string, n int) int {
	if out, ok := s.sc.Pick(cmd, n); ok {
		switch {
		case out.IgnoreTerm && out.TermFile != "":
			// Each SIGTERM is written to TermFile (an event for the test)
			// and otherwise ignored.
			terms := make(chan os.Signal, 1)
			signal.Notify(terms, syscall.SIGTERM)
			go func() {
				for range terms {
					os.WriteFile(out.TermFile, []byte("term"), 0o644)
				}
			}()
		case out.IgnoreTerm:
			signal.Ignore(syscall.SIGTERM)
		}
		// Written when the command starts: a named pipe there tells the
		// test that the command runs.
		for _, name := range slices.Sorted(maps.Keys(out.WriteFiles)) {
			if err := os.WriteFile(name, []byte(out.WriteFiles[name]), 0o644); err != nil {
				return fail("write_files", err, "")
			}
		}
		if out.SleepMS > 0 {
			time.Sleep(time.Duration(out.SleepMS) * time.Millisecond)
		}
		if out.Hang {
			for {
				time.Sleep(time.Hour) // block until killed
			}
		}
		if out.Exit != 0 || out.Stdout != "" {
			fmt.Print(out.Stdout)
			fmt.Fprint(os.Stderr, out.Stderr)
			return out.Exit
		}
		fmt.Fprint(os.Stderr, out.Stderr)
	}
	root, err := topLevel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "This directory is not inside a Git repository.")
		fmt.Fprintf(os.Stderr, "Details: %v\n", err)
		return 1
	}
	s.root = root
	s.stateDir = os.Getenv("STET_STATE_DIR")
	if s.stateDir == "" {
		s.stateDir = filepath.Join(root, ".review")
	}
	s.worktrees = os.Getenv("STET_WORKTREE_ROOT")
	if s.worktrees == "" {
		s.worktrees = filepath.Join(root, ".review", "worktrees")
	}
	switch cmd {
	case "start":
		return s.start(args)
	case "run":
		return s.run(args)
	case "dismiss":
		return s.dismiss(args)
	case "finish":
		return s.finish()
	case "status":
		return s.status()
	case "cleanup":
		return s.cleanup()
	}
	fmt.Fprintf(os.Stderr, "Error: unknown command %q for \"stet\"\n", cmd)
	return 1
}

func git(dir string, args ...string) (string, error) {
	// No index refresh: a review only reads the repository.
	out, err := gitrepo.Plain(dir, "GIT_OPTIONAL_LOCKS=0").Command(args...).Run(context.Background())
	return strings.TrimSpace(out), err
}

// fail prints stet's message and the lines it adds, and returns exit 1.
func fail(msg string, details error, hint string) int {
	fmt.Fprintln(os.Stderr, msg)
	if details != nil {
		fmt.Fprintf(os.Stderr, "Details: %v\n", details)
	}
	if hint != "" {
		fmt.Fprintln(os.Stderr, hint)
	}
	return 1
}

// session reads the active session; without one it prints missing (run,
// dismiss and finish word it differently from status) and exits 1.
func (s *stet) session(missing string) (fakes.Session, int) {
	sess, ok, err := fakes.ReadSession(s.stateDir)
	if err != nil {
		return sess, fail("Session file is invalid or corrupted.", err, "")
	}
	if !ok {
		fmt.Fprintln(os.Stderr, missing)
		return sess, 1
	}
	return sess, 0
}

func (s *stet) start(args []string) int {
	f, err := parseFlags(args)
	if err != nil {
		return fail(err.Error(), nil, "")
	}
	ref := "HEAD"
	if len(f.positional) > 0 {
		ref = f.positional[0]
	}
	status, err := git(s.root, "status", "--porcelain")
	if err != nil {
		return fail("Could not check working tree status.", err, "")
	}
	if status != "" {
		if !f.allowDirty {
			return fail("working tree has uncommitted changes; commit or stash before starting", nil,
				fmt.Sprintf("Hint: Commit or stash your changes, then run 'stet start %s' again.", ref))
		}
		fmt.Fprintln(os.Stderr, "Warning: proceeding with uncommitted changes; review scope may be unclear")
	}
	// One git call resolves the baseline and HEAD; when it fails, a second
	// one tells which of them it was.
	both, err := git(s.root, "rev-parse", ref, "HEAD")
	sha, head, _ := strings.Cut(both, "\n")
	if err != nil {
		if _, refErr := git(s.root, "rev-parse", ref); refErr != nil {
			return fail(fmt.Sprintf("Could not resolve baseline ref %q.", ref), refErr,
				"Hint: If you used HEAD~N, the repo may be shallow; try the commit SHA (e.g. stet start <sha>).")
		}
		return fail("Could not resolve current commit (HEAD).", err, "")
	}
	if sha == head {
		if err := fakes.WriteSession(s.stateDir, fakes.Session{Baseline: sha, LastReviewed: head}); err != nil {
			return fail("Could not save session.", err, "")
		}
		if !f.json {
			fmt.Fprintln(os.Stderr, "Nothing to review (baseline is HEAD).")
		}
		return s.print(f, nil)
	}
	if _, err := git(s.root, "merge-base", "--is-ancestor", sha, "HEAD"); err != nil {
		return fail("baseline ref is not an ancestor of HEAD", nil, "")
	}
	wt := filepath.Join(s.worktrees, "stet-"+sha[:12])
	if _, err := os.Stat(wt); err == nil {
		return fail("worktree already exists", nil,
			fmt.Sprintf("Hint: Run 'stet finish' to end the current review and remove the worktree, then run 'stet start %s' again.", ref))
	}
	if err := os.MkdirAll(s.worktrees, 0o755); err != nil {
		return fail("Could not create worktree directory.", err, "")
	}
	if _, err := git(s.root, "worktree", "add", "--detach", wt, sha); err != nil {
		return fail("Could not add worktree.", err, "")
	}
	sess := fakes.Session{Baseline: sha, Worktree: wt}
	if err := fakes.WriteSession(s.stateDir, sess); err != nil {
		return fail("Could not save session.", err, "")
	}
	if code := s.review(&sess, f, head, false); code != 0 {
		git(s.root, "worktree", "remove", "--force", wt)
		return code
	}
	return s.print(f, &sess)
}

func (s *stet) run(args []string) int {
	f, err := parseFlags(args)
	if err != nil {
		return fail(err.Error(), nil, "")
	}
	sess, code := s.session("no active session; run stet start first")
	if code != 0 {
		return code
	}
	head, err := git(s.root, "rev-parse", "HEAD")
	if err != nil {
		return fail("Could not resolve current commit (HEAD).", err, "")
	}
	if code = s.review(&sess, f, head, true); code != 0 {
		return code
	}
	return s.print(f, &sess)
}

// review reviews the hunks of baseline..head that were not reviewed at the
// session's last review (and, for run, hold no dismissed finding), updates
// the session's findings and saves it.
func (s *stet) review(sess *fakes.Session, f flags, head string, skipDismissed bool) int {
	toReview, err := s.newHunks(sess, head, skipDismissed)
	if err != nil {
		return fail("Could not compute hunks to review.", err, "")
	}
	event := func(v any) {
		if f.stream {
			data, _ := json.Marshal(v)
			fmt.Println(string(data))
		}
	}
	if len(toReview) == 0 {
		event(map[string]string{"type": "progress", "msg": "Nothing to review."})
		event(map[string]string{"type": "done"})
		sess.LastReviewed = head
		if err := fakes.WriteSession(s.stateDir, *sess); err != nil {
			return fail("Could not save session.", err, "")
		}
		return 0
	}
	if s.sc.ModelDown {
		fmt.Fprintln(os.Stderr, "OpenAI-compat server (e.g. LM Studio) unreachable at http://127.0.0.1:9/v1. Is the server running?")
		fmt.Fprintln(os.Stderr, "Details: openai models: LLM server unreachable: dial tcp 127.0.0.1:9: connect: connection refused")
		return 2
	}
	if s.sc.ModelRefused {
		// stet's words when the server answers 404 for its model.
		fmt.Fprintln(os.Stderr, "LLM bad request at http://127.0.0.1:9/v1. openai chat: ollama bad request: HTTP 404")
		return 2
	}
	event(map[string]any{"type": "progress", "msg": fmt.Sprintf("%d hunks to review", len(toReview))})
	var found []fakes.Finding
	for i, h := range toReview {
		if s.sc.HunkMS > 0 {
			time.Sleep(time.Duration(s.sc.HunkMS) * time.Millisecond)
		}
		s.reviewed = append(s.reviewed, fmt.Sprintf("%s:%d", h.File, h.Start))
		event(map[string]any{"type": "progress", "msg": fmt.Sprintf("Reviewing hunk %d/%d: %s", i+1, len(toReview), h.File)})
		lines := make([]int, 0, len(h.Added))
		for n := range h.Added {
			lines = append(lines, n)
		}
		slices.Sort(lines)
		for _, n := range lines {
			fd, ok := fakes.ParseMarker(h.Added[n])
			if !ok {
				continue
			}
			fd.File, fd.Line = h.File, n
			if fd.ID == "" {
				fd.ID = fakes.FindingID(fd.File, fd.Line, fd.Message)
			}
			if fd.Severity == "" {
				fd.Severity = "warning"
			}
			if fd.Category == "" {
				fd.Category = "bug"
			}
			if fd.Confidence == 0 {
				fd.Confidence = 0.9
			}
			event(map[string]any{"type": "finding", "data": fd})
			found = append(found, fd)
		}
	}
	event(map[string]string{"type": "done"})
	// A finding of an earlier review whose line lies in a hunk reviewed now
	// and that was not reported again counts as addressed.
	again := map[string]bool{}
	for _, fd := range found {
		again[fd.ID] = true
	}
	for _, old := range sess.Findings {
		if again[old.ID] || slices.Contains(sess.Dismissed, old.ID) {
			continue
		}
		for _, h := range toReview {
			if h.File == old.File && h.Covers(old.Line) {
				sess.Dismissed = append(sess.Dismissed, old.ID)
				break
			}
		}
	}
	for _, fd := range found {
		if i := slices.IndexFunc(sess.Findings, func(x fakes.Finding) bool { return x.ID == fd.ID }); i >= 0 {
			sess.Findings[i] = fd
		} else {
			sess.Findings = append(sess.Findings, fd)
		}
	}
	sess.LastReviewed = head
	if err := fakes.WriteSession(s.stateDir, *sess); err != nil {
		return fail("Could not save session.", err, "")
	}
	return 0
}

// newHunks are the hunks of baseline..head that the session's last review
// did not see (and, with skipDismissed, that hold no dismissed finding). A
// review at the commit last reviewed has none, and one at the session's
// baseline has seen nothing: neither needs the diff it would compare with.
func (s *stet) newHunks(sess *fakes.Session, head string, skipDismissed bool) ([]unidiff.Hunk, error) {
	if sess.LastReviewed == head {
		return nil, nil
	}
	since := func(commit string) ([]unidiff.Hunk, error) {
		diff, err := git(s.root, "diff", "--no-color", "--no-ext-diff", sess.Baseline+".."+commit)
		return unidiff.Parse([]byte(diff)), err
	}
	current, err := since(head)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	if sess.LastReviewed != "" && sess.LastReviewed != sess.Baseline {
		old, err := since(sess.LastReviewed)
		if err != nil {
			return nil, err
		}
		for _, h := range old {
			seen[h.File+"\x00"+h.Raw] = true
		}
	}
	var hunks []unidiff.Hunk
	for _, h := range current {
		if !seen[h.File+"\x00"+h.Raw] && !(skipDismissed && holdsDismissed(h, *sess)) {
			hunks = append(hunks, h)
		}
	}
	return hunks, nil
}

// holdsDismissed reports whether a dismissed finding lies in the hunk.
func holdsDismissed(h unidiff.Hunk, sess fakes.Session) bool {
	for _, fd := range sess.Findings {
		if slices.Contains(sess.Dismissed, fd.ID) && fd.File == h.File && h.Covers(fd.Line) {
			return true
		}
	}
	return false
}

// print writes the session's active findings as start and run do: JSON, or
// one line per finding and a count; nothing more after --stream.
func (s *stet) print(f flags, sess *fakes.Session) int {
	if f.stream {
		return 0
	}
	active := []fakes.Finding{}
	if sess != nil {
		active = sess.Active()
	}
	if f.json {
		data, err := json.Marshal(map[string]any{"findings": active})
		if err != nil {
			return fail("Could not write findings.", err, "")
		}
		fmt.Println(string(data))
		return 0
	}
	for _, fd := range active {
		fmt.Printf("%s  %s:%d  %s  %s\n", fd.ID[:min(7, len(fd.ID))], fd.File, fd.Line, strings.ToUpper(fd.Severity), fd.Message)
	}
	if len(active) == 1 {
		fmt.Println("1 finding.")
	} else {
		fmt.Printf("%d finding(s).\n", len(active))
	}
	return 0
}

func (s *stet) dismiss(args []string) int {
	if len(args) < 1 {
		return fail("dismiss requires a finding id (e.g. stet dismiss <id>)", nil, "")
	}
	if len(args) >= 2 && !fakes.ValidDismissReason(args[1]) {
		return fail("Invalid reason; use one of: false_positive, already_correct, wrong_suggestion, out_of_scope.", nil, "")
	}
	sess, code := s.session("no active session; run stet start first")
	if code != 0 {
		return code
	}
	id, err := sess.Resolve(args[0])
	if err != nil {
		return fail(err.Error(), nil, "")
	}
	if !slices.Contains(sess.Dismissed, id) {
		sess.Dismissed = append(sess.Dismissed, id)
	}
	if err := fakes.WriteSession(s.stateDir, sess); err != nil {
		return fail("Could not save session.", err, "")
	}
	return 0
}

func (s *stet) finish() int {
	sess, code := s.session("no active session; run stet start first")
	if code != 0 {
		return code
	}
	if sess.Worktree != "" {
		if _, err := os.Stat(sess.Worktree); err == nil {
			if _, err := git(s.root, "worktree", "remove", "--force", sess.Worktree); err != nil {
				return fail("Could not remove review worktree.", err, "")
			}
		}
	}
	if err := os.Remove(filepath.Join(s.stateDir, fakes.SessionFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail("Could not remove session file.", err, "")
	}
	return 0
}

func (s *stet) status() int {
	sess, code := s.session("No active session. Run 'stet start' to begin a review.")
	if code != 0 {
		return code
	}
	fmt.Printf("baseline: %s\nlast_reviewed_at: %s\nworktree: %s\nfindings: %d\ndismissed: %d\n",
		sess.Baseline, sess.LastReviewed, sess.Worktree, len(sess.Findings), len(sess.Dismissed))
	return 0
}

// cleanup removes the stet worktrees under the worktree root that do not
// belong to the current session.
func (s *stet) cleanup() int {
	sess, _, err := fakes.ReadSession(s.stateDir)
	if err != nil {
		return fail("Session file is invalid or corrupted.", err, "")
	}
	entries, err := os.ReadDir(s.worktrees)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail("Could not list worktrees.", err, "")
	}
	removed := 0
	for _, e := range entries {
		path := filepath.Join(s.worktrees, e.Name())
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "stet-") || path == sess.Worktree {
			continue
		}
		if _, err := git(s.root, "worktree", "remove", "--force", path); err != nil {
			return fail(err.Error(), nil, "")
		}
		fmt.Fprintf(os.Stderr, "Removed worktree: %s\n", path)
		removed++
	}
	if removed == 0 {
		fmt.Fprintln(os.Stderr, "No orphan worktrees.")
	}
	return 0
}

// topLevel is the work tree around the working folder: the nearest folder
// holding .git (a folder, or a file in a linked worktree). Found without
// running git, which every command of the fake would otherwise do once more.
func topLevel() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no .git in this folder or any above it")
		}
		dir = parent
	}
}
