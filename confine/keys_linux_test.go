package confine

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// reverse is s written backwards.
func reverse(s string) string {
	r := []rune(s)
	slices.Reverse(r)
	return string(r)
}

// modelRequest posts a model request to base with key in header; nil
// when the answer is 200.
func modelRequest(base, header, key string) error {
	req, err := http.NewRequest("POST", base+"/v1/messages", strings.NewReader(`{"model":"m"}`))
	if err != nil {
		return err
	}
	if key != "" {
		req.Header.Set(header, key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

// findKey looks for key everywhere a call can look: its environment, every
// process's environment and command line it can read in /proc, the files
// of its home, tree and temporary folders, and the model endpoint without
// the placeholder (or with a key of its choosing). (The escape suite of
// cmd/peal looks in the rest of what a call reaches.) It prints where it
// found it, or "ok".
func findKey(key string) int {
	var found []string
	if slices.ContainsFunc(os.Environ(), func(kv string) bool { return strings.Contains(kv, key) }) {
		found = append(found, "its environment")
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		for _, f := range []string{"environ", "cmdline"} {
			if b, err := os.ReadFile(filepath.Join("/proc", p.Name(), f)); err == nil && bytes.Contains(b, []byte(key)) {
				found = append(found, "/proc/"+p.Name()+"/"+f)
			}
		}
	}
	files := 0
	for _, root := range []string{os.Getenv("HOME"), ".", os.Getenv("TMPDIR")} {
		if root == "" {
			continue
		}
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || files > 5000 {
				return nil
			}
			if d.Type().IsRegular() {
				files++
				if info, err := d.Info(); err == nil && info.Size() < 1<<20 {
					if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(key)) {
						found = append(found, path)
					}
				}
			}
			return nil
		})
	}
	base := os.Getenv("BASE_URL")
	for _, key := range []string{"", "sk-ant-a-key-of-its-own"} {
		if base != "" && modelRequest(base, "X-Api-Key", key) == nil {
			found = append(found, fmt.Sprintf("the model endpoint with the key %q", key))
		}
	}
	if len(found) > 0 {
		fmt.Println("FOUND in " + strings.Join(found, ", "))
		return 1
	}
	fmt.Println("ok")
	return 0
}

// TestModelKey: a confined call whose key peal's model endpoint holds
// reaches its API through the endpoint (in every mode of the machine: in
// a network namespace the endpoint is served there too), and finds the
// key nowhere it can look: not in its environment (where the key's
// variable was passed), not in /proc (peal's environment holds it), not in
// its files, not through the endpoint without its placeholder. Unconfined,
// with the key in its environment, it finds it: the test can fail.
func TestModelKey(t *testing.T) {
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			sc := newScratch(t)
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Api-Key") != realKey || !strings.Contains(r.Header.Get("Via"), "peal") {
					w.WriteHeader(401)
					return
				}
				io.WriteString(w, "ok")
			})
			p, _, _ := openProxy(t)
			hold := &KeyHold{APIs: []HeldAPI{testAPI(t, "test", up, "", "")}, Count: &KeyCount{},
				Point: func(base, _ map[string]string) ([]string, []string) { return []string{"BASE_URL=" + base["test"]}, nil }}
			// The key's variable passes the filter, as a kind's declared
			// variables do: the hold drops it all the same.
			call := &Call{Mode: m.mode, Access: sc.access(sc.tree), Proxy: p, Keys: hold, Support: m.sup, EnvPass: []string{"KEY_VAR"}}
			c := child{call: call, dir: sc.tree, tempDir: sc.temp, env: []string{"KEY_VAR=" + realKey, "TMPDIR=" + sc.temp, "HOME=" + sc.home}}
			if got, err := c.run(t, "model", "-"); got != "ok" {
				t.Fatalf("the model request: %q (%v)", got, err)
			}
			if got := hold.Count.Usage(); got.Requests != 1 {
				t.Errorf("count %+v", got)
			}
			// Peal's own environment holds the key, as it does in a run.
			t.Setenv("MODEL_KEY_OF_THE_TEST", realKey)
			if got, err := c.run(t, "findkey", reverse(realKey)); got != "ok" {
				t.Errorf("the key was found: %q (%v)", got, err)
			}
			open := child{call: &Call{Mode: Off}, dir: sc.tree, env: []string{"KEY_VAR=" + realKey}}
			if got, _ := open.run(t, "findkey", reverse(realKey)); !strings.HasPrefix(got, "FOUND in its environment") {
				t.Errorf("unconfined, the key in its environment was not found: %q", got)
			}
		})
	}
}
