package integration

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"peal/internal/testkit/mockllm"
)

// TestPealConfinedToolchains: the project's check builds and tests with the
// common toolchains, confined as every check is (and unconfined, which must
// end the same): Go (go vet, go test, with the build cache where Go puts it
// by default, ~/.cache/go-build, which peal makes), npm (installing a
// package from a tarball of the tree, with its cache, ~/.npm), a Python
// virtual environment (python -m venv, pip installing a wheel of the tree),
// and git. Nothing is downloaded: the package and the wheel are the tree's.
func TestPealConfinedToolchains(t *testing.T) {
	t.Parallel()
	a := firstAgent(t)
	for _, tool := range []string{"go", "npm", "node", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s on PATH", tool)
		}
	}
	python := venvPython(t)
	eachMode(t, func(t *testing.T, mode string) {
		sb, bin := checksSandbox(t, a)
		// Go's own build cache, where a user's go puts it: not the
		// machine's, which checksSandbox names.
		sb.base = slices.DeleteFunc(sb.base, func(kv string) bool { return strings.HasPrefix(kv, "GOCACHE=") })
		writeFile(t, filepath.Join(sb.repo, "localdep-1.0.0.tgz"), string(npmTarball(t)))
		writeFile(t, filepath.Join(sb.repo, "package.json"), `{"name":"proj","version":"1.0.0","private":true}`+"\n")
		writeFile(t, filepath.Join(sb.repo, "mypkg-1.0-py3-none-any.whl"), string(wheel(t)))
		writeFile(t, filepath.Join(sb.repo, ".gitignore"), "node_modules/\n.venv/\npackage-lock.json\n")
		writeFile(t, filepath.Join(sb.repo, "toolchains.sh"), `set -e
go vet ./...
go test -count=1 ./...
npm install --no-audit --no-fund --offline ./localdep-1.0.0.tgz
node -e 'process.exit(require("localdep")() === 42 ? 0 : 1)'
`+python+` -m venv .venv
.venv/bin/pip install --no-index --disable-pip-version-check -q ./mypkg-1.0-py3-none-any.whl
.venv/bin/python -c 'import mypkg; assert mypkg.X == 1'
git status --short >/dev/null
git diff >/dev/null
echo TOOLCHAINS-OK
`)
		gitIn(t, sb.repo, sb.base, "add", "-A")
		gitIn(t, sb.repo, sb.base, "commit", "-q", "-m", "toolchains")
		srv := mockllm.New(escapeTask(legitWork("hello.txt")), mockllm.WithKey(testKey))
		t.Cleanup(srv.Close)
		root := filepath.Dir(sb.repo)
		plan, stateDir, logs := filepath.Join(root, "plan.md"), filepath.Join(root, "state"), filepath.Join(root, "logs")
		writeFile(t, plan, "# Plan\n\n## Task 1\n\nCreate hello.txt with a greeting.\n")
		env := append(a.pealEnv(t, sb, srv.URL, testKey), "PEAL_CONFINE="+mode)
		start := time.Now()
		r := run(t, sb.repo, env, nil, 20*time.Minute, pealBin(t), "run", "--plan", plan, "--repo", sb.repo, "--state-dir", stateDir,
			"--agent-kind", a.kind, "--agent-cmd", bin, "--agent-log-dir", logs, "--check-command", "bash toolchains.sh")
		out := checkOutputs(t, logs)
		if r.code != 0 || strings.Count(out, "TOOLCHAINS-OK") != 2 {
			t.Fatalf("confine = %s: want exit 0 and the toolchains' check passing twice\n%s\nchecks:\n%s", mode, r, out)
		}
		if got, want := checkRuns(t, stateDir), []string{"start:-1 pass", "execute:1 pass"}; !slices.Equal(got, want) {
			t.Fatalf("check runs %q, want %q", got, want)
		}
		t.Logf("confine = %s: Go, npm, a Python venv and git built and tested, exit 0 in %s", mode, time.Since(start).Round(100*time.Millisecond))
	})
}

// venvPython is a Python that makes virtual environments by itself (a
// pyenv shim needs its root, in another user's home): the system's when it
// can, else the first on PATH; the test skips when there is none.
func venvPython(t *testing.T) string {
	t.Helper()
	var list []string
	if p, err := exec.LookPath("python3"); err == nil && !strings.Contains(p, "/shims/") {
		list = append(list, p)
	}
	list = append(list, "/usr/bin/python3")
	for _, p := range list {
		if exec.Command(p, "-c", "import venv, ensurepip").Run() == nil {
			return p
		}
	}
	t.Skip("no Python that makes virtual environments")
	return ""
}

// npmTarball is the package localdep 1.0.0, as npm pack makes it.
func npmTarball(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range map[string]string{
		"package/package.json": `{"name":"localdep","version":"1.0.0","main":"index.js"}` + "\n",
		"package/index.js":     "module.exports = () => 42\n",
	} {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	gz.Close()
	return buf.Bytes()
}

// wheel is the wheel of the Python package mypkg 1.0 (X = 1).
func wheel(t *testing.T) []byte {
	t.Helper()
	files := [][2]string{
		{"mypkg/__init__.py", "X = 1\n"},
		{"mypkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: mypkg\nVersion: 1.0\n"},
		{"mypkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: peal-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var record strings.Builder
	for _, f := range files {
		sum := sha256.Sum256([]byte(f[1]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f[0], base64.RawURLEncoding.EncodeToString(sum[:]), len(f[1]))
	}
	record.WriteString("mypkg-1.0.dist-info/RECORD,,\n")
	files = append(files, [2]string{"mypkg-1.0.dist-info/RECORD", record.String()})
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		w, err := zw.Create(f[0])
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f[1]))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
