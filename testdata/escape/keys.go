package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The model key's tries. Peal's environment holds the model key (it starts
// with ESCAPE_KEY_PREFIX written backwards, so that the call's environment
// does not hold it; the key's placeholder never starts with it); the
// call, whose key peal's model endpoint holds, has a placeholder in
// ANTHROPIC_API_KEY and the endpoint in ANTHROPIC_BASE_URL. It looks for
// the key everywhere it can read, and tries the endpoint with no key, a
// key of its own and another path; its work is one model request with its
// placeholder. With ESCAPE_PEER_* (FIFOs shared with another call of the
// same run, running alongside), it hands that call its endpoint and
// placeholder and tries the other's, each with its own and the other's
// placeholder.

func keyTries(who string) {
	prefix := reverse(os.Getenv("ESCAPE_KEY_PREFIX"))
	if prefix == "" {
		return
	}
	found := func(where func() []string) func() error {
		return func() error {
			if w := where(); len(w) > 0 {
				return nil // found: an escape
			}
			return fmt.Errorf("not found")
		}
	}
	escape(who+"model-key-in-env", found(func() []string {
		var out []string
		for _, kv := range os.Environ() {
			if strings.Contains(kv, prefix) {
				out = append(out, kv)
			}
		}
		return out
	}))
	escape(who+"model-key-in-proc", found(func() []string { return inProc(prefix) }))
	escape(who+"model-key-in-files", found(func() []string {
		var out []string
		for _, root := range []string{os.Getenv("HOME"), ".", os.Getenv("TMPDIR"), os.Getenv("ESCAPE_STATE"), os.Getenv("ESCAPE_MAIN")} {
			out = append(out, inFiles(root, prefix)...)
		}
		return out
	}))
	base, placeholder := os.Getenv("ANTHROPIC_BASE_URL"), os.Getenv("ANTHROPIC_API_KEY")
	if base == "" {
		return // a check: no model endpoint
	}
	escape(who+"model-endpoint-without-key", func() error { return modelRequest(base, "POST", "/v1/messages", "") })
	escape(who+"model-endpoint-with-a-key-of-its-own", func() error { return modelRequest(base, "POST", "/v1/messages", "sk-ant-its-own") })
	escape(who+"model-endpoint-other-path", func() error { return modelRequest(base, "GET", "/v1/files", placeholder) })
	work(who+"model-request", func() error { return modelRequest(base, "POST", "/v1/messages", placeholder) })
	if in, out := os.Getenv("ESCAPE_PEER_IN"), os.Getenv("ESCAPE_PEER_OUT"); in != "" && out != "" {
		peerTries(who, base, placeholder, in, out)
	}
}

func reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

// inProc are the files of /proc (every process's environment and command
// line) that hold s.
func inProc(s string) []string {
	var out []string
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		for _, f := range []string{"environ", "cmdline"} {
			path := filepath.Join("/proc", p.Name(), f)
			if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(s)) {
				out = append(out, path)
			}
		}
	}
	return out
}

// inFiles are the files beneath root (at most 5000 of them, each under
// 1 MiB) that hold s.
func inFiles(root, s string) []string {
	if root == "" {
		return nil
	}
	var out []string
	n := 0
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || n > 5000 {
			return nil
		}
		if d.Type().IsRegular() {
			n++
			if info, err := d.Info(); err == nil && info.Size() < 1<<20 {
				if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(s)) {
					out = append(out, path)
				}
			}
		}
		return nil
	})
	return out
}

// modelRequest sends one request to the model endpoint at base with key
// (none when ""); nil when it is answered 200.
func modelRequest(base, method, path, key string) error {
	if base == "" {
		return fmt.Errorf("no model endpoint")
	}
	req, err := http.NewRequest(method, base+path, strings.NewReader(`{"model":"m","max_tokens":1}`))
	if err != nil {
		return err
	}
	if key != "" {
		req.Header.Set("X-Api-Key", key)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// peerTries hands the other call (through the FIFO out) this call's
// endpoint and placeholder, takes the other's (from in), tries the other's
// endpoint with either placeholder, and then waits for the other to have
// tried this one's, so that neither endpoint is gone before it was tried
// (through in.done and out.done). The FIFOs block until both calls are
// there: a bound keeps a call whose peer never comes from hanging.
func peerTries(who, base, placeholder, in, out string) {
	exchange := func(in, out, line string) (string, error) {
		sent := make(chan error, 1)
		go func() {
			f, err := os.OpenFile(out, os.O_WRONLY, 0)
			if err == nil {
				_, err = fmt.Fprintln(f, line)
				f.Close()
			}
			sent <- err
		}()
		got := make(chan string, 1)
		go func() {
			f, err := os.Open(in)
			if err != nil {
				got <- ""
				return
			}
			defer f.Close()
			l, _ := bufio.NewReader(f).ReadString('\n')
			got <- strings.TrimSpace(l)
		}()
		bound := time.NewTimer(2 * time.Minute)
		defer bound.Stop()
		var peer string
		for range 2 {
			select {
			case err := <-sent:
				if err != nil {
					return "", err
				}
			case peer = <-got:
			case <-bound.C:
				return "", fmt.Errorf("the other call never came")
			}
		}
		return peer, nil
	}
	peer, err := exchange(in, out, base+" "+placeholder)
	peerBase, peerKey, ok := strings.Cut(peer, " ")
	if err != nil || !ok {
		work(who+"peer-met", func() error { return fmt.Errorf("no peer: %v %q", err, peer) })
		return
	}
	escape(who+"other-call-endpoint-with-its-placeholder", func() error { return modelRequest(peerBase, "POST", "/v1/messages", peerKey) })
	escape(who+"other-call-endpoint-with-own-placeholder", func() error { return modelRequest(peerBase, "POST", "/v1/messages", placeholder) })
	escape(who+"own-endpoint-with-other-placeholder", func() error { return modelRequest(base, "POST", "/v1/messages", peerKey) })
	_, err = exchange(in+".done", out+".done", "done")
	work(who+"peer-met", func() error { return err })
}
