// Package secrets lists the files and folders of a home folder that hold
// credentials, tool by tool: no confined call reads them, even inside a
// folder it may read or write (a toolchain's, a cache), whatever grant
// holds them. It is the one list the confinement policy (package policy,
// confine.Base) and the configuration's checks (a confine_read_paths entry
// in a secret) share; the agent CLIs' own credentials are each kind's
// declaration (package agent), and confine_read_deny adds the user's.
//
// A list of known secrets always misses one: the home folder is read by
// allow list, which keeps the rest out; this list keeps the secrets out of
// what the allow list grants (~/.cargo is read, ~/.cargo/config.toml is
// not).
package secrets

import (
	"path/filepath"
	"strings"
)

// File is one secret: the tool whose it is, and its path as the tool finds
// it: "~/…" in the home folder, "${VAR:-default}/…" where a variable names
// its folder (the default may itself be one such form), and $CONFIG,
// $CACHE and $DATA for the XDG folders ($XDG_CONFIG_HOME or ~/.config,
// $XDG_CACHE_HOME or ~/.cache, $XDG_DATA_HOME or ~/.local/share).
type File struct {
	Tool string
	Path string
}

// Files are the secrets of a home folder.
var Files = []File{
	{"SSH", "~/.ssh"},
	{"GnuPG", "${GNUPGHOME:-~/.gnupg}"},
	{"AWS", "~/.aws"},
	{"Azure", "${AZURE_CONFIG_DIR:-~/.azure}"},
	{"gcloud", "${CLOUDSDK_CONFIG:-$CONFIG/gcloud}"},
	{"kube", "~/.kube"},
	{"Docker", "${DOCKER_CONFIG:-~/.docker}/config.json"},
	{"Podman", "$CONFIG/containers/auth.json"},
	{"netrc", "~/.netrc"},
	{"netrc", "~/_netrc"},
	{"git", "~/.git-credentials"},
	{"git", "$CONFIG/git/credentials"},
	{"gh", "${GH_CONFIG_DIR:-$CONFIG/gh}"},
	{"hub", "$CONFIG/hub"},
	{"glab", "$CONFIG/glab-cli"},
	{"Hugging Face", "${HF_TOKEN_PATH:-${HF_HOME:-$CACHE/huggingface}/token}"},
	{"Hugging Face", "${HF_HOME:-$CACHE/huggingface}/stored_tokens"},
	{"Hugging Face", "~/.huggingface/token"},
	{"cargo", "${CARGO_HOME:-~/.cargo}/credentials"},
	{"cargo", "${CARGO_HOME:-~/.cargo}/credentials.toml"},
	{"cargo", "${CARGO_HOME:-~/.cargo}/config"},
	{"cargo", "${CARGO_HOME:-~/.cargo}/config.toml"},
	{"Go", "${GOENV:-$CONFIG/go/env}"},
	{"npm", "${NPM_CONFIG_USERCONFIG:-~/.npmrc}"},
	{"yarn", "~/.yarnrc.yml"},
	{"yarn", "~/.yarnrc"},
	{"PyPI", "~/.pypirc"},
	{"pip", "${PIP_CONFIG_FILE:-$CONFIG/pip/pip.conf}"},
	{"pip", "~/.pip/pip.conf"},
	{"Poetry", "$CONFIG/pypoetry/auth.toml"},
	{"uv", "$DATA/uv/credentials"},
	{"RubyGems", "~/.gem/credentials"},
	{"RubyGems", "$DATA/gem/credentials"},
	{"Composer", "${COMPOSER_HOME:-$CONFIG/composer}/auth.json"},
	{"Maven", "~/.m2/settings.xml"},
	{"Maven", "~/.m2/settings-security.xml"},
	{"Gradle", "${GRADLE_USER_HOME:-~/.gradle}/gradle.properties"},
	{"Terraform", "~/.terraform.d/credentials.tfrc.json"},
	{"Vault", "~/.vault-token"},
	{"doctl", "$CONFIG/doctl"},
	{"Fly", "~/.fly"},
	{"PostgreSQL", "~/.pgpass"},
	{"MySQL", "~/.my.cnf"},
	{"rclone", "$CONFIG/rclone"},
	{"pass", "${PASSWORD_STORE_DIR:-~/.password-store}"},
	{"keyrings", "$DATA/keyrings"},
	{"bash", "~/.bash_history"},
	{"zsh", "~/.zsh_history"},
	{"fish", "$DATA/fish/fish_history"},
	{"Python", "~/.python_history"},
	{"Node", "~/.node_repl_history"},
	{"psql", "~/.psql_history"},
	{"MySQL", "~/.mysql_history"},
	{"SQLite", "~/.sqlite_history"},
}

// System are the secrets outside any home: the mounted secrets of
// containers and CI runners.
var System = []string{"/run/secrets", "/var/run/secrets"}

// In are the full paths of Files in the home folder home (none when home
// is not a full path), each variable read with getenv (nil: none is set);
// a variable that does not hold a full path is taken as unset.
func In(home string, getenv func(string) string) []string {
	if !filepath.IsAbs(home) {
		return nil
	}
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	out := make([]string, 0, len(Files))
	for _, f := range Files {
		if p, ok := Expand(f.Path, home, getenv); ok {
			out = append(out, p)
		}
	}
	return out
}

// Expand makes a path of Files' form full; ok is false when it cannot be
// (no home folder, a form it does not read).
func Expand(p, home string, getenv func(string) string) (string, bool) {
	for _, x := range []struct{ name, env, def string }{
		{"$CONFIG", "XDG_CONFIG_HOME", "~/.config"},
		{"$CACHE", "XDG_CACHE_HOME", "~/.cache"},
		{"$DATA", "XDG_DATA_HOME", "~/.local/share"},
	} {
		if v := getenv(x.env); filepath.IsAbs(v) {
			p = strings.ReplaceAll(p, x.name, v)
		} else {
			p = strings.ReplaceAll(p, x.name, x.def)
		}
	}
	return expand(p, home, getenv)
}

func expand(p, home string, getenv func(string) string) (string, bool) {
	if rest, ok := strings.CutPrefix(p, "${"); ok {
		name, rest, found := strings.Cut(rest, ":-")
		if !found || name == "" {
			return "", false
		}
		// The default runs to the brace that closes this one.
		depth, end := 1, -1
		for i := 0; i < len(rest) && end < 0; i++ {
			switch rest[i] {
			case '{':
				depth++
			case '}':
				if depth--; depth == 0 {
					end = i
				}
			}
		}
		if end < 0 {
			return "", false
		}
		def, tail := rest[:end], rest[end+1:]
		if v := getenv(name); filepath.IsAbs(v) {
			return filepath.Join(v, tail), true
		}
		return expand(def+tail, home, getenv)
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		if !filepath.IsAbs(home) {
			return "", false
		}
		return filepath.Join(home, p[1:]), true
	}
	if !filepath.IsAbs(p) {
		return "", false
	}
	return filepath.Clean(p), true
}
