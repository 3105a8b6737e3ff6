package policy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"peal/agent"
	"peal/confine"
	"peal/internal/safefs"
)

// Keys of what the run adds to what a call reads, as descriptions and
// denials name them.
const (
	keyHome         = "the home folder, read by allow list"
	keyOtherHome    = "another user's home folder"
	keyToolchains   = "toolchains (PATH and the toolchains' variables)"
	keyAgentInstall = "the agent CLIs' install folders"
	keyGitConfig    = "git's configuration"
	keyRepository   = "the repository"
	keyConfigFile   = "peal's configuration file (--config)"
	keyRootSecret   = "secrets of the system, readable by root"
)

// hiddenFolders are the folders a call reads only where a grant at or
// beneath them says so: the home folder, /root when it is not the home
// folder, and the other folders of /home (other users' homes). A home
// folder that is unknown, or /, is not one of them.
func hiddenFolders(home string) []confine.Path {
	var out []confine.Path
	if home != "" && filepath.IsAbs(home) && filepath.Dir(home) != home {
		home = filepath.Clean(home)
		out = append(out, confine.Path{Path: home, Key: keyHome})
	} else {
		home = ""
	}
	others := []string{"/root"}
	if entries, err := os.ReadDir("/home"); err == nil {
		for _, e := range entries {
			if e.IsDir() {
				others = append(others, filepath.Join("/home", e.Name()))
			}
		}
	}
	realHome := realPath(home)
	for _, o := range others {
		// The home folder, or a folder on the way to it, is not another
		// user's.
		if home != "" && (safefs.Within(home, o) || safefs.Within(realHome, realPath(o))) {
			continue
		}
		out = append(out, confine.Path{Path: o, Key: keyOtherHome})
	}
	return out
}

// rootSecrets are the files of the system that only root reads: a call of
// a peal run as root could read them (root keeps CAP_DAC_OVERRIDE), so
// they are denied then; to another user the kernel refuses them already.
// Those that do not exist are left out: each denied path narrows the
// folders above it, which costs every call a rule per entry.
var rootSecrets = []string{
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/ssl/private", "/etc/krb5.keytab",
	"/etc/kubernetes", "/etc/rancher", "/var/lib/kubelet", "/var/lib/docker", "/var/lib/containers", "/run/containers",
	"/var/lib/cloud",
}

// systemSecrets are rootSecrets as this machine has them, with its SSH
// host keys, when peal runs as root (euid); none otherwise.
func systemSecrets(euid int) []string {
	if euid != 0 {
		return nil
	}
	var out []string
	for _, p := range rootSecrets {
		if _, err := os.Lstat(p); err == nil {
			out = append(out, p)
		}
	}
	keys, _ := filepath.Glob("/etc/ssh/ssh_host_*_key")
	return append(out, keys...)
}

// toolchainFolders are the folders toolchains keep themselves in, named by
// their variables, with the folder each takes when its variable is unset
// (written as agent.ExpandPath takes them).
var toolchainFolders = []string{
	"${GOROOT:-}", "${GOBIN:-}",
	"${CARGO_HOME:-~/.cargo}", "${RUSTUP_HOME:-~/.rustup}",
	"${NVM_DIR:-~/.nvm}", "${VOLTA_HOME:-~/.volta}", "${FNM_DIR:-~/.local/share/fnm}", "${PNPM_HOME:-~/.local/share/pnpm}",
	"${BUN_INSTALL:-~/.bun}", "${DENO_INSTALL:-~/.deno}",
	"${PYENV_ROOT:-~/.pyenv}", "${VIRTUAL_ENV:-}", "${CONDA_PREFIX:-}", "${UV_PYTHON_INSTALL_DIR:-~/.local/share/uv/python}",
	"${UV_TOOL_DIR:-~/.local/share/uv/tools}", "${PIPX_HOME:-~/.local/share/pipx}",
	"${SDKMAN_DIR:-~/.sdkman}", "${JAVA_HOME:-}", "${RBENV_ROOT:-~/.rbenv}", "${GEM_HOME:-}",
	"${ASDF_DATA_DIR:-~/.asdf}", "${MISE_DATA_DIR:-~/.local/share/mise}", "${DOTNET_ROOT:-~/.dotnet}",
}

// gitFiles are the files a call's own git reads in the home folder where
// its configuration names none: the user's excludes and attributes. Never
// the user's configuration: a call's git reads peal's (gitconfig.go). (The
// files the configuration names come from git itself: see Repository.)
var gitFiles = []string{"${XDG_CONFIG_HOME:-~/.config}/git/ignore", "${XDG_CONFIG_HOME:-~/.config}/git/attributes"}

// toolchains are the folders of the toolchains a call's PATH and the
// toolchains' variables lead to, beneath a hidden folder (the others are
// read anyway): each PATH entry there (and, for a prefix's bin folder, the
// prefix), the install folder of each program a PATH entry links to, and
// the folders the variables of toolchainFolders name.
func toolchains(home, path string, getenv func(string) string, hidden []string) []string {
	// The hidden folders as a link may write them, beside their real
	// paths.
	written := []string{home, "/root", "/home"}
	var out []string
	for _, p := range toolchainFolders {
		if full, ok := agent.ExpandPath(p, home, getenv); ok {
			out = append(out, full)
		}
	}
	// Go's own settings (go env -w).
	goenv := getenv("GOENV")
	if goenv == "" {
		goenv, _ = agent.ExpandPath("${XDG_CONFIG_HOME:-~/.config}/go/env", home, getenv)
	}
	if filepath.IsAbs(goenv) {
		out = append(out, goenv)
	}
	gopath := getenv("GOPATH")
	if gopath == "" && home != "" {
		gopath = filepath.Join(home, "go")
	}
	for _, p := range filepath.SplitList(gopath) {
		if filepath.IsAbs(p) {
			out = append(out, filepath.Clean(p))
		}
	}
	dataHome := filepath.Join(home, ".local")
	scanned := map[string]bool{} // the real folders whose links were looked at
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		dir = filepath.Clean(dir)
		realDir := realPath(dir)
		if under(realDir, hidden) {
			out = append(out, dir)
			if parent := filepath.Dir(dir); filepath.Base(dir) == "bin" && !slices.Contains(hidden, realPath(parent)) {
				if parent == dataHome {
					// ~/.local is the user's data too: its bin and lib
					// (Python's user site) are the toolchain's.
					out = append(out, filepath.Join(parent, "lib"))
				} else {
					out = append(out, parent)
				}
			}
		}
		// A folder on PATH twice, or under two names (/bin and /usr/bin),
		// leads to the same links.
		if scanned[realDir] {
			continue
		}
		scanned[realDir] = true
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.Type()&os.ModeSymlink == 0 {
				continue
			}
			// A link into a hidden folder: its target is followed to the
			// end (a link there may lead on). A link that leads elsewhere
			// (most of /usr/bin's) costs no more than its reading.
			link := filepath.Join(dir, e.Name())
			to, err := os.Readlink(link)
			if err != nil {
				continue
			}
			if !filepath.IsAbs(to) {
				to = filepath.Join(dir, to)
			}
			if !under(to, hidden) && !under(to, written) {
				continue
			}
			if target := realPath(link); under(target, hidden) {
				out = append(out, installFolder(target))
			}
		}
	}
	return beneathHidden(out, hidden)
}

// installFolders are the install folders of the programs exes (full
// paths; "" is none) that lie in a hidden folder.
func installFolders(exes []string, hidden []string) []string {
	var out []string
	for _, exe := range exes {
		if exe == "" {
			continue
		}
		if target := realPath(exe); under(target, hidden) {
			if dir := installFolder(target); slices.Contains(hidden, dir) {
				out = append(out, target) // directly in a home folder: the program alone
			} else {
				out = append(out, dir)
			}
		}
	}
	return beneathHidden(out, hidden)
}

// installFolder is the folder a program (a real path) is installed in:
// the node_modules folder of a package, the prefix of a bin folder, else
// the program's folder.
func installFolder(program string) string {
	parts := strings.Split(program, string(filepath.Separator))
	if i := slices.Index(parts, "node_modules"); i > 0 {
		return strings.Join(parts[:i+1], string(filepath.Separator))
	}
	dir := filepath.Dir(program)
	if filepath.Base(dir) == "bin" {
		return filepath.Dir(dir)
	}
	return dir
}

// beneathHidden keeps the paths that exist and lie strictly beneath a
// hidden folder (the others are read anyway, or would open a whole home
// folder), leaving out those another one holds.
func beneathHidden(paths []string, hidden []string) []string {
	var out, reals []string
	for _, p := range paths {
		real := realPath(p)
		if _, err := os.Stat(real); err != nil || !under(real, hidden) || slices.Contains(hidden, real) || under(real, reals) {
			continue
		}
		for i := len(reals) - 1; i >= 0; i-- {
			if safefs.Within(reals[i], real) {
				out, reals = slices.Delete(out, i, i+1), slices.Delete(reals, i, i+1)
			}
		}
		out, reals = append(out, p), append(reals, real)
	}
	return out
}

// under tells whether the real path lies in a hidden folder (real paths).
func under(real string, hidden []string) bool {
	return slices.ContainsFunc(hidden, func(h string) bool { return safefs.Within(real, h) })
}

// realPaths are the real paths of list.
func realPaths(list []confine.Path) []string {
	out := make([]string, len(list))
	for i, p := range list {
		out[i] = realPath(p.Path)
	}
	return out
}

// outsideDenied keeps the paths that do not lie in a denied one (denied:
// their real paths): a grant there would be an error, and a guessed grant
// is dropped instead.
func outsideDenied(paths []confine.Path, denied []string) []confine.Path {
	return slices.DeleteFunc(paths, func(p confine.Path) bool { return under(realPath(p.Path), denied) })
}

// realPath is path with its links followed, as far as it exists: the
// longest part of it that exists, resolved, and the rest as written.
func realPath(path string) string {
	path = filepath.Clean(path)
	dir, rest := path, ""
	for {
		if _, err := os.Lstat(dir); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return path
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return path
	}
	return filepath.Join(real, rest)
}
