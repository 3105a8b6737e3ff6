package testbin

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

func TestBinName(t *testing.T) {
	for pkg, want := range map[string]string{
		"peal/testdata/fakeagent": "fakeagent",
		"example.com/tool/v2":     "tool",
		"v2":                      "v2",
		"example.com/vx":          "vx",
	} {
		if got := binName(pkg); got != want {
			t.Errorf("binName(%q) = %q, want %q", pkg, got, want)
		}
	}
}

func TestBuild(t *testing.T) {
	dir := t.TempDir()
	bins, err := Build(dir, "peal/testdata/fakeagent")
	if err != nil {
		t.Fatal(err)
	}
	bin := bins["fakeagent"]
	if len(bins) != 1 || !filepath.IsAbs(bin) || filepath.Dir(bin) != dir {
		t.Fatalf("bins = %v", bins)
	}
	// Without FAKE_AGENT_DIR the fake just prints its default line.
	out, err := exec.Command(bin).Output()
	if err != nil || len(out) == 0 {
		t.Errorf("running %s: %q, %v", bin, out, err)
	}

	if _, err := Build(dir, "peal/testdata/doesnotexist"); err == nil {
		t.Error("building a missing package succeeded")
	}
}

func TestCached(t *testing.T) {
	bins, missing := Cached("peal/testdata/fakeagent", "peal/testdata/doesnotexist")
	if !slices.Equal(missing, []string{"peal/testdata/doesnotexist"}) {
		t.Fatalf("missing = %q", missing)
	}
	bin := bins["fakeagent"]
	if len(bins) != 1 || !filepath.IsAbs(bin) || filepath.Base(bin) != "fakeagent" {
		t.Fatalf("bins = %v", bins)
	}
	if out, err := exec.Command(bin).Output(); err != nil || len(out) == 0 {
		t.Errorf("running %s: %q, %v", bin, out, err)
	}
	// Once linked, the package is found where it was.
	again, missing := Cached("peal/testdata/fakeagent")
	if len(missing) != 0 || again["fakeagent"] != bin {
		t.Fatalf("second lookup: %v, missing %q; first %s", again, missing, bin)
	}
}

// The helpers are built as the README tells people to build peal: static,
// without the dynamic loader, even where a C compiler would let the go
// command link with cgo (kong imports os/user, which then does).
func TestBuiltWithoutCgo(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the ELF headers of the binaries")
	}
	built, err := Build(t.TempDir(), "peal/cmd/peal")
	if err != nil {
		t.Fatal(err)
	}
	cached, missing := Cached("peal/cmd/peal")
	if len(missing) != 0 {
		t.Fatalf("not found through the cache: %q", missing)
	}
	for how, bin := range map[string]string{"built": built["peal"], "cached": cached["peal"]} {
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s peal (%s) asks for a dynamic loader", how, bin)
			}
		}
		f.Close()
	}
}

// UseMemoryTemp moves the temporary folder to a memory file system only when
// TMPDIR is unset, and its remover takes the folder away again.
func TestUseMemoryTemp(t *testing.T) {
	t.Setenv("TMPDIR", "/somewhere/else")
	UseMemoryTemp()()
	if got := os.Getenv("TMPDIR"); got != "/somewhere/else" {
		t.Fatalf("a TMPDIR the user set became %q", got)
	}
	t.Setenv("TMPDIR", "")
	if !roomyTmpfs(memoryTemp, minMemoryTemp) {
		UseMemoryTemp()()
		if got := os.Getenv("TMPDIR"); got != "" {
			t.Fatalf("TMPDIR %q without a memory file system", got)
		}
		t.Skip("no tmpfs with room at " + memoryTemp)
	}
	remove := UseMemoryTemp()
	dir := os.Getenv("TMPDIR")
	if filepath.Dir(dir) != memoryTemp || os.TempDir() != dir {
		remove()
		t.Fatalf("TMPDIR %q, want a folder of its own in %s", dir, memoryTemp)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
	remove()
	if _, err := os.Stat(dir); !os.IsNotExist(err) || os.Getenv("TMPDIR") != "" {
		t.Fatalf("after remove: %v, TMPDIR %q", err, os.Getenv("TMPDIR"))
	}
}
