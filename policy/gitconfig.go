package policy

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"peal/agent"
	"peal/config"
	"peal/confine"
	"peal/internal/gitrepo"
)

// gitEntry is one value of git's configuration and the file it comes from
// (a full path).
type gitEntry struct{ file, key, value string }

// readGitConfig lists, through git in the repository, the configuration a
// git there reads (the system's, the user's, the repository's and its
// worktree's, and what they include), each value with its file. Values
// given on git's command line or in its environment are left out: a call
// inherits neither.
func readGitConfig(ctx context.Context, git *gitrepo.Repo) ([]gitEntry, error) {
	out, err := git.Command("config", "--includes", "--list", "--show-origin", "-z").Run(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the repository's git configuration: %w", err)
	}
	// Each value is "origin NUL key LF value NUL"; a file's origin is
	// "file:" and its path, relative to the top of the work tree (where
	// git runs) when git found it there.
	var entries []gitEntry
	fields := strings.Split(out, "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		file, ok := strings.CutPrefix(fields[i], "file:")
		if !ok {
			continue
		}
		if !filepath.IsAbs(file) {
			file = filepath.Join(git.Top(), file)
		}
		key, value, _ := strings.Cut(fields[i+1], "\n")
		entries = append(entries, gitEntry{file: filepath.Clean(file), key: key, value: value})
	}
	return entries, nil
}

// gitCredential says what credential a value of git's configuration holds
// (its key can hold one too: url.<base>.insteadOf), and how to take it out;
// "" when it holds none.
func gitCredential(key, value string) (what, fix string) {
	k := strings.ToLower(key)
	if strings.HasPrefix(k, "http.") && strings.HasSuffix(k, ".extraheader") {
		return "an HTTP header git sends (a token, as a CI checkout leaves it)",
			"take it out (actions/checkout: persist-credentials: false)"
	}
	if urlCredential(key) || urlCredential(value) {
		return "a password or token in a URL", "take it out of the URL (git remote set-url; a credential helper keeps it out of the configuration)"
	}
	return "", ""
}

// userInfoRe finds the user part of a URL: scheme://user[:password]@.
var userInfoRe = regexp.MustCompile(`://([^/@\s]+)@`)

// tokenPrefixes begin the tokens of GitHub and GitLab, which a URL may
// carry as its user alone.
var tokenPrefixes = []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "gldt-"}

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

// gitFilesOf are the files git's configuration (entries) names that a
// call's own git reads: each file a value comes from (an include of the
// user's configuration), and the user's excludes and attributes files.
func gitFilesOf(entries []gitEntry, home string) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.file)
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

// Repository reads, through git and before any call, the configuration a
// call's own git reads in the repository. A credential in it (an
// http.*.extraheader, a password or token in a URL) stops the run, in one
// line naming the key, its file and the fix, unless confine_git_credentials
// = allow: a call's git must read that configuration to work, so whatever
// it holds is in every call's reach. And each file of it in a hidden folder
// (an include of the user's configuration, core.excludesFile) becomes
// readable: git stops at a configuration file it may not read. It does
// nothing where the kernel confines no files (everything is in reach
// there) and must be called before the first ForCall.
func (c *Rules) Repository(ctx context.Context, git *gitrepo.Repo) error {
	if c == nil || !c.support.Files || c.unenforced {
		return nil
	}
	entries, err := readGitConfig(ctx, git)
	if err != nil {
		return err
	}
	if !c.gitCredentials {
		for _, e := range entries {
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
