// Command mockllm serves a mock model API on 127.0.0.1 until interrupted, for
// driving a real agent CLI by hand. It prints the server's URL on the first
// line of stdout and logs one line per request on stderr.
//
//	mockllm -plan "the plan" -write /repo/out.txt -content hello
//	mockllm -status 429 -retry-after 5
//	mockllm -refusal credit
//	mockllm -close
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"peal/internal/testkit/mockllm"
)

func main() {
	var (
		plan       = flag.String("plan", "1. Create the file.\n2. Done.", "answer to a prompt containing -plan-marker")
		planMarker = flag.String("plan-marker", "---TASK---", "text that marks a plan prompt")
		execMarker = flag.String("exec-marker", "---PLAN---", "text that marks an execute prompt")
		write      = flag.String("write", "", "absolute path of the file an execute prompt writes (empty: no tool call)")
		content    = flag.String("content", "written by the mock model\n", "content of the written file")
		shell      = flag.String("shell", "", "a command an execute prompt runs with the CLI's shell tool (instead of -write)")
		done       = flag.String("done", "DONE: the file is written.", "final answer after the tool result")
		status     = flag.Int("status", 0, "answer every request with this HTTP status")
		retryAfter = flag.String("retry-after", "", "Retry-After header of a -status answer")
		message    = flag.String("message", "", "error message of a -status answer")
		refusal    = flag.String("refusal", "", "answer every request with this refusal, in each API's words: "+refusalNames())
		tokens     = flag.Int("tokens", 0, "prompt size a -refusal context answer reports (0: the default)")
		window     = flag.Int("window", 0, "context window a -refusal context answer reports (0: the default)")
		closeConn  = flag.Bool("close", false, "drop every connection without an answer")
		midStream  = flag.Bool("close-mid-stream", false, "drop every connection after the first streamed event")
		first      = flag.Int("first", 0, "with -status or -refusal: fail only the first N requests, then answer as without them")
		key        = flag.String("key", "", "answer 401 to requests that do not carry this key")
		dump       = flag.String("dump", "", "folder that receives every model request body as N.json when the server stops")
	)
	headers := map[string]string{}
	flag.Func("header", "NAME=VALUE: a header added to every failing answer (repeatable)", func(v string) error {
		name, value, ok := strings.Cut(v, "=")
		if !ok || name == "" {
			return fmt.Errorf("want NAME=VALUE, got %q", v)
		}
		headers[name] = value
		return nil
	})
	flag.Parse()
	var script mockllm.Script
	fail := mockllm.Failure{Status: *status, RetryAfter: *retryAfter, Message: *message,
		Refusal: mockllm.Refusal(*refusal), Tokens: *tokens, Limit: *window, Headers: headers}
	if *refusal != "" && !slices.Contains(mockllm.Refusals, fail.Refusal) {
		fmt.Fprintf(os.Stderr, "mockllm: unknown -refusal %q: want one of %s\n", *refusal, refusalNames())
		os.Exit(2)
	}
	failing := *status != 0 || *refusal != ""
	switch {
	case failing && *first == 0:
		script = mockllm.Always(fail)
	case *closeConn:
		script = mockllm.Always(mockllm.Failure{Close: true})
	case *midStream:
		script = mockllm.Always(mockllm.Failure{CloseMidStream: true})
	case *write != "":
		script = mockllm.PlanExecute(*planMarker, *plan, *execMarker, *write, *content, *done)
	case *shell != "":
		script = mockllm.Script{Rules: []mockllm.Rule{
			{Contains: *execMarker, Replies: []mockllm.Reply{{Text: "Running it.", Tool: mockllm.RunShell(*shell, ".")}, {Text: *done}}},
			{Contains: *planMarker, Replies: []mockllm.Reply{{Text: *plan}}},
		}}
	default:
		script = mockllm.Script{Rules: []mockllm.Rule{{Contains: *planMarker, Replies: []mockllm.Reply{{Text: *plan}}}},
			Default: mockllm.Reply{Text: *done}}
	}
	if failing && *first > 0 {
		for i := 0; i < *first; i++ {
			script.First = append(script.First, mockllm.Reply{Fail: &fail})
		}
	}
	opts := []mockllm.Option{mockllm.WithLog(os.Stderr)}
	if *key != "" {
		opts = append(opts, mockllm.WithKey(*key))
	}
	srv := mockllm.New(script, opts...)
	fmt.Println(srv.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	srv.Close()
	if *dump != "" {
		for i, r := range srv.Requests() {
			if len(r.Body) > 0 {
				_ = os.WriteFile(filepath.Join(*dump, fmt.Sprintf("%d.json", i+1)), r.Body, 0o644)
			}
		}
	}
}

// refusalNames lists the refusals -refusal takes.
func refusalNames() string {
	var names []string
	for _, r := range mockllm.Refusals {
		names = append(names, string(r))
	}
	return strings.Join(names, ", ")
}
