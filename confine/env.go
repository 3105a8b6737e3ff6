package confine

import "strings"

// BasicEnv are the variables every confined call keeps: what programs need
// to find themselves, their home and folders (XDG_*: the kinds' folders and
// the caches the call may write are found through them), language,
// terminal, time zone, shell and temporary folder, the certificates a
// network behind a proxy of its own needs, whether to colour, and whether
// they run in CI. LC_* (every locale variable) and PEAL_* (peal's own call
// variables) pass too. None of them holds a secret.
var BasicEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_*", "TERM", "TZ", "SHELL",
	"TMPDIR", "TMP", "TEMP", "XDG_*",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
	"NO_COLOR", "CI", "PEAL_*",
}

// FilterEnv keeps the entries of env ("NAME=value") whose name is one of
// the basics or matches one of pass: a name, or a prefix ending in "*"
// ("ANTHROPIC_*"). Everything else — GITHUB_TOKEN, AWS_*, NPM_TOKEN — is
// dropped. Names match case-sensitively, as Unix reads them; on Windows,
// whose names ignore case, the patterns are written in upper case, and the
// variables Windows programs cannot start without pass too.
func FilterEnv(env []string, pass []string) []string {
	out := make([]string, 0, len(BasicEnv)+len(pass))
	for _, kv := range env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		if foldEnvNames {
			name = strings.ToUpper(name)
		}
		if passes(name, BasicEnv) || passes(name, platformEnv) || passes(name, pass) {
			out = append(out, kv)
		}
	}
	return out
}

func passes(name string, patterns []string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(name, prefix) {
				return true
			}
		} else if name == p {
			return true
		}
	}
	return false
}

// ValidEnvPattern tells whether p is a name or a NAME_* prefix pattern: a
// lone "*" would pass everything and is refused, as is a "*" elsewhere.
func ValidEnvPattern(p string) bool {
	prefix, _ := strings.CutSuffix(p, "*")
	return prefix != "" && !strings.ContainsAny(prefix, "*=")
}
