package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"peal/confine"
	"peal/internal/safefs"
)

// systemFolders are the folders at the top of the file systems peal runs
// on that hold the system, or every user's files: a confinement path that
// is one of them (or /) grants or hides far more than any task needs.
var systemFolders = []string{
	"/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/media", "/mnt", "/nix", "/opt",
	"/proc", "/root", "/run", "/sbin", "/snap", "/srv", "/sys", "/tmp", "/usr", "/var",
	"/Applications", "/Library", "/System", "/Users", "/Volumes", "/cores", "/private",
}

// place is a folder of the run that a confinement path must leave alone.
type place struct {
	path, what string
	// written: a confined call never writes it, so a write path may not
	// lie in it either (the state folder, the repository's .git); read: a
	// confined call reads it, so no read denial may hide it.
	written, read bool
}

// CheckConfinePaths refuses a path of confine_write_paths,
// confine_read_paths or confine_read_deny that would make the confinement
// contradict itself or grant (or hide) far more than meant: a path that
// does not exist; / or a system folder at the top (/usr, /home, …); a
// written path that is or holds the repository's .git, the state folder,
// the retry-state store, agent_log_dir or the main work tree, or lies in
// one of the first four; a read path that lies in a secret (built in, or
// confine_read_deny); a denied path that is or holds the work tree, the
// state folder (the calls' temporary folders) or the repository's .git.
// Each error is one
// line naming the key, the value and where it was set. It changes nothing
// in c, which need not be validated (`peal doctor`, `peal config`): an
// unset repo_path leaves the repository's places out.
func (c *Config) CheckConfinePaths() error {
	cp := *c
	cp.ConfineWritePaths, cp.ConfineReadPaths, cp.ConfineReadDeny = slices.Clone(c.ConfineWritePaths), slices.Clone(c.ConfineReadPaths), slices.Clone(c.ConfineReadDeny)
	if err := cp.absolutePaths(); err != nil {
		return err
	}
	if err := cp.expandConfinePaths(); err != nil {
		return err
	}
	if err := cp.ResolveStore(); err != nil {
		return err
	}
	return cp.confinePathsError()
}

// expandConfinePaths makes the paths of the confinement keys full: ~ is
// the home folder. A path with ".." is refused: the kernel takes ".." from
// the real parent of what a path names so far, after its links, which is
// seldom what a person meant.
func (c *Config) expandConfinePaths() error {
	home, _ := os.UserHomeDir()
	for _, list := range []struct {
		key   string
		paths *[]string
	}{{confine.KeyWritePaths, &c.ConfineWritePaths}, {confine.KeyReadPaths, &c.ConfineReadPaths}, {confine.KeyReadDeny, &c.ConfineReadDeny}, {confine.KeyUnixSockets, &c.ConfineUnixSockets}} {
		for i, p := range *list.paths {
			full, err := fullPath(p, home)
			if err != nil {
				return fmt.Errorf("%s %q (set by %s): %v", list.key, p, describe(list.key, c.Sources), err)
			}
			(*list.paths)[i] = full
		}
	}
	return nil
}

// confinePathsError is CheckConfinePaths on paths already made full, with
// StateDir and KnowledgeDir resolved.
func (c *Config) confinePathsError() error {
	places := c.runPlaces()
	home, _ := os.UserHomeDir()
	secrets := confine.Base(home).Deny
	secrets = append(secrets, confine.Paths(confine.KeyReadDeny, c.ConfineReadDeny...)...)
	for _, list := range []struct {
		key   string
		paths []string
		use   pathUse
	}{{confine.KeyWritePaths, c.ConfineWritePaths, written}, {confine.KeyReadPaths, c.ConfineReadPaths, read}, {confine.KeyReadDeny, c.ConfineReadDeny, hidden}} {
		for _, p := range list.paths {
			why := confinePathProblem(p, list.use, places)
			if why == "" && list.use == read {
				why = secretProblem(p, secrets)
			}
			if why != "" {
				return fmt.Errorf("%s %q (set by %s) %s", list.key, p, describe(list.key, c.Sources), why)
			}
		}
	}
	return nil
}

// runPlaces are the folders of this run that the confinement keeps as they
// are: the state folder (the run's worktree and the calls' temporary
// folders are in it), the retry-state store, agent_log_dir, and, when
// repo_path is known, the repository's .git and the main work tree.
func (c *Config) runPlaces() []place {
	var places []place
	if top := c.workTree(); top != "" {
		if g, err := confine.FindGit(top); err == nil {
			places = append(places, place{path: g.Common, what: confine.KeyGit, written: true, read: true})
			if g.Dir != g.Common {
				places = append(places, place{path: g.Dir, what: "the work tree's git folder", written: true, read: true})
			}
		}
		// The main work tree may not be written whole, but a folder in it
		// may (what worktree_link shares, say).
		places = append(places, place{path: top, what: "the main work tree", read: true})
	}
	places = append(places, place{path: c.StateDir, what: "peal's state folder", written: true, read: true})
	if c.KnowledgeDir != "" {
		places = append(places, place{path: c.KnowledgeDir, what: "the retry-state store (knowledge_dir)", written: true})
	}
	if c.AgentLogDir != "" {
		places = append(places, place{path: c.AgentLogDir, what: "agent_log_dir", written: true})
	}
	return places
}

// workTree is the top of the git work tree repo_path is in; "" when
// repo_path is unset or in none.
func (c *Config) workTree() string {
	if c.RepoPath == "" {
		return ""
	}
	repo, err := filepath.Abs(c.RepoPath)
	if err != nil {
		return ""
	}
	return workTreeTop(repo)
}

// pathUse is what a confinement key does with its paths.
type pathUse int

const (
	written pathUse = iota // confine_write_paths
	read                   // confine_read_paths
	hidden                 // confine_read_deny
)

// secretProblem is what is wrong with the read path p (full, existing):
// it is or lies in a secret, which no call reads; "" when it is not.
func secretProblem(p string, secrets []confine.Path) string {
	real := resolved(p)
	for _, s := range secrets {
		if safefs.Within(real, resolved(s.Path)) {
			return fmt.Sprintf("lies in %s (%s), which no confined call reads: drop it", s.Path, s.Key)
		}
	}
	return ""
}

// confinePathProblem is what is wrong with the confinement path p (full),
// written, read or hidden from the calls (use), as the end of a sentence
// that names it; "" when nothing is.
func confinePathProblem(p string, use pathUse, places []place) string {
	write := use == written
	real, err := filepath.EvalSymlinks(p)
	switch {
	case errors.Is(err, fs.ErrPermission):
		return "cannot be reached by the user peal runs as: let it search the folders above, or drop it"
	case err != nil:
		return "does not exist: create it, or drop it"
	}
	shown := func(path string) string {
		if path != p {
			return path + ", where " + p + " leads"
		}
		return path
	}
	if filepath.Dir(real) == real || slices.Contains(systemFolders, real) {
		switch use {
		case written:
			return fmt.Sprintf("is %s, a system folder: every call could change it; name the folders the calls need, or drop it", shown(real))
		case read:
			return fmt.Sprintf("is %s, a system folder: name the folders in it the calls need, or drop it", shown(real))
		}
		return fmt.Sprintf("is %s, a system folder every program reads: name what to hide inside it, or drop it", shown(real))
	}
	if use == read {
		return "" // reading a place of the run hides and changes nothing
	}
	if !write {
		// A denial names the widest place it hides: the work tree before
		// its .git.
		places = slices.Clone(places)
		slices.Reverse(places)
	}
	for _, pl := range places {
		at := resolved(pl.path)
		switch {
		case write && safefs.Within(at, real):
			return fmt.Sprintf("is or holds %s (%s), which no confined call writes: name a folder beside it, or drop it", pl.what, pl.path)
		case write && pl.written && safefs.Within(real, at):
			return fmt.Sprintf("lies in %s (%s), which no confined call writes: drop it", pl.what, pl.path)
		case !write && pl.read && safefs.Within(at, real):
			return fmt.Sprintf("is or holds %s (%s), which confined calls read: name what to hide inside it, or drop it", pl.what, pl.path)
		}
	}
	if write && slices.Contains(strings.Split(filepath.ToSlash(real), "/"), ".git") {
		return "is in a repository's .git, which no confined call writes: drop it"
	}
	return ""
}

// resolved is path with the links of its longest existing part followed,
// so that it compares with a path EvalSymlinks made (/tmp on a system where
// it is a link): the part that does not exist yet cannot hold one.
func resolved(path string) string {
	rest := ""
	for dir := filepath.Clean(path); ; {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(real, rest)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return filepath.Clean(path)
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}

// workTreeTop is the nearest folder at or above dir that holds a .git
// entry (a folder, or a worktree's file); "" when none does.
func workTreeTop(dir string) string {
	for {
		if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
