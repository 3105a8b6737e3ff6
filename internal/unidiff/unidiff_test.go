package unidiff

import (
	"slices"
	"testing"
)

// TestParse reads the hunks of a diff of two files: files, new-side ranges
// (context included), added lines by number, and a pure deletion whose
// range is empty.
func TestParse(t *testing.T) {
	t.Parallel()
	diff := `diff --git a/a.go b/a.go
index 1111111..2222222 100644
--- a/a.go
+++ b/a.go
@@ -1,3 +1,4 @@ package a
 package a
+// added
 
 func A() {}
@@ -10,2 +11,0 @@ func B() {
-	gone()
-	gone()
diff --git a/dir/b.txt b/dir/b.txt
new file mode 100644
--- /dev/null
+++ b/dir/b.txt
@@ -0,0 +1,2 @@
+one
+two
`
	hunks := Parse([]byte(diff))
	type got struct {
		file       string
		start, end int
	}
	var gs []got
	for _, h := range hunks {
		gs = append(gs, got{h.File, h.Start, h.End})
	}
	want := []got{{"a.go", 1, 4}, {"a.go", 11, 10}, {"dir/b.txt", 1, 2}}
	if !slices.Equal(gs, want) {
		t.Fatalf("hunks %v, want %v", gs, want)
	}
	if hunks[0].Added[2] != "// added" || len(hunks[0].Added) != 1 || hunks[2].Added[2] != "two" {
		t.Fatalf("added lines %v / %v", hunks[0].Added, hunks[2].Added)
	}
	for _, c := range []struct {
		h    int
		line int
		want bool
	}{{0, 1, true}, {0, 4, true}, {0, 5, false}, {1, 10, false}, {1, 11, false}, {2, 2, true}, {2, 3, false}} {
		if got := hunks[c.h].Covers(c.line); got != c.want {
			t.Errorf("hunk %d covers line %d: %v, want %v", c.h, c.line, got, c.want)
		}
	}
}
