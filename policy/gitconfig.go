package policy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"peal/agent"
	"peal/config"
	"peal/confine"
	"peal/internal/gitrepo"
	"peal/internal/safefs"
)

// The git a confined call runs (its agent's, a check's, a hook's) reads a
// git configuration peal writes for the run's calls, never the user's
// (~/.gitconfig, the XDG one, what they include) nor the system's: those
// hold what no call needs and a call could use (a credential helper, a
// token in any of its shapes). peal's file holds the user's identity and
// the settings of the user's that pass (gitPass, confine_git_pass), a
// credential never; the call's environment names it (GIT_CONFIG_GLOBAL)
// and leaves the system's out (GIT_CONFIG_NOSYSTEM), and the kernel
// refuses the user's files. The repository's own configuration is the one
// a call's git cannot work without: it is read, and a credential there
// stops the run at its start (CredentialError). Whatever it names, no
// credential helper runs for a call (credential.helper is emptied after
// every file), and git asks no one for a password.

// gitEntry is one value of git's configuration, the file it comes from (a
// full path) and its scope (system, global, local, worktree).
type gitEntry struct{ scope, file, key, value string }

// repositoryScope tells whether an entry is of the repository's own
// configuration (or a file it includes), which a call's git reads.
func (e gitEntry) repositoryScope() bool { return e.scope == "local" || e.scope == "worktree" }

// readGitConfig lists, through git in the repository, the configuration a
// git there reads (the system's, the user's, the repository's and its
// worktree's, and what they include), each value with its file and scope.
// Values given on git's command line or in its environment are left out:
// a call inherits neither.
func readGitConfig(ctx context.Context, git *gitrepo.Repo) ([]gitEntry, error) {
	out, err := git.Command("config", "--includes", "--list", "--show-scope", "--show-origin", "-z").Run(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the repository's git configuration: %w", err)
	}
	// Each value is "scope NUL origin NUL key LF value NUL"; a file's
	// origin is "file:" and its path, relative to the top of the work
	// tree (where git runs) when git found it there.
	var entries []gitEntry
	fields := strings.Split(out, "\x00")
	for i := 0; i+2 < len(fields); i += 3 {
		file, ok := strings.CutPrefix(fields[i+1], "file:")
		if !ok {
			continue
		}
		if !filepath.IsAbs(file) {
			file = filepath.Join(git.Top(), file)
		}
		key, value, _ := strings.Cut(fields[i+2], "\n")
		entries = append(entries, gitEntry{scope: fields[i], file: filepath.Clean(file), key: key, value: value})
	}
	return entries, nil
}

// gitCredential says what credential a value of git's configuration holds
// (its key can hold one too: url.<base>.insteadOf), and how to take it out;
// "" when it holds none.
func gitCredential(key, value string) (what, fix string) {
	k := strings.ToLower(key)
	section, name := gitSectionName(k)
	switch {
	case section == "http" && name == "extraheader":
		return "an HTTP header git sends (a token, as a CI checkout leaves it)",
			"take it out (actions/checkout: persist-credentials: false)"
	case urlCredential(key) || urlCredential(value):
		return "a password or token in a URL", "take it out of the URL (git remote set-url; a credential helper keeps it out of the configuration)"
	case section == "credential" && name == "helper" && strings.HasPrefix(strings.TrimSpace(value), "!") && holdsSecret(value):
		return "a credential helper written into the configuration with the secret it prints",
			"keep the secret in a credential store (credential.helper = store, or your system's keychain)"
	case secretName(name) && strings.TrimSpace(value) != "":
		return "a password or token in a setting of its own", "take it out (the tool that reads it can take it from its own store or the environment)"
	case holdsToken(value):
		return "a token", "take it out"
	}
	return "", ""
}

// gitSectionName are the section and the name of a setting (a subsection
// between them, if any, left out).
func gitSectionName(key string) (section, name string) {
	section, _, _ = strings.Cut(key, ".")
	return section, key[strings.LastIndex(key, ".")+1:]
}

// secretName tells whether a setting's name (lower case) is one for a
// secret: sendemail.smtpPass, github.token, hub.oauthtoken, a password. A
// program that asks for one (core.askPass) is none.
var secretNameRe = regexp.MustCompile(`(token|password|passwd|secret|apikey|api-key|smtppass)$`)

func secretName(name string) bool { return name != "askpass" && secretNameRe.MatchString(name) }

// holdsSecret tells whether an inline credential helper prints a secret it
// holds: a password= or token line, or a token.
func holdsSecret(helper string) bool {
	return strings.Contains(helper, "password=") || strings.Contains(helper, "oauth_refresh_token=") || holdsToken(helper)
}

// userInfoRe finds the user part of a URL: scheme://user[:password]@.
var userInfoRe = regexp.MustCompile(`://([^/@\s]+)@`)

// tokenPrefixes begin the tokens of GitHub and GitLab, which a URL may
// carry as its user alone, and a setting as its value.
var tokenPrefixes = []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "gldt-"}

// tokenRe finds one of tokenPrefixes at the start of a word.
var tokenRe = regexp.MustCompile(`(^|[^A-Za-z0-9_])(` + strings.Join(tokenPrefixes, "|") + `)[A-Za-z0-9_]{8,}`)

// holdsToken tells whether s holds a token of a known shape.
func holdsToken(s string) bool { return tokenRe.MatchString(s) }

// urlCredential tells whether s holds a URL whose user part carries a
// password, or is a token.
func urlCredential(s string) bool {
	for _, m := range userInfoRe.FindAllStringSubmatch(s, -1) {
		user, password, found := strings.Cut(m[1], ":")
		if found && password != "" {
			return true
		}
		if slices.ContainsFunc(tokenPrefixes, func(p string) bool { return strings.HasPrefix(user, p) }) {
			return true
		}
	}
	return false
}

// redactURL is s with the user part of every URL in it left out.
func redactURL(s string) string { return userInfoRe.ReplaceAllString(s, "://…@") }

// gitFilesOf are the files a call's own git reads that git's configuration
// (entries) names: each file a value of the repository's configuration
// comes from (what it includes), and the excludes and attributes files the
// configuration the call reads names (the repository's, or the user's,
// which peal's file for the calls names again).
func gitFilesOf(entries []gitEntry, home string) []string {
	var out []string
	for _, e := range entries {
		if e.repositoryScope() {
			out = append(out, e.file)
		}
		switch strings.ToLower(e.key) {
		case "core.excludesfile", "core.attributesfile":
			if p, ok := agent.ExpandPath(e.value, home, func(string) string { return "" }); ok {
				out = append(out, p)
			}
		}
	}
	return out
}

// CredentialError is a credential in the git configuration a confined
// call reads: Key names it (a URL in it without its user part), File is
// where it is set, What what it holds, Fix how to take it out; Where says
// where confine_git_credentials is set.
type CredentialError struct{ Key, File, What, Fix, Where string }

func (e *CredentialError) Error() string {
	return fmt.Sprintf("%s (in %s) holds %s, which every confined call could read (a call's own git reads that file): %s, "+
		"or set confine_git_credentials = allow (%s) to run with it in the calls' reach", e.Key, e.File, e.What, e.Fix, e.Where)
}

// gitPass are the settings of the user's configuration a call's git gets
// by default (as git lists them: section and name in lower case): the
// identity, how text files are written and named, where the user's
// excludes and attributes are, a new repository's branch, how conflicts,
// diffs and pulls look, and Git LFS's filter (a repository that uses it
// shows its files as they are).
var gitPass = []string{
	"user.name", "user.email",
	"core.autocrlf", "core.eol", "core.safecrlf", "core.quotepath", "core.precomposeunicode",
	"core.excludesfile", "core.attributesfile",
	"init.defaultbranch", "merge.conflictstyle", "diff.algorithm", "pull.rebase", "pull.ff", "color.ui",
	"filter.lfs.*",
}

// gitPasses tells whether key (as git lists it) is one of patterns: a
// setting's name, or section.* (subsection.*); section and name compare
// in any case, a subsection exactly.
func gitPasses(key string, patterns []string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(foldGitKey(key), foldGitKey(prefix)) {
				return true
			}
		} else if foldGitKey(key) == foldGitKey(p) {
			return true
		}
	}
	return false
}

// foldGitKey is a key with its section and name in lower case, as git
// compares them.
func foldGitKey(key string) string {
	first, last := strings.Index(key, "."), strings.LastIndex(key, ".")
	if first < 0 {
		return strings.ToLower(key)
	}
	return strings.ToLower(key[:first]) + key[first:last] + strings.ToLower(key[last:])
}

// credentialSetting tells whether a confine_git_pass pattern could pass a
// credential, whatever its value: the credential helpers and their
// settings, the URLs git rewrites (which may carry one), the headers git
// sends, a setting named for a secret.
func credentialSetting(p string) bool {
	k := strings.ToLower(strings.TrimSuffix(p, "*"))
	section, name := gitSectionName(k)
	return section == "credential" || section == "url" || strings.HasPrefix("credential.", k) || strings.HasPrefix("url.", k) ||
		name == "extraheader" || secretName(name)
}

// callsGitConfig is the text of the git configuration of the run's calls:
// the settings of the user's configuration (the system's and the user's,
// with what they include: entries) that pass, the later value of a key
// winning as in git, none that holds a credential; and the identity of
// peal's environment when the configuration gives none. skipped are the
// keys that held a credential.
func callsGitConfig(entries []gitEntry, pass []string, getenv func(string) string) (text string, skipped []string) {
	values := map[string]string{} // one value a key: the last wins
	var order []string
	for _, e := range entries {
		if e.repositoryScope() || !gitPasses(e.key, pass) {
			continue
		}
		if what, _ := gitCredential(e.key, e.value); what != "" || credentialSetting(e.key) {
			skipped = append(skipped, redactURL(e.key))
			continue
		}
		k := foldGitKey(e.key)
		if _, seen := values[k]; !seen {
			order = append(order, k)
		}
		values[k] = e.value
	}
	for _, id := range []struct{ key, env string }{{"user.name", "GIT_AUTHOR_NAME"}, {"user.email", "GIT_AUTHOR_EMAIL"}} {
		if _, ok := values[id.key]; !ok && getenv(id.env) != "" {
			order, values[id.key] = append(order, id.key), getenv(id.env)
		}
	}
	var b strings.Builder
	b.WriteString("# The git configuration of peal's confined calls for this run: the user's identity and the settings\n" +
		"# of the user's that pass (confine_git_pass). Written by peal; rewritten by the next run.\n")
	section := ""
	for _, k := range order {
		head, name := gitHeader(k)
		if head != section {
			b.WriteString(head + "\n")
			section = head
		}
		fmt.Fprintf(&b, "\t%s = %s\n", name, gitQuote(values[k]))
	}
	return b.String(), skipped
}

// gitHeader is the section line of a key and the name of its setting:
// [section] or [section "subsection"].
func gitHeader(key string) (header, name string) {
	first, last := strings.Index(key, "."), strings.LastIndex(key, ".")
	name = key[last+1:]
	if first == last {
		return "[" + key[:first] + "]", name
	}
	sub := key[first+1 : last]
	sub = strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(sub)
	return "[" + key[:first] + ` "` + sub + `"]`, name
}

// gitQuote is v as a value of a git configuration file, read back as it
// is.
func gitQuote(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`, "\b", `\b`).Replace(v) + `"`
}

// callsGitEnv are the variables that give a call peal's git configuration
// for it (file; os.DevNull: none), with the system's left out, no
// credential helper after every file (credential.helper = "" empties the
// list the files made) and no program asked for a password.
func callsGitEnv(file string) []string {
	reset := []string{"credential.helper", "core.askPass"}
	env := []string{"GIT_CONFIG_GLOBAL=" + file, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_COUNT=" + strconv.Itoa(len(reset))}
	for i, k := range reset {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, k), fmt.Sprintf("GIT_CONFIG_VALUE_%d=", i))
	}
	return env
}

// gitSection says what a call's own git reads of the user's configuration.
func (c *Rules) gitSection() Section {
	return Section{Head: "a call's git reads peal's configuration for the calls, never yours or the system's: no credential helper, and of yours only",
		Items: append(slices.Clone(gitPass), c.gitPass...)}
}

// checkGitPass refuses a confine_git_pass pattern that could pass a
// credential.
func checkGitPass(pass []string, sources map[string]config.Source) error {
	for _, p := range pass {
		if credentialSetting(p) {
			return fmt.Errorf("confine_git_pass %q (set by %s) names settings that hold or fetch credentials: a confined call's git never gets one; take it out",
				p, config.Describe("confine_git_pass", sources))
		}
	}
	return nil
}

// Repository reads, through git and before any call, the configuration a
// call's own git would read in the repository. From the user's and the
// system's it makes the calls' git configuration (written before the
// first call: see ForCall). Where the kernel confines files: a credential
// in the repository's own configuration (what a call's git reads of it:
// an http.*.extraheader, a password or token in a URL or in a setting, a
// credential helper that prints one) stops the run, in one line naming
// the key, its file and the fix, unless confine_git_credentials = allow;
// and each file a call's git reads in a hidden folder (an include of the
// repository's configuration, the excludes file) becomes readable: git
// stops at a file it may not read. It must be called before the first
// ForCall.
func (c *Rules) Repository(ctx context.Context, git *gitrepo.Repo) error {
	if c == nil {
		return nil
	}
	entries, err := readGitConfig(ctx, git)
	if err != nil {
		return err
	}
	text, skipped := callsGitConfig(entries, append(slices.Clone(gitPass), c.gitPass...), c.getenv)
	c.gitConfig = []byte(text)
	if len(skipped) > 0 && c.log != nil {
		c.log.Warn("settings of your git configuration that hold a credential are not given to confined calls", "settings", strings.Join(skipped, ", "))
	}
	if !c.support.Files || c.unenforced {
		return nil
	}
	if !c.gitCredentials {
		for _, e := range entries {
			if !e.repositoryScope() {
				continue // a call reads peal's file instead
			}
			if what, fix := gitCredential(e.key, e.value); what != "" {
				return &CredentialError{Key: redactURL(e.key), File: e.file, What: what, Fix: fix,
					Where: config.Describe("confine_git_credentials", c.sources)}
			}
		}
	}
	files := beneathHidden(gitFilesOf(entries, c.home), c.hidden)
	c.base.Read = append(c.base.Read, outsideDenied(confine.Paths(keyGitConfig, files...), c.denied)...)
	return nil
}

// writeGitConfig writes the calls' git configuration (once, before the
// first call) and returns the variables that give it to them; a file that
// cannot be written gives them none (os.DevNull).
func (c *Rules) writeGitConfig() []string {
	if c.gitConfigPath == "" || c.gitConfig == nil || c.describing {
		return callsGitEnv(os.DevNull)
	}
	err := os.MkdirAll(filepath.Dir(c.gitConfigPath), 0o700)
	if err == nil {
		err = safefs.WriteFile(c.gitConfigPath, c.gitConfig)
	}
	if err != nil {
		if c.log != nil {
			c.log.Warn("could not write the git configuration of confined calls: their git runs with none of yours", "file", c.gitConfigPath, "err", err)
		}
		return callsGitEnv(os.DevNull)
	}
	c.base.Read = append(c.base.Read, outsideDenied(confine.Paths(keyGitConfig, beneathHidden([]string{c.gitConfigPath}, c.hidden)...), c.denied)...)
	return callsGitEnv(c.gitConfigPath)
}
