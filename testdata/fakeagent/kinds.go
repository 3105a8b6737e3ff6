package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"peal/internal/fakes"
)

// cliKind is the CLI the fake imitates, from the name it was started under;
// "" for the plain fake.
func cliKind() string {
	return fakes.KindNames[filepath.Base(os.Args[0])]
}

// flagSpec is the options a CLI accepts: those that take a value, and those
// that do not. Anything else starting with '-' is a usage error.
type flagSpec struct {
	sub    string // a required subcommand first ("exec", "run"); "" for none
	values []string
	bools  []string
	usage  func(arg string) (string, int) // the CLI's message and exit code for an unknown option
}

var specs = map[string]flagSpec{
	"cursor": {values: []string{"--workspace", "--output-format", "--sandbox", "--model"},
		bools: []string{"--print", "--plan", "--trust", "--force", "-f", "--yolo"},
		usage: func(a string) (string, int) { return fmt.Sprintf("error: unknown option '%s'", a), 1 }},
	"claude": {values: []string{"--output-format", "--permission-mode", "--model"}, bools: []string{"-p", "--print", "--verbose"},
		usage: func(a string) (string, int) { return fmt.Sprintf("error: unknown option '%s'", a), 1 }},
	"codex": {sub: "exec", values: []string{"-C", "-s", "-m"}, bools: []string{"--skip-git-repo-check", "--json", "--dangerously-bypass-approvals-and-sandbox"},
		usage: func(a string) (string, int) {
			return fmt.Sprintf("error: unexpected argument '%s' found\n\nUsage: codex exec [OPTIONS] [PROMPT]", a), 2
		}},
	"gemini": {values: []string{"--approval-mode", "--output-format", "-m", "-p"}, bools: []string{"--skip-trust"},
		usage: func(a string) (string, int) { return "Unknown arguments: " + strings.TrimLeft(a, "-"), 1 }},
	"opencode": {sub: "run", values: []string{"--dir", "--agent", "--format", "-m"}, bools: []string{"--auto"},
		usage: func(a string) (string, int) { return "Unknown arguments: " + strings.TrimLeft(a, "-"), 1 }},
}

// cliCall is a call's argv as the CLI reads it.
type cliCall struct {
	kind  string
	opts  map[string]string // option → value ("" for bools)
	args  []string          // positional arguments
	usage string            // a usage error's message
	code  int
}

func (c cliCall) has(opt string) bool { _, ok := c.opts[opt]; return ok }

func parseArgs(kind string, argv []string) cliCall {
	s := specs[kind]
	c := cliCall{kind: kind, opts: map[string]string{}}
	if s.sub != "" {
		if len(argv) == 0 || argv[0] != s.sub {
			first := ""
			if len(argv) > 0 {
				first = argv[0]
			}
			c.usage, c.code = s.usage(first)
			return c
		}
		argv = argv[1:]
	}
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "-" || !strings.HasPrefix(a, "-"):
			c.args = append(c.args, a)
		case slices.Contains(s.bools, a):
			c.opts[a] = ""
		case slices.Contains(s.values, a) && i+1 < len(argv):
			c.opts[a] = argv[i+1]
			i++
		default:
			c.usage, c.code = s.usage(a)
			return c
		}
	}
	return c
}

// subcommand answers the CLIs' status and version commands; false when
// argv is a call.
func subcommand(kind string, argv []string) bool {
	session := os.Getenv(fakes.SessionEnv) == "1"
	switch {
	case slices.Equal(argv, []string{"--version"}):
		fmt.Printf("fake %s 1.0.0\n", kind)
	case kind == "cursor" && slices.Equal(argv, []string{"status"}):
		if session {
			fmt.Println("✓ Logged in as fake@example.com")
		} else {
			fmt.Println("Not logged in")
		}
	case kind == "claude" && slices.Equal(argv, []string{"auth", "status"}):
		fmt.Printf("{\n  \"loggedIn\": %v,\n  \"authMethod\": \"none\"\n}\n", session)
		if !session {
			os.Exit(1)
		}
	case kind == "codex" && slices.Equal(argv, []string{"login", "status"}):
		if !session {
			fmt.Fprintln(os.Stderr, "Not logged in")
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "Logged in using ChatGPT")
	default:
		return false
	}
	return true
}

// structured reports whether the call asked for the CLI's event stream.
func (c cliCall) structured() bool {
	switch c.kind {
	case "cursor", "claude", "gemini":
		return c.opts["--output-format"] == "stream-json"
	case "codex":
		return c.has("--json")
	case "opencode":
		return c.opts["--format"] == "json"
	}
	return false
}

// mayWrite reports whether the call lets the agent edit and run commands
// unattended.
func (c cliCall) mayWrite() bool {
	switch c.kind {
	case "cursor":
		return c.has("--force") || c.has("-f") || c.has("--yolo")
	case "claude":
		return c.opts["--permission-mode"] == "bypassPermissions"
	case "codex":
		return c.has("--dangerously-bypass-approvals-and-sandbox")
	case "gemini":
		return c.opts["--approval-mode"] == "yolo"
	case "opencode":
		return c.has("--auto")
	}
	return false
}

// refuse checks what the CLI checks before it works; done means the fake
// has answered (with code) or waits forever.
func (c cliCall) refuse() (code int, done bool) {
	if c.usage != "" {
		fmt.Fprintln(os.Stderr, c.usage)
		return c.code, true
	}
	if c.kind == "claude" && c.structured() && !c.has("--verbose") {
		fmt.Fprintln(os.Stderr, "Error: When using --print, --output-format=stream-json requires --verbose")
		return 1, true
	}
	switch c.kind {
	case "cursor":
		// Print mode wants the key: a stored session is not enough.
		if os.Getenv("CURSOR_API_KEY") == "" {
			fmt.Println(fakes.CursorLoginPrompt)
			forever()
		}
		if !c.has("--trust") && !c.mayWrite() {
			fmt.Println(fakes.CursorTrustRequired)
			return 0, true
		}
	case "gemini":
		if !c.has("--skip-trust") {
			fmt.Fprintln(os.Stderr, "Gemini CLI is not running in a trusted directory. To proceed, either use `--skip-trust`, set the `GEMINI_CLI_TRUST_WORKSPACE=true` environment variable, or trust this directory in interactive mode.")
			return 55, true
		}
	}
	return 0, false
}

// fail prints a canned failure of the CLI.
func (c cliCall) fail(name string) int {
	f, ok := fakes.Failures[c.kind][name]
	if !ok {
		fmt.Fprintf(os.Stderr, "fakeagent: %s has no canned failure %q\n", c.kind, name)
		return fakes.ExitFakeError
	}
	w := os.Stdout
	if f.Stderr {
		w = os.Stderr
	}
	fmt.Fprintln(w, f.Text)
	for f.Forever {
		time.Sleep(50 * time.Millisecond)
		fmt.Fprintln(w, f.Repeat)
	}
	return f.Exit
}

// tools carries out the outcome's edits and commands as far as the call's
// permissions allow, and returns what was refused.
func (c cliCall) tools(out fakes.Outcome) []string {
	var denied []string
	for _, name := range slices.Sorted(mapsKeys(out.Edits)) {
		if !c.mayWrite() {
			fmt.Printf("Permission to edit %s was denied.\n", name)
			denied = append(denied, "edit "+name)
			continue
		}
		writeFile(name, out.Edits[name])
	}
	for _, argv := range out.Commands {
		shown := strings.Join(argv, " ")
		if !c.mayWrite() {
			if c.kind == "cursor" {
				fmt.Println(fakes.CursorDenied + shown)
			} else {
				fmt.Printf("Permission to run %s was denied.\n", shown)
			}
			denied = append(denied, "run "+shown)
			continue
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		cmd.Run()
	}
	return denied
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// emitter is how the answer text reaches stdout: as is, or as the CLI's
// events. It returns the exit code the CLI ends with.
func (c cliCall) emitter(out fakes.Outcome) func(text string) (int64, error) {
	if !c.structured() {
		return func(text string) (int64, error) {
			n, err := io.WriteString(os.Stdout, text)
			return int64(n), err
		}
	}
	return func(text string) (int64, error) {
		text = strings.TrimSpace(text)
		var events []any
		e := out.EventError
		switch c.kind {
		case "cursor", "claude":
			events = append(events, map[string]any{"type": "system", "subtype": "init"},
				map[string]any{"type": "assistant", "message": map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}})
			result := map[string]any{"type": "result", "subtype": "success", "is_error": e != "", "result": text, "total_cost_usd": out.CostUSD,
				"usage": map[string]any{"input_tokens": out.InputTokens, "output_tokens": out.OutputTokens}}
			if e != "" {
				result["result"] = e
			}
			events = append(events, result)
		case "codex":
			events = append(events, map[string]any{"type": "thread.started"}, map[string]any{"type": "turn.started"})
			if e != "" {
				events = append(events, map[string]any{"type": "error", "message": e}, map[string]any{"type": "turn.failed", "error": map[string]any{"message": e}})
			} else {
				events = append(events, map[string]any{"type": "item.completed", "item": map[string]any{"type": "agent_message", "text": text}},
					map[string]any{"type": "turn.completed", "usage": map[string]any{"input_tokens": out.InputTokens, "output_tokens": out.OutputTokens}})
			}
		case "gemini":
			events = append(events, map[string]any{"type": "init"})
			if e != "" {
				events = append(events, map[string]any{"type": "result", "status": "error", "error": map[string]any{"type": "Error", "message": e}})
			} else {
				events = append(events, map[string]any{"type": "message", "role": "assistant", "content": text, "delta": true},
					map[string]any{"type": "result", "status": "success", "stats": map[string]any{"input_tokens": out.InputTokens, "output_tokens": out.OutputTokens}})
			}
		case "opencode":
			events = append(events, map[string]any{"type": "step_start"})
			if e != "" {
				events = append(events, map[string]any{"type": "error", "error": map[string]any{"name": "APIError", "data": map[string]any{"message": e}}})
			} else {
				events = append(events, map[string]any{"type": "text", "part": map[string]any{"type": "text", "text": text}},
					map[string]any{"type": "step_finish", "part": map[string]any{"cost": out.CostUSD, "tokens": map[string]any{"input": out.InputTokens, "output": out.OutputTokens}}})
			}
		}
		var n int64
		for _, ev := range events {
			line, _ := json.Marshal(ev)
			m, err := os.Stdout.Write(append(line, '\n'))
			n += int64(m)
			if err != nil {
				return n, err
			}
		}
		if out.Linger {
			// The answer is out, but the process never exits.
			forever()
		}
		return n, nil
	}
}
