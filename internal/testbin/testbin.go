// Package testbin builds helper programs (such as the fakes under testdata)
// so a test package can build them once, typically in TestMain.
package testbin

import (
	"bytes"
	"flag"
	"fmt"
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
	cmd := exec.Command(goTool, args...)
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

// goBinary finds the go command: go test puts the toolchain that runs the
// tests first on PATH, so builds match it.
func goBinary() (string, error) {
	p, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("testbin: no go command: %w", err)
	}
	return p, nil
}

// Main is the body of a TestMain that needs helper programs: it builds pkgs
// into a temporary folder, hands their paths to set, runs the tests, removes
// the binaries and returns the exit code for os.Exit.
func Main(m *testing.M, set func(bins map[string]string), pkgs ...string) int {
	dir, err := os.MkdirTemp("", "peal-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bins, err := Build(dir, pkgs...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	set(bins)
	WidenParallel()
	return m.Run()
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
		flag.Set("test.parallel", strconv.Itoa(max(8, 4*runtime.GOMAXPROCS(0))))
	}
}
