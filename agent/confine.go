package agent

import (
	"path/filepath"
	"strings"
)

// Confinement is what a kind's CLI needs when peal confines its calls
// (confine = auto or on): the folders it writes, the files that hold its
// login, the hosts of its API and the variables it reads. Each kind
// declares it once, in its file; docs/agents.md shows it.
//
// A path is written ~/rest (the home folder) or ${VAR:-default}/rest: the
// folder the variable names when it is set to a full path, else the
// default, as the CLI itself picks it (CLAUDE_CONFIG_DIR, CODEX_HOME,
// XDG_DATA_HOME…). ExpandPath reads them.
type Confinement struct {
	// Folders are where the CLI keeps its state, sessions, logs and
	// caches, writable by its calls. peal makes them before a confined
	// call: a grant of a folder that does not exist grants nothing.
	Folders []string
	// Reads are the files and folders it reads and never writes outside
	// its folders (its configuration in the home folder, its install
	// folder): the rest of the home folder is unreadable to its calls.
	Reads []string
	// Credentials are the files (or folders) that hold its login:
	// readable by its own calls, never by another kind's.
	Credentials []string
	// Hosts are the hosts of its API and its login (host, host:port or
	// *.domain).
	Hosts []string
	// Env are the variables it reads: names, or PREFIX_*.
	Env []string
	// BaseURLs are the variables that point it at another API (a proxy, a
	// local model): the hosts they name are allowed too.
	BaseURLs []string
	// Keys is how peal's model endpoint holds its model key instead of
	// its calls (confine_key_proxy).
	Keys Keys
	// Notes say, in a sentence or two, what was measured of the CLI under
	// confinement and what the declaration leaves out on purpose.
	Notes string
}

// ExpandPath makes a declared path full: ~/ is home, ${VAR:-default} the
// value of VAR (read with getenv) when it is a full path, else default. The
// result is cleaned the way the CLIs join paths (".." taken lexically). ok
// is false when the path cannot be made full: no home folder for ~/, or a
// path that is neither full nor written with ~/ or ${…}.
func ExpandPath(p, home string, getenv func(string) string) (string, bool) {
	if rest, ok := strings.CutPrefix(p, "${"); ok {
		name, rest, found := strings.Cut(rest, ":-")
		def, tail, closed := strings.Cut(rest, "}")
		if !found || !closed || name == "" {
			return "", false
		}
		if v := getenv(name); filepath.IsAbs(v) {
			return filepath.Join(v, tail), true
		}
		return ExpandPath(def+tail, home, getenv)
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home == "" || !filepath.IsAbs(home) {
			return "", false
		}
		return filepath.Join(home, p[1:]), true
	}
	if !filepath.IsAbs(p) {
		return "", false
	}
	return filepath.Clean(p), true
}
