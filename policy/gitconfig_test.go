package policy

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"peal/config"
	"peal/confine"
	"peal/internal/gitrepo"
	"peal/internal/testkit/testgit"
	"peal/phase"
)

// tokens is the secret of every credential the tests plant.
const tokens = "ghp_plantedtoken0123456789"

// userGitConfig is a user's ~/.gitconfig with a credential in each shape
// git takes one, beside settings that pass and one that does not.
var userGitConfig = "[user]\n\tname = The User\n\temail = user@example.com\n" +
	"[core]\n\tautocrlf = input\n\teditor = vim\n" +
	"[init]\n\tdefaultBranch = trunk\n" +
	"[alias]\n\tco = checkout\n\tpush-it = \"!git push https://u:" + tokens + "@github.com/o/r\"\n" +
	"[filter \"lfs\"]\n\tclean = git-lfs clean -- %f\n\trequired = true\n" +
	"[credential]\n\thelper = \"!f() { echo username=u; echo password=" + tokens + "; }; f\"\n" +
	"[credential \"https://example.com\"]\n\thelper = store\n" +
	"[sendemail]\n\tsmtpPass = " + tokens + "\n" +
	"[github]\n\ttoken = " + tokens + "\n" +
	"[url \"https://x:" + tokens + "@github.com/\"]\n\tinsteadOf = https://github.com/\n" +
	"[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic " + tokens + "\n"

// TestCallsGitConfig: the calls' git configuration holds the user's
// identity and the settings that pass (by default, and those
// confine_git_pass adds), read back by git as the user wrote them, and no
// credential in any shape (one in a setting that passes is named, without
// it).
// A call's git with it (and the environment peal gives it) prints nothing
// of the user's configuration else, runs no credential helper (not even
// one of the repository's), and git credential fill prints nothing.
func TestCallsGitConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	global := filepath.Join(dir, "gitconfig")
	os.WriteFile(global, []byte(userGitConfig), 0o644)
	repo := filepath.Join(dir, "repo")
	testgit.Init(t, repo)
	// A helper of the repository's that is a program: it prints a
	// password too.
	helper := filepath.Join(dir, "helper.sh")
	os.WriteFile(helper, []byte("#!/bin/sh\necho username=u\necho password="+tokens+"\n"), 0o755)
	testgit.Git(t, repo, "config", "credential.https://github.com.helper", helper)
	caller := phase.Caller{Dir: repo, Env: []string{"GIT_CONFIG_GLOBAL=" + global, "GIT_CONFIG_NOSYSTEM=1"}, Limits: phase.Limits{KillGrace: time.Second}}
	entries, err := readGitConfig(context.Background(), gitrepo.New(caller, nil, time.Minute, repo))
	if err != nil {
		t.Fatal(err)
	}
	text, skipped := callsGitConfig(entries, append(slices.Clone(gitPass), "alias.*"), func(string) string { return "" })
	if strings.Contains(text, tokens) {
		t.Fatalf("the calls' configuration holds a credential:\n%s", text)
	}
	if !slices.Equal(skipped, []string{"alias.push-it"}) {
		t.Errorf("skipped %q, want the alias that holds a token", skipped)
	}
	file := filepath.Join(dir, "calls.gitconfig")
	os.WriteFile(file, []byte(text), 0o644)
	env := append(callsGitEnv(file), "HOME="+dir, "PATH="+os.Getenv("PATH"))
	git := func(stdin string, args ...string) (string, error) {
		cmd := gitrepo.Plain(repo, env...).Command(args...)
		if stdin != "" {
			cmd.Stdin([]byte(stdin))
		}
		return cmd.Run(context.Background())
	}
	out, err := git("", "config", "--global", "--list")
	want := "user.name=The User\nuser.email=user@example.com\ncore.autocrlf=input\ninit.defaultbranch=trunk\nalias.co=checkout\n" +
		"filter.lfs.clean=git-lfs clean -- %f\nfilter.lfs.required=true\n"
	if err != nil || out != want {
		t.Fatalf("the calls' configuration, as git reads it: %v\n%s\nwant\n%s", err, out, want)
	}
	out, _ = git("", "config", "--list", "--show-origin")
	if strings.Contains(out, tokens) || strings.Contains(out, global) || strings.Contains(out, "/etc/gitconfig") {
		t.Fatalf("a call's git reads:\n%s", out)
	}
	for _, host := range []string{"github.com", "example.com"} {
		out, err = git("protocol=https\nhost="+host+"\n\n", "credential", "fill")
		if err == nil || strings.Contains(out, "password") {
			t.Fatalf("git credential fill for %s: %v\n%s", host, err, out)
		}
	}
	// Without peal's variables, the same git prints the password.
	if out, err := gitrepo.Plain(repo, "GIT_CONFIG_GLOBAL="+global).Command("credential", "fill").Stdin([]byte("protocol=https\nhost=github.com\n\n")).
		Run(context.Background()); err != nil || !strings.Contains(out, "password="+tokens) {
		t.Fatalf("the helper as git runs it for the user: %v\n%s", err, out)
	}
}

// TestGitQuote: a value of any text is read back by git as written.
func TestGitQuote(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	values := []string{`plain`, `with "quotes" and \backslashes\`, "tab\there", "new\nline", "; not a comment # nor this", " spaced "}
	var b strings.Builder
	b.WriteString("[x \"sub \\\"quoted\\\"\"]\n")
	for i, v := range values {
		b.WriteString("\tv" + string(rune('a'+i)) + " = " + gitQuote(v) + "\n")
	}
	file := filepath.Join(dir, "c")
	os.WriteFile(file, []byte(b.String()), 0o644)
	for i, v := range values {
		out, err := gitrepo.Plain(dir).Command("config", "-f", file, "--get", `x.sub "quoted".v`+string(rune('a'+i))).Run(context.Background())
		if err != nil || out != v+"\n" {
			t.Errorf("%q read back as %q (%v)", v, out, err)
		}
	}
	if head, name := gitHeader(`filter.a "b".clean`); head != `[filter "a \"b\""]` || name != "clean" {
		t.Errorf("header %q, name %q", head, name)
	}
}

// TestConfineGitPass: confine_git_pass adds settings of the user's to the
// calls' configuration; one that could pass a credential stops the run,
// naming it.
func TestConfineGitPass(t *testing.T) {
	t.Parallel()
	home := fakeHome(t)
	repo := filepath.Join(home, "repo")
	os.MkdirAll(repo, 0o755)
	os.WriteFile(filepath.Join(home, "plan.md"), []byte("## Task 1\nA\n"), 0o644)
	for _, p := range []string{"credential.helper", "credential.*", "url.*", "http.extraheader", "sendemail.smtppass", "github.token", "cred*"} {
		cfg, err := config.Load(config.Inputs{Env: []string{"PEAL_PLAN_PATH=" + filepath.Join(home, "plan.md"), "PEAL_REPO_PATH=" + repo,
			"PEAL_STATE_DIR=" + filepath.Join(home, "state"), "PEAL_CONFINE=on", "PEAL_CONFINE_GIT_PASS=" + p}})
		if err != nil {
			if !strings.Contains(err.Error(), "confine_git_pass") {
				t.Errorf("%s: %v", p, err)
			}
			continue
		}
		_, err = newRulesOn(cfg, nil, confine.Support{Files: true, TCP: true, ABI: 7, Seccomp: true, Supervise: true}, false, machine{home: home, getenv: envOf(), euid: 1000})
		if err == nil || !strings.HasPrefix(err.Error(), "confine_git_pass \""+p+"\" (set by PEAL_CONFINE_GIT_PASS) names settings that hold or fetch credentials") {
			t.Errorf("%s: %v", p, err)
		}
	}
	for _, p := range []string{"alias.*", "core.editor", `diff.lfs.textconv`} {
		if !gitPasses(p, []string{p}) || credentialSetting(p) {
			t.Errorf("%s does not pass", p)
		}
	}
	if !gitPasses("Alias.CO", []string{"alias.*"}) || gitPasses("filter.LFS.clean", []string{"filter.lfs.*"}) {
		t.Error("section and name compare in any case, a subsection exactly")
	}
}
