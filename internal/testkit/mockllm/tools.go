package mockllm

import (
	"path/filepath"
	"strings"
)

// WriteFile is a tool call that creates the file at path (absolute) with
// content, using whichever tool the CLI offers for it, in this order of
// preference:
//
//   - a write tool: Claude Code's Write and the Gemini CLI's write_file
//     (file_path, content), opencode's write (filePath, content);
//   - Codex's apply_patch, free-form or as a function with an input field,
//     with a patch that adds the file;
//   - a shell tool: Codex's shell (command list) or exec_command (cmd),
//     Claude Code's Bash, the Gemini CLI's run_shell_command, opencode's
//     bash (command), running printf into the file.
//
// The call is nil, so the model answers with text only, when the request
// offers none of them (a title or summary request, say).
func WriteFile(path, content string) *ToolCall {
	return &ToolCall{Input: func(tools []Tool) *Call {
		has := map[string]Tool{}
		for _, t := range tools {
			has[t.Name] = t
		}
		for _, name := range []string{"Write", "write_file"} {
			if _, ok := has[name]; ok {
				return &Call{Name: name, Args: map[string]any{"file_path": path, "content": content}}
			}
		}
		if _, ok := has["write"]; ok {
			return &Call{Name: "write", Args: map[string]any{"filePath": path, "content": content}}
		}
		if t, ok := has["apply_patch"]; ok {
			patch := AddFilePatch(path, content)
			if t.Freeform {
				return &Call{Name: "apply_patch", Custom: patch}
			}
			return &Call{Name: "apply_patch", Args: map[string]any{"input": patch}}
		}
		return shellCall(has, "printf '%s' "+shellQuote(content)+" > "+shellQuote(path), filepath.Dir(path), "Write "+filepath.Base(path))
	}}
}

// ReadFile is a tool call that reads the file at path (absolute) with the
// CLI's read tool: Claude Code's Read and the Gemini CLI's read_file
// (file_path), opencode's read (filePath); Codex, which has none, runs cat
// with its shell tool. It is nil when the request offers none of them.
func ReadFile(path string) *ToolCall {
	return &ToolCall{Input: func(tools []Tool) *Call {
		has := map[string]Tool{}
		for _, t := range tools {
			has[t.Name] = t
		}
		for _, name := range []string{"Read", "read_file"} {
			if _, ok := has[name]; ok {
				return &Call{Name: name, Args: map[string]any{"file_path": path}}
			}
		}
		if _, ok := has["read"]; ok {
			return &Call{Name: "read", Args: map[string]any{"filePath": path}}
		}
		return shellCall(has, "cat "+shellQuote(path), filepath.Dir(path), "Read "+filepath.Base(path))
	}}
}

// RunShell is a tool call that runs script with the CLI's shell tool (see
// WriteFile for the names), in workdir where the tool takes one. It is nil
// when the request offers no shell tool.
func RunShell(script, workdir string) *ToolCall {
	return &ToolCall{Input: func(tools []Tool) *Call {
		has := map[string]Tool{}
		for _, t := range tools {
			has[t.Name] = t
		}
		return shellCall(has, script, workdir, "Run a command")
	}}
}

// shellCall calls the first shell tool of has with script.
func shellCall(has map[string]Tool, script, workdir, description string) *Call {
	if _, ok := has["shell"]; ok {
		return &Call{Name: "shell", Args: map[string]any{"command": []string{"bash", "-lc", script}, "workdir": workdir}}
	}
	if _, ok := has["exec_command"]; ok {
		return &Call{Name: "exec_command", Args: map[string]any{"cmd": script, "workdir": workdir}}
	}
	for _, name := range []string{"Bash", "run_shell_command", "bash"} {
		if _, ok := has[name]; ok {
			return &Call{Name: name, Args: map[string]any{"command": script, "description": description}}
		}
	}
	return nil
}

// AddFilePatch is a patch in the apply_patch format that creates path with
// content.
func AddFilePatch(path, content string) string {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n*** Add File: " + path + "\n")
	for _, line := range strings.SplitAfter(content, "\n") {
		if line == "" {
			continue
		}
		b.WriteString("+" + strings.TrimSuffix(line, "\n") + "\n")
	}
	b.WriteString("*** End Patch\n")
	return b.String()
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// PlanExecute is the script of one peal task: a request whose prompt holds
// planMarker is answered with planText; one whose prompt holds execMarker
// writes the file at path with content, then answers doneText once the tool
// result comes back. Anything else is answered "OK".
func PlanExecute(planMarker, planText, execMarker, path, content, doneText string) Script {
	return Script{Rules: []Rule{
		{Contains: execMarker, Replies: []Reply{
			{Text: "Writing the file.", Tool: WriteFile(path, content)},
			{Text: doneText},
		}},
		{Contains: planMarker, Replies: []Reply{{Text: planText}}},
	}}
}

// Always answers every request with the same failure.
func Always(f Failure) Script { return Script{Default: Reply{Fail: &f}} }
