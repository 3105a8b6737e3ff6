package worktree

import (
	"slices"
	"testing"
)

// TestModuleNesting: the home worktree's commits leave the gitlinks of the
// submodules directly in it; a submodule's leave those of its own
// submodules, not of theirs; a path belongs to the innermost submodule
// that holds it.
func TestModuleNesting(t *testing.T) {
	t.Parallel()
	var mods []*module
	for _, p := range []string{"lib", "lib/inner", "lib/inner/deep", "lib/other", "vendor/x"} {
		mods = append(mods, &module{path: p})
	}
	if got := ownModules(mods); !slices.Equal(got, []string{"lib", "vendor/x"}) {
		t.Errorf("the work tree's own: %q", got)
	}
	if got := directChildren("lib", mods[1:4]); !slices.Equal(got, []string{"inner", "other"}) {
		t.Errorf("lib's own: %q", got)
	}
	m := &Mirror{modules: mods}
	for p, want := range map[string]string{"lib/a.txt": "lib", "lib/inner/deep/x": "lib/inner/deep", "lib/innerx/y": "lib", "top.txt": "", "vendor/x/z": "vendor/x"} {
		got := ""
		if mod := m.moduleOf(p); mod != nil {
			got = mod.path
		}
		if got != want {
			t.Errorf("%s belongs to %q, want %q", p, got, want)
		}
	}
}
