package fakes

import "os/exec"

// GitEnv lets git work in a scratch repository whatever the machine's git
// config holds: an identity for commits, and no automatic maintenance after
// them (git would start a `git maintenance run --auto` of its own after
// each commit).
var GitEnv = []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
	"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
	"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=maintenance.auto", "GIT_CONFIG_VALUE_0=false"}

// GitInit makes dir an empty git repository without the sample hooks and
// files of git's template, which no test reads.
func GitInit(t interface {
	Helper()
	Fatalf(string, ...any)
}, dir string) {
	t.Helper()
	if out, err := exec.Command("git", "init", "-q", "--template=", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
}
