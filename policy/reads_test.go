package policy

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"peal/agent"
	"peal/config"
	"peal/confine"
	"peal/internal/gitrepo"
	"peal/internal/testkit/testgit"
	"peal/phase"
)

// fakeHome makes the files of a home folder in a temporary folder: a path
// ending in "/" is a folder, "a -> b" a link (b relative to home unless
// full), anything else a file. It returns the home folder, its path real.
func fakeHome(t *testing.T, entries ...string) string {
	t.Helper()
	home, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name, target, link := strings.Cut(e, " -> ")
		p := filepath.Join(home, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		switch {
		case link:
			if !filepath.IsAbs(target) {
				target = filepath.Join(home, target)
			}
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		case strings.HasSuffix(name, "/"):
			os.MkdirAll(p, 0o755)
		default:
			os.WriteFile(p, []byte("x\n"), 0o644)
		}
	}
	return home
}

// envOf is a getenv of vars ("NAME=value").
func envOf(vars ...string) func(string) string {
	return func(name string) string {
		for _, kv := range vars {
			if v, ok := strings.CutPrefix(kv, name+"="); ok {
				return v
			}
		}
		return ""
	}
}

// TestHiddenFolders: the home folder, /root when it is not the home
// folder, and every other folder of /home are read by allow list; a folder
// on the way to the home folder is not another user's; an unknown home
// folder (or /) is none of them.
func TestHiddenFolders(t *testing.T) {
	t.Parallel()
	var others []string
	entries, _ := os.ReadDir("/home")
	for _, e := range entries {
		if e.IsDir() {
			others = append(others, filepath.Join("/home", e.Name()))
		}
	}
	paths := func(list []confine.Path) []string {
		var out []string
		for _, p := range list {
			out = append(out, p.Key+" "+p.Path)
		}
		return out
	}
	want := []string{keyHome + " /tmp/h", keyOtherHome + " /root"}
	for _, o := range others {
		want = append(want, keyOtherHome+" "+o)
	}
	if got := paths(hiddenFolders("/tmp/h")); !slices.Equal(got, want) {
		t.Errorf("home /tmp/h:\n got %q\nwant %q", got, want)
	}
	want = []string{keyHome + " /root"}
	for _, o := range others {
		want = append(want, keyOtherHome+" "+o)
	}
	if got := paths(hiddenFolders("/root")); !slices.Equal(got, want) {
		t.Errorf("home /root:\n got %q\nwant %q", got, want)
	}
	if len(others) > 0 {
		// A home folder in /home: the others are another user's, not it.
		got := paths(hiddenFolders(others[0] + "/"))
		if got[0] != keyHome+" "+others[0] || slices.Contains(got[1:], keyOtherHome+" "+others[0]) {
			t.Errorf("home %s: %q", others[0], got)
		}
	}
	// Without a home folder, the others' are still hidden.
	want = []string{keyOtherHome + " /root"}
	for _, o := range others {
		want = append(want, keyOtherHome+" "+o)
	}
	for _, home := range []string{"", "/", "relative"} {
		if got := paths(hiddenFolders(home)); !slices.Equal(got, want) {
			t.Errorf("home %q:\n got %q\nwant %q", home, got, want)
		}
	}
}

// TestToolchains: what a call's PATH and the toolchains' variables lead to
// in the home folder: each PATH entry there (with its prefix, but for
// ~/.local, whose lib alone counts, and ~ itself), the install folder of a
// program a PATH entry links to there (a node package's node_modules, a
// bin folder's prefix), and the folders the variables name or default to
// when they exist (~/.volta here, VOLTA_HOME's when unset), each once (a folder another holds is left
// out); nothing outside the hidden folders, nothing missing, and never a
// whole home folder.
func TestToolchains(t *testing.T) {
	t.Parallel()
	home := fakeHome(t,
		"go/bin/gopls", "go/pkg/mod/", ".cargo/bin/cargo", ".rustup/toolchains/",
		".local/bin/tool -> .local/share/venvs/tool/bin/tool", ".local/share/venvs/tool/bin/tool",
		".local/lib/python3.11/site-packages/", ".local/share/keyrings/login.keyring",
		".npm-global/bin/claude -> .npm-global/lib/node_modules/@anthropic-ai/claude-code/cli.js",
		".npm-global/lib/node_modules/@anthropic-ai/claude-code/cli.js",
		"bin/script", ".config/go/env", "proj/.venv/bin/python", ".volta/bin/volta", "tools/node/bin/node",
		"outside/bin/node -> tools/node/bin/node", "notes.txt")
	path := strings.Join([]string{filepath.Join(home, "go/bin"), filepath.Join(home, ".cargo/bin"), filepath.Join(home, ".local/bin"),
		filepath.Join(home, ".npm-global/bin"), filepath.Join(home, "bin"), "/usr/bin", "relative/bin", filepath.Join(home, "outside/bin"),
		filepath.Join(home, "missing/bin")}, string(os.PathListSeparator))
	hidden := []string{home}
	// outside/bin links to a program installed elsewhere (tools/node):
	// that install folder is read too.
	got := toolchains(home, path, envOf("VIRTUAL_ENV="+filepath.Join(home, "proj/.venv"), "NVM_DIR="+filepath.Join(home, ".nvm")), hidden)
	for i := range got {
		got[i] = strings.TrimPrefix(got[i], home+"/")
	}
	slices.Sort(got)
	want := []string{
		".cargo", ".config/go/env", ".local/bin", ".local/lib", ".local/share/venvs/tool", ".npm-global", ".rustup", ".volta",
		"bin", "go", "outside", "proj/.venv", "tools/node",
	}
	if !slices.Equal(got, want) {
		t.Errorf("toolchains\n got %q\nwant %q", got, want)
	}
	// A variable that names the home folder itself (GOPATH=$HOME) opens
	// nothing: the home folder stays read by allow list.
	got = toolchains(home, "", envOf("GOPATH="+home, "CARGO_HOME=/"), hidden)
	if slices.Contains(got, home) || slices.Contains(got, "/") {
		t.Errorf("a whole home folder or / granted: %q", got)
	}
}

// TestInstallFolders: an agent CLI's install folder is read by its calls:
// a node package's node_modules, a bin folder's prefix, a program's
// folder, or the program alone when it lies right in the home folder.
func TestInstallFolders(t *testing.T) {
	t.Parallel()
	home := fakeHome(t, ".local/bin/claude -> .local/share/claude/versions/2.1.0", ".local/share/claude/versions/2.1.0",
		"agent.sh", "tools/codex/bin/codex", ".npm/lib/node_modules/@google/gemini-cli/dist/index.js")
	got := installFolders([]string{filepath.Join(home, ".local/bin/claude"), filepath.Join(home, "agent.sh"), filepath.Join(home, "tools/codex/bin/codex"),
		filepath.Join(home, ".npm/lib/node_modules/@google/gemini-cli/dist/index.js"), "/usr/bin/env", ""}, []string{home})
	want := []string{filepath.Join(home, ".local/share/claude/versions"), filepath.Join(home, "agent.sh"), filepath.Join(home, "tools/codex"),
		filepath.Join(home, ".npm/lib/node_modules")}
	if !slices.Equal(got, want) {
		t.Errorf("install folders\n got %q\nwant %q", got, want)
	}
}

// rulesIn are the rules of cfg on a machine whose home folder is home and
// whose PATH is path, as a kernel that confines files has them.
func rulesIn(t *testing.T, cfg *config.Config, home, path string) *Rules {
	t.Helper()
	full := confine.Support{Files: true, TCP: true, ABI: 7, Seccomp: true, Supervise: true,
		PIDNamespace: true, IPCNamespace: true, UTSNamespace: true, NetNamespace: true, NetNamespaceAllowed: true}
	c, err := newRulesOn(cfg, nil, full, false,
		machine{home: home, getenv: envOf("PATH=" + path), euid: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// covered tells whether a rule of plan covers path, and whether for
// writing.
func covered(plan confine.Plan, path string) (read, write bool) {
	for _, r := range plan.Rules {
		if path == r.Path || (r.Dir && strings.HasPrefix(path, r.Path+"/")) {
			read, write = true, write || r.Write
		}
	}
	return read, write
}

// TestCallReadsTheAllowList: in the home folder, an agent call reads its
// kind's folders and declared files, the build caches (each its own folder,
// never the whole cache folder), the toolchains of
// its PATH, git's configuration, the repository, its own tree and
// confine_read_paths, and nothing else: no other file of the home folder,
// no other kind's folder, no secret, not peal's configuration file; a check
// reads none of the kinds' folders.
func TestCallReadsTheAllowList(t *testing.T) {
	t.Parallel()
	home := fakeHome(t, ".claude/settings.json", ".claude.json", ".codex/config.toml", ".cache/x/", ".cache/pip/wheels/",
		".cache/git/credential/", ".cache/huggingface/hub/", ".cache/huggingface/token", "go/bin/tool",
		".gitconfig", ".config/git/ignore", ".config/git/credentials", ".npmrc", ".pgpass", ".bash_history", "notes.txt",
		"shared/data.txt", "shared/.env", "state/")
	os.WriteFile(filepath.Join(home, "peal.toml"), []byte("phase_retry_count = 1\n"), 0o644)
	repo := filepath.Join(home, "repo")
	os.MkdirAll(repo, 0o755)
	testgit.Init(t, repo)
	os.WriteFile(filepath.Join(repo, "README.md"), []byte("project\n"), 0o644)
	os.WriteFile(filepath.Join(home, "plan.md"), []byte("## Task 1\nA\n"), 0o644)
	cfg, err := config.Load(config.Inputs{ConfigPath: filepath.Join(home, "peal.toml"), Env: []string{
		"PEAL_PLAN_PATH=" + filepath.Join(home, "plan.md"), "PEAL_REPO_PATH=" + repo, "PEAL_STATE_DIR=" + filepath.Join(home, "state"),
		"PEAL_KNOWLEDGE_DIR=" + filepath.Join(home, "state", "knowledge"), "PEAL_AGENT_KIND=claude", "PEAL_CONFINE=on", "PEAL_CONFINE_READ_PATHS=" + filepath.Join(home, "shared"),
		"PEAL_CONFINE_READ_DENY=" + filepath.Join(home, "shared", ".env")}})
	if err != nil {
		t.Fatal(err)
	}
	c := rulesIn(t, cfg, home, filepath.Join(home, "go/bin")+":/usr/bin")
	claude, _ := agent.Lookup("claude")
	site := Site{Tree: repo}
	for _, kind := range []*agent.Kind{claude, nil} {
		call := c.ForCall(site, kind, nil)
		plan, err := confine.Expand(call.Access, confine.OS)
		if err != nil {
			t.Fatal(err)
		}
		ofClaude := kind != nil
		for _, f := range []struct {
			path        string
			read, write bool
		}{
			{".claude/settings.json", ofClaude, ofClaude},
			{".claude.json", ofClaude, false},
			{".codex/config.toml", false, false},
			{".cache/x", false, false},
			{".cache/pip/wheels", true, true},
			{".cache/git/credential", false, false},
			{".cache/huggingface/hub", false, false},
			{".cache/huggingface/token", false, false},
			{"go/bin/tool", true, false},
			{".gitconfig", false, false},
			{".config/git/ignore", true, false},
			{"repo/.git/config", true, false},
			{"repo/README.md", true, true},
			{"shared/data.txt", true, false},
			{"shared/.env", false, false},
			{".config/git/credentials", false, false},
			{".npmrc", false, false},
			{".pgpass", false, false},
			{".bash_history", false, false},
			{"notes.txt", false, false},
			{"peal.toml", false, false},
			{"plan.md", false, false},
			{"", false, false},
		} {
			read, write := covered(plan, filepath.Join(home, f.path))
			if read != f.read || write != f.write {
				t.Errorf("claude call %v: ~/%s read %v, write %v; want %v, %v", ofClaude, f.path, read, write, f.read, f.write)
			}
		}
	}
}

// TestGitCredential: what in git's configuration is a credential a call
// could read: an extra header, a password in a URL (in a value, or in a
// key's URL), a token as a URL's user, an inline helper that prints a
// secret, a setting named for one (smtpPass, github.token), a token in any
// value; a user alone, an ordinary URL or setting, a helper that is a
// program, the program that asks for a password is none. The line that names a key never shows the credential.
func TestGitCredential(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		key, value string
		credential bool
	}{
		{"http.https://github.com/.extraheader", "AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hz", true},
		{"http.extraheader", "Authorization: Bearer x", true},
		{"HTTP.https://example.com/.ExtraHeader", "x", true},
		{"remote.origin.url", "https://x-access-token:ghs_secret@github.com/o/r", true},
		{"remote.origin.pushurl", "https://user:pw@example.com/r.git", true},
		{"remote.origin.url", "https://ghp_0123456789abcdef@github.com/o/r", true},
		{"remote.origin.url", "https://glpat-abc@gitlab.com/o/r", true},
		{"url.https://oauth2:token@gitlab.example/.insteadof", "https://gitlab.example/", true},
		{"remote.origin.url", "https://github.com/o/r", false},
		{"remote.origin.url", "https://org@dev.azure.com/org/p/_git/r", false},
		{"remote.origin.url", "git@github.com:o/r.git", false},
		{"remote.origin.url", "ssh://git@example.com/r.git", false},
		{"user.email", "t@example.com", false},
		{"http.https://github.com/.sslverify", "true", false},
		{"credential.helper", "!f() { echo username=u; echo password=s3cret; }; f", true},
		{"credential.https://github.com.helper", "!echo password=x", true},
		{"credential.helper", "!f() { echo ghp_0123456789abcdef; }; f", true},
		{"sendemail.smtpPass", "hunter2", true},
		{"sendemail.work.smtppass", "hunter2", true},
		{"github.token", "0123456789abcdef", true},
		{"hub.oauthtoken", "x", true},
		{"gitlab.example.com.password", "x", true},
		{"alias.publish", "!curl -H 'Authorization: token ghp_0123456789abcdef' https://api.github.com", true},
		{"credential.helper", "store", false},
		{"credential.helper", "!gh auth git-credential", false},
		{"credential.https://example.com.username", "me", false},
		{"core.askPass", "/usr/bin/ksshaskpass", false},
		{"http.sslCertPasswordProtected", "true", false},
		{"github.user", "me", false},
		{"sendemail.smtpPass", "", false},
	} {
		what, fix := gitCredential(c.key, c.value)
		if (what != "") != c.credential || (what == "") != (fix == "") {
			t.Errorf("%s = %s: %q, %q; want a credential: %v", c.key, c.value, what, fix, c.credential)
		}
	}
	if got := redactURL("url.https://oauth2:token@gitlab.example/.insteadof"); got != "url.https://…@gitlab.example/.insteadof" {
		t.Errorf("redacted: %q", got)
	}
}

// TestRepositoryCredential: a credential in the git configuration a call
// reads stops a confined run in one line naming the key (its URL's user
// part left out), the file and the fix; with confine_git_credentials =
// allow the run goes on. A file the configuration includes from the home
// folder becomes readable (git stops at one it may not read); where the
// kernel confines no files, nothing is read and nothing stops.
func TestRepositoryCredential(t *testing.T) {
	t.Parallel()
	home := fakeHome(t, ".gitconfig-extra")
	repo := filepath.Join(home, "repo")
	os.MkdirAll(repo, 0o755)
	testgit.Init(t, repo)
	testgit.Git(t, repo, "config", "include.path", filepath.Join(home, ".gitconfig-extra"))
	git := gitrepo.New(phase.Caller{Dir: repo, Limits: phase.Limits{KillGrace: time.Second}}, nil, time.Minute, repo)
	ctx := context.Background()
	cfgOf := func(env ...string) *config.Config {
		os.WriteFile(filepath.Join(home, "plan.md"), []byte("## Task 1\nA\n"), 0o644)
		cfg, err := config.Load(config.Inputs{Env: append([]string{"PEAL_PLAN_PATH=" + filepath.Join(home, "plan.md"), "PEAL_REPO_PATH=" + repo,
			"PEAL_STATE_DIR=" + filepath.Join(home, "state"), "PEAL_AGENT_KIND=claude", "PEAL_CONFINE=on"}, env...)})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	c := rulesIn(t, cfgOf(), home, "")
	if err := c.Repository(ctx, git); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(c.base.Read, func(p confine.Path) bool {
		return p.Path == filepath.Join(home, ".gitconfig-extra") && p.Key == keyGitConfig
	}) {
		t.Errorf("the included file is not read: %v", c.base.Read)
	}
	testgit.Git(t, repo, "config", "http.https://github.com/.extraheader", "AUTHORIZATION: basic c2VjcmV0LXRva2Vu")
	err := rulesIn(t, cfgOf(), home, "").Repository(ctx, git)
	want := "http.https://github.com/.extraheader (in " + filepath.Join(repo, ".git", "config") + ") holds an HTTP header git sends (a token, as a CI checkout leaves it), " +
		"which every confined call could read (a call's own git reads that file): take it out (actions/checkout: persist-credentials: false), " +
		"or set confine_git_credentials = allow (--confine-git-credentials, PEAL_CONFINE_GIT_CREDENTIALS or confine_git_credentials in the config file) to run with it in the calls' reach"
	if err == nil || err.Error() != want {
		t.Errorf("extra header:\n got %v\nwant %s", err, want)
	}
	if err := rulesIn(t, cfgOf("PEAL_CONFINE_GIT_CREDENTIALS=allow"), home, "").Repository(ctx, git); err != nil {
		t.Errorf("allowed: %v", err)
	}
	testgit.Git(t, repo, "config", "--unset", "http.https://github.com/.extraheader")
	os.WriteFile(filepath.Join(home, ".gitconfig-extra"), []byte("[url \"https://oauth2:glpat-secret@gitlab.example/\"]\n\tinsteadOf = https://gitlab.example/\n"), 0o644)
	err = rulesIn(t, cfgOf(), home, "").Repository(ctx, git)
	if err == nil || !strings.HasPrefix(err.Error(), "url.https://…@gitlab.example/.insteadof (in "+filepath.Join(home, ".gitconfig-extra")+") holds a password or token in a URL") ||
		strings.Contains(err.Error(), "glpat-secret") {
		t.Errorf("included URL: %v", err)
	}
	c = rulesIn(t, cfgOf(), home, "")
	c.AsUnenforced()
	if err := c.Repository(ctx, git); err != nil {
		t.Errorf("unenforced: %v", err)
	}
}

// TestCacheVariablesPass: a variable that moves a cache (GOCACHE,
// PIP_CACHE_DIR) reaches a confined call, so that its tool writes the
// folder the policy grants, not the default beside it, which it may not
// write; a variable of the same tool that may hold a secret (GOPROXY, a
// URL with a password) does not.
func TestCacheVariablesPass(t *testing.T) {
	t.Parallel()
	home := fakeHome(t, "caches/go/", "caches/pip/")
	repo := filepath.Join(home, "repo")
	os.MkdirAll(repo, 0o755)
	testgit.Init(t, repo)
	os.WriteFile(filepath.Join(home, "plan.md"), []byte("## Task 1\nA\n"), 0o644)
	cfg, err := config.Load(config.Inputs{Env: []string{"PEAL_PLAN_PATH=" + filepath.Join(home, "plan.md"), "PEAL_REPO_PATH=" + repo,
		"PEAL_STATE_DIR=" + filepath.Join(home, "state"), "PEAL_CONFINE=on"}})
	if err != nil {
		t.Fatal(err)
	}
	peal := []string{"PATH=/usr/bin", "GOCACHE=" + filepath.Join(home, "caches/go"), "PIP_CACHE_DIR=" + filepath.Join(home, "caches/pip"),
		"GOPROXY=https://u:secret@proxy.example", "GITHUB_TOKEN=t"}
	full := confine.Support{Files: true, TCP: true, ABI: 7, Seccomp: true, Supervise: true,
		PIDNamespace: true, IPCNamespace: true, UTSNamespace: true, NetNamespace: true, NetNamespaceAllowed: true}
	c, err := newRulesOn(cfg, nil, full, false, machine{home: home, getenv: envOf(peal...), euid: 1000})
	if err != nil {
		t.Fatal(err)
	}
	call := c.ForCall(Site{Tree: repo}, nil, nil)
	plan, err := confine.Expand(call.Access, confine.OS)
	if err != nil {
		t.Fatal(err)
	}
	env := call.Environ(peal)
	for _, name := range []string{"GOCACHE", "PIP_CACHE_DIR"} {
		i := slices.IndexFunc(env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
		if i < 0 {
			t.Errorf("%s does not reach the call: %q", name, env)
			continue
		}
		if _, write := covered(plan, strings.TrimPrefix(env[i], name+"=")); !write {
			t.Errorf("the call may not write %s", env[i])
		}
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "GOPROXY=") || strings.HasPrefix(kv, "GITHUB_TOKEN=") {
			t.Errorf("%s reaches the call", kv)
		}
	}
}

// TestRealWithin: an ignored entry is granted only as itself: not when it
// is a link (to a folder outside, or inside the tree), nor when it lies
// beneath one.
func TestRealWithin(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	tree, outside := filepath.Join(root, "tree"), filepath.Join(root, "outside")
	for _, d := range []string{tree + "/build", tree + "/sub", outside} {
		os.MkdirAll(d, 0o755)
	}
	os.Symlink(outside, tree+"/zz")
	os.Symlink(tree+"/build", tree+"/alias")
	os.Symlink(outside, tree+"/sub/lnk")
	got := realWithin([]string{tree + "/build", tree + "/zz", tree + "/alias", tree + "/sub/lnk", tree + "/zz/inner", tree + "/missing", outside}, tree)
	if want := []string{tree + "/build", tree + "/missing"}; !slices.Equal(got, want) {
		t.Errorf("granted %q, want %q", got, want)
	}
}
