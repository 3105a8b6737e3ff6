// Package testbin builds helper programs (such as the fakes under testdata)
// so a test package can build them once, typically in TestMain.
package testbin

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// Build compiles each main package import path into outDir with a single
// go build invocation, so shared dependencies compile once, and returns a
// map from the binary name (the last import path element) to its absolute
// path. The go command runs in the current directory, which must be inside
// the module that holds the packages.
func Build(outDir string, pkgs ...string) (map[string]string, error) {
	if len(pkgs) == 0 {
		return map[string]string{}, nil
	}
	abs, err := filepath.Abs(outDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, err
	}
	bins := make(map[string]string, len(pkgs))
	for _, p := range pkgs {
		name := binName(p)
		if prev, dup := bins[name]; dup {
			return nil, fmt.Errorf("testbin: %s and another package both build %s", p, prev)
		}
		bins[name] = filepath.Join(abs, name)
	}

	goTool, err := goBinary()
	if err != nil {
		return nil, err
	}
	// A trailing separator makes go build treat -o as a directory even for
	// a single package.
	args := append([]string{"build", "-o", abs + string(filepath.Separator)}, pkgs...)
	cmd := goCommand(goTool, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("testbin: go %s: %v\n%s", strings.Join(args, " "), err, out.Bytes())
	}
	for _, bin := range bins {
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("testbin: expected binary missing: %w", err)
		}
	}
	return bins, nil
}

// binName is the executable name go build uses for an import path: its last
// element, skipping a major-version suffix such as /v2.
func binName(pkg string) string {
	base := path.Base(pkg)
	if len(base) > 1 && base[0] == 'v' && strings.Trim(base[1:], "0123456789") == "" && path.Dir(pkg) != "." {
		base = path.Base(path.Dir(pkg))
	}
	return base
}

// goCommand is the go command building the helpers as the README tells
// people to build peal: without cgo, as static binaries (peal needs no C,
// and a binary without the dynamic loader starts faster).
func goCommand(goTool string, args ...string) *exec.Cmd {
	cmd := exec.Command(goTool, args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	return cmd
}

// goBinary finds the go command: go test puts the toolchain that runs the
// tests first on PATH, so builds match it.
func goBinary() (string, error) {
	p, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("testbin: no go command: %w", err)
	}
	return p, nil
}

// Main is the body of a TestMain that needs helper programs: it finds pkgs'
// executables in the go command's cache (Cached), builds those it cannot
// find there into a temporary folder, hands their paths to set (nil: no
// helpers), gives the tests' temporary files a memory folder
// (UseMemoryTemp), runs the tests, removes what it built and returns the
// exit code for os.Exit.
func Main(m *testing.M, set func(bins map[string]string), pkgs ...string) int {
	defer UseMemoryTemp()()
	dir, err := os.MkdirTemp("", "peal-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if os.Getenv(UserEnv) != "" {
		// A run as an unprivileged user (RerunAsUser) runs tests that
		// need no helper program: it has no go command's cache to use.
		pkgs = nil
	}
	bins, err := Programs(dir, pkgs...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if set != nil {
		set(bins)
	}
	WidenParallel()
	return m.Run()
}

// Programs returns the executables of pkgs by binary name: those the go
// command's cache holds (Cached), and the others built into dir (Build).
func Programs(dir string, pkgs ...string) (map[string]string, error) {
	bins, missing := Cached(pkgs...)
	built, err := Build(dir, missing...)
	if err != nil {
		return nil, err
	}
	maps.Copy(bins, built)
	return bins, nil
}

// DiskTemp is the temporary folder as the process found it (TMPDIR, else
// the system's): where a benchmark that measures the disk writes, whatever
// UseMemoryTemp chose for the tests.
var DiskTemp = os.TempDir()

// minMemoryTemp is the room a memory file system needs for the tests'
// temporary files (a few MiB each package) with a wide margin; a small
// /dev/shm, as containers often have, is left alone.
const minMemoryTemp = 1 << 30

// UseMemoryTemp points TMPDIR, when the user left it unset, at a folder of
// its own in /dev/shm if that is a memory file system (tmpfs) with room:
// the tests create and delete thousands of small files and git repositories
// (t.TempDir, and every child process they start), which a memory file
// system does without the disk's cost of allocating inodes. A TMPDIR the
// user set is kept, so TMPDIR=/tmp runs the tests on the disk. It returns
// what removes the folder.
func UseMemoryTemp() (remove func()) {
	if os.Getenv("TMPDIR") != "" || !roomyTmpfs(memoryTemp, minMemoryTemp) {
		return func() {}
	}
	dir, err := os.MkdirTemp(memoryTemp, "peal-test-")
	if err != nil {
		return func() {}
	}
	os.Setenv("TMPDIR", dir)
	return func() {
		os.Unsetenv("TMPDIR")
		os.RemoveAll(dir)
	}
}

// Cached finds the executables of pkgs in the go command's build cache,
// where `go run` keeps what it links (Go 1.24 and later): the test packages
// that need the same helper share one link, and a run of the tests after an
// unchanged one links none. It returns them by binary name, as Build does,
// and the packages it could not find there (the cache is off, an older go,
// no echo program) for Build.
//
// The go command says where an executable is when it is asked to run it
// through `-exec echo`. The run that links a package first hands out the
// copy in its scratch folder, which is gone once it returns; the next run
// hands out the cached one.
func Cached(pkgs ...string) (bins map[string]string, missing []string) {
	bins = map[string]string{}
	goTool, err := goBinary()
	echo, echoErr := exec.LookPath("echo")
	if err != nil || echoErr != nil {
		return bins, pkgs
	}
	for _, pkg := range pkgs {
		if path, ok := cachedBinary(goTool, echo, pkg); ok {
			bins[binName(pkg)] = path
		} else {
			missing = append(missing, pkg)
		}
	}
	return bins, missing
}

func cachedBinary(goTool, echo, pkg string) (string, bool) {
	for range 2 {
		out, err := goCommand(goTool, "run", "-exec", echo, pkg).Output()
		if err != nil {
			return "", false
		}
		path := strings.TrimSpace(string(out))
		// The fakes take their part from the name they run under, so the
		// cached copy must carry the binary's own name.
		if !filepath.IsAbs(path) || filepath.Base(path) != binName(pkg) {
			return "", false
		}
		if info, err := os.Stat(path); err == nil && info.Mode().IsRegular() {
			return path, true
		}
	}
	return "", false
}

// WidenParallel lets more parallel tests run at once than the default
// (GOMAXPROCS) unless -test.parallel was given: tests that drive child
// processes spend their time waiting on them, not on a CPU, so on a small
// machine the default leaves it idle. Call it from TestMain before m.Run.
func WidenParallel() {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", strconv.Itoa(max(16, 8*runtime.GOMAXPROCS(0))))
	}
}

// ListSafeDir is a temporary folder, removed after the test, whose path has
// no comma: a test's own t.TempDir holds the test's name, which may, and a
// variable that lists paths (PEAL_CONFINE_WRITE_PATHS) splits on commas.
func ListSafeDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "peal-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// PathWithout is the list of folders path (as PATH holds them) without
// those that hold a program named one of names: the environment of a run
// that must not find, say, stet, whatever the machine has installed.
func PathWithout(path string, names ...string) string {
	var kept []string
	for _, dir := range filepath.SplitList(path) {
		found := false
		for _, name := range names {
			if info, err := os.Stat(filepath.Join(dir, name)); err == nil && !info.IsDir() {
				found = true
			}
		}
		if !found {
			kept = append(kept, dir)
		}
	}
	return strings.Join(kept, string(os.PathListSeparator))
}

// NoStet makes the test or benchmark find no stet on PATH, so that its runs
// review nothing.
func NoStet(tb testing.TB) {
	tb.Setenv("PATH", PathWithout(os.Getenv("PATH"), "stet"))
}
