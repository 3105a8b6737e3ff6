package testbin

import (
	"os/exec"
	"path/filepath"
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
