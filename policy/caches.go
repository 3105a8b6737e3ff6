package policy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"peal/policy/secrets"
)

// cache is one build cache a confined call may write: its folder (in the
// form of secrets.Expand: ~/, ${VAR:-default}, $CACHE, $DATA), and the
// programs that use it, one of which on PATH makes peal make the folder
// when it is missing (a grant of a folder that does not exist grants
// nothing, and the folder that would hold it is not the call's to write).
type cache struct {
	path  string
	tools []string
}

// caches are the build caches, folder by folder: what Go, the JavaScript
// and Python package managers, cargo, Maven, Gradle and the common build
// tools keep of what they download and build. Never the whole cache
// folder (~/.cache): other programs keep there what no call should reach
// (a credential daemon's socket, a token). A cache a confined call writes
// is one the user's own builds read later: what it could plant there is
// what any dependency it downloads could (docs/behaviour.md). Go's module
// cache is goModCache's.
var caches = []cache{
	{"${GOCACHE:-$CACHE/go-build}", []string{"go"}},
	{"${GOLANGCI_LINT_CACHE:-$CACHE/golangci-lint}", []string{"golangci-lint"}},
	{"$CACHE/staticcheck", []string{"staticcheck"}},
	{"${npm_config_cache:-~/.npm}", []string{"npm", "npx"}},
	{"$CACHE/node-gyp", []string{"node-gyp"}},
	{"${COREPACK_HOME:-$CACHE/node/corepack}", []string{"corepack"}},
	{"$CACHE/yarn", []string{"yarn"}},
	{"~/.yarn/berry/cache", []string{"yarn"}},
	{"$CACHE/pnpm", []string{"pnpm"}},
	{"$DATA/pnpm/store", []string{"pnpm"}},
	{"${BUN_INSTALL:-~/.bun}/install/cache", []string{"bun"}},
	{"${DENO_DIR:-$CACHE/deno}", []string{"deno"}},
	{"${PIP_CACHE_DIR:-$CACHE/pip}", []string{"pip", "pip3"}},
	{"${UV_CACHE_DIR:-$CACHE/uv}", []string{"uv"}},
	{"${POETRY_CACHE_DIR:-$CACHE/pypoetry}", []string{"poetry"}},
	{"$CACHE/pipenv", []string{"pipenv"}},
	{"${PRE_COMMIT_HOME:-$CACHE/pre-commit}", []string{"pre-commit"}},
	{"${CARGO_HOME:-~/.cargo}/registry", []string{"cargo"}},
	{"${CARGO_HOME:-~/.cargo}/git", []string{"cargo"}},
	{"~/.m2/repository", []string{"mvn"}},
	{"${GRADLE_USER_HOME:-~/.gradle}/caches", []string{"gradle"}},
	{"${GRADLE_USER_HOME:-~/.gradle}/wrapper", []string{"gradle"}},
	{"${COMPOSER_CACHE_DIR:-$CACHE/composer}", []string{"composer"}},
	{"$CACHE/coursier", []string{"cs", "sbt"}},
	{"$CACHE/bazel", []string{"bazel", "bazelisk"}},
	{"$CACHE/zig", []string{"zig"}},
	{"${CCACHE_DIR:-$CACHE/ccache}", []string{"ccache"}},
	{"${SCCACHE_DIR:-$CACHE/sccache}", []string{"sccache"}},
	{"${PLAYWRIGHT_BROWSERS_PATH:-$CACHE/ms-playwright}", nil},
	{"${PUPPETEER_CACHE_DIR:-$CACHE/puppeteer}", nil},
	{"${CYPRESS_CACHE_FOLDER:-$CACHE/Cypress}", nil},
}

// caches are the build caches a confined call of the run may write: those
// that exist, and those peal makes before the first call (noted in
// c.make), whose tool is on PATH.
func (c *Rules) caches() []string {
	if c.home == "" {
		return nil
	}
	var out []string
	add := func(p string, tools []string) {
		if slices.Contains(out, p) {
			return
		}
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		} else if c.onPath(tools...) {
			out = append(out, p)
			c.make = append(c.make, p)
		}
	}
	// The variables that move a cache are those its path is read from: a
	// confined call keeps them (c.cacheVars), so that its tools use the
	// folders granted, not the defaults beside them, which it may not
	// write. They name folders, never a secret.
	getenv := func(name string) string {
		if !slices.Contains(c.cacheVars, name) {
			c.cacheVars = append(c.cacheVars, name)
		}
		return c.getenv(name)
	}
	add(c.goModCache(getenv), []string{"go"})
	for _, e := range caches {
		if p, ok := secrets.Expand(e.path, c.home, getenv); ok {
			add(p, e.tools)
		}
	}
	return out
}

// goModCache is Go's module cache: $GOMODCACHE, else the first folder of
// $GOPATH (or ~/go) with pkg/mod.
func (c *Rules) goModCache(getenv func(string) string) string {
	if mod := getenv("GOMODCACHE"); filepath.IsAbs(mod) {
		return mod
	}
	gopath := strings.Split(getenv("GOPATH"), string(os.PathListSeparator))[0]
	if !filepath.IsAbs(gopath) {
		gopath = filepath.Join(c.home, "go")
	}
	return filepath.Join(gopath, "pkg", "mod")
}

// onPath tells whether one of the programs is on the PATH of peal's
// environment (the calls').
func (c *Rules) onPath(programs ...string) bool {
	for _, dir := range filepath.SplitList(c.getenv("PATH")) {
		if !filepath.IsAbs(dir) {
			continue
		}
		for _, p := range programs {
			if info, err := os.Stat(filepath.Join(dir, p)); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
				return true
			}
		}
	}
	return false
}
