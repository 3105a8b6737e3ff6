package confine

import (
	"reflect"
	"testing"
)

func TestFilterEnv(t *testing.T) {
	env := []string{
		"PATH=/usr/bin", "HOME=/home/u", "USER=u", "LOGNAME=u", "LANG=C.UTF-8", "LC_ALL=C", "LC_TIME=C",
		"TERM=xterm", "TZ=UTC", "SHELL=/bin/sh", "TMPDIR=/tmp/x", "TMP=/tmp/x", "TEMP=/tmp/x", "CI=true",
		"PEAL_CALL_ID=s/1/2", "PEAL_PHASE=execute",
		"XDG_CACHE_HOME=/c", "XDG_CONFIG_HOME=/cfg", "SSL_CERT_FILE=/ca.pem", "SSL_CERT_DIR=/certs",
		"NODE_EXTRA_CA_CERTS=/ca.pem", "REQUESTS_CA_BUNDLE=/ca.pem", "CURL_CA_BUNDLE=/ca.pem", "NO_COLOR=1",
		"GITHUB_TOKEN=ghp_x", "AWS_SECRET_ACCESS_KEY=x", "AWS_PROFILE=p", "NPM_TOKEN=x", "SSH_AUTH_SOCK=/tmp/a",
		"ANTHROPIC_API_KEY=k", "ANTHROPIC_BASE_URL=http://x", "OPENAI_API_KEY=o", "GOFLAGS=-mod=mod",
		"LCX=no", "PATHX=no", "=weird", "novalue",
	}
	got := FilterEnv(env, []string{"ANTHROPIC_*", "GOFLAGS"})
	want := []string{
		"PATH=/usr/bin", "HOME=/home/u", "USER=u", "LOGNAME=u", "LANG=C.UTF-8", "LC_ALL=C", "LC_TIME=C",
		"TERM=xterm", "TZ=UTC", "SHELL=/bin/sh", "TMPDIR=/tmp/x", "TMP=/tmp/x", "TEMP=/tmp/x", "CI=true",
		"PEAL_CALL_ID=s/1/2", "PEAL_PHASE=execute",
		"XDG_CACHE_HOME=/c", "XDG_CONFIG_HOME=/cfg", "SSL_CERT_FILE=/ca.pem", "SSL_CERT_DIR=/certs",
		"NODE_EXTRA_CA_CERTS=/ca.pem", "REQUESTS_CA_BUNDLE=/ca.pem", "CURL_CA_BUNDLE=/ca.pem", "NO_COLOR=1",
		"ANTHROPIC_API_KEY=k", "ANTHROPIC_BASE_URL=http://x", "GOFLAGS=-mod=mod",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FilterEnv\n got %q\nwant %q", got, want)
	}
	if got := FilterEnv([]string{"GITHUB_TOKEN=x"}, []string{"GITHUB_TOKEN"}); len(got) != 1 {
		t.Errorf("a listed name did not pass: %q", got)
	}
}

func TestValidEnvPattern(t *testing.T) {
	for p, want := range map[string]bool{"GOFLAGS": true, "ANTHROPIC_*": true, "*": false, "": false, "A*B": false, "A*B*": false, "A=B": false} {
		if got := ValidEnvPattern(p); got != want {
			t.Errorf("ValidEnvPattern(%q) = %v", p, got)
		}
	}
}

func TestCallEnviron(t *testing.T) {
	env := []string{"PATH=/bin", "GITHUB_TOKEN=x"}
	if got := (&Call{Mode: Off}).Environ(env); !reflect.DeepEqual(got, env) {
		t.Errorf("Off filtered the environment: %q", got)
	}
	if got := (&Call{Mode: Auto}).Environ(env); !reflect.DeepEqual(got, []string{"PATH=/bin"}) {
		t.Errorf("Auto kept %q", got)
	}
}

func TestMode(t *testing.T) {
	for _, name := range Modes {
		m, err := ParseMode(name)
		if err != nil || m.String() != name {
			t.Errorf("ParseMode(%q) = %v, %v", name, m, err)
		}
	}
	if _, err := ParseMode("yes"); err == nil {
		t.Error("ParseMode(yes) took it")
	}
}

func TestSupportLine(t *testing.T) {
	probed := Support{ABI: 7, Files: true, TCP: true, Seccomp: true, Supervise: true, PIDNamespace: true, NetNamespaceAllowed: true}
	full := probed.WithNetNamespace()
	user := full
	user.UserNamespace = true
	fallback := Support{ABI: 4, Files: true, TCP: true, Seccomp: true, Supervise: true,
		NamespaceWhy: "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)"}
	netOnly := full
	netOnly.PIDNamespace, netOnly.NamespaceWhy = false, "the launcher could not mount the /proc of the call's PID namespace: operation not permitted"
	userProbed := probed
	userProbed.UserNamespace = true
	old := Support{ABI: 3, Files: true, Seccomp: true, SeccompWhy: "no pidfd_getfd (Linux 5.6)", NamespaceWhy: "the kernel refused them: operation not permitted"}
	sockets := "seccomp: no UDP, raw or packet sockets, every connect decided by peal (TCP to the allowed loopback ports, UNIX sockets in the call's tree or confine_unix_sockets)"
	for _, c := range []struct {
		s    Support
		want string
	}{
		{probed, "files and TCP enforced by Landlock ABI 7; each call in a PID namespace of its own; " + sockets + "; no terminal"},
		{userProbed, "files and TCP enforced by Landlock ABI 7; each call in user and PID namespaces of its own; " + sockets + "; no terminal"},
		{full, "files and TCP enforced by Landlock ABI 7; each call in PID and network namespaces of its own (loopback only, peal's proxy inside); " + sockets + "; no terminal"},
		{user, "files and TCP enforced by Landlock ABI 7; each call in user, PID and network namespaces of its own (loopback only, peal's proxy inside); " + sockets + "; no terminal"},
		{fallback, "files and TCP enforced by Landlock ABI 4; a call's processes held by its launcher and peal as subreapers (no namespaces: AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)); " + sockets + "; no terminal"},
		{netOnly, "files and TCP enforced by Landlock ABI 7; each call in a network namespace of its own (loopback only, peal's proxy inside); a call's processes held by its launcher and peal as subreapers (no PID namespace: the launcher could not mount the /proc of the call's PID namespace: operation not permitted); " + sockets + "; no terminal"},
		{old, "files enforced by Landlock ABI 3; TCP ports not enforced (it needs Landlock ABI 4, Linux 6.7); a call's processes held by its launcher and peal as subreapers (no namespaces: the kernel refused them: operation not permitted); seccomp: no UDP, raw or packet sockets; connections not decided by peal (no pidfd_getfd (Linux 5.6)); UNIX sockets by path not confined; no terminal; a call that ignores the proxy variables connects directly to any host"},
		{Support{ABI: 9, Files: true, TCP: true, Seccomp: true, Supervise: true, PIDNamespace: true, CapsKept: "CAP_SYS_ADMIN, CAP_NET_RAW"},
			"files and TCP enforced by Landlock ABI 9; each call in a PID namespace of its own; " + sockets + "; no terminal; calls keep root's CAP_SYS_ADMIN, CAP_NET_RAW (peal lacks CAP_SETPCAP to drop them)"},
		{supportOf(0, "files and TCP are confined on Linux only"),
			"files not enforced: files and TCP are confined on Linux only; calls get the allowed environment and peal's proxy only; a call that ignores the proxy variables connects directly to any host"},
	} {
		if got := c.s.String(); got != c.want {
			t.Errorf("%+v:\n got %q\nwant %q", c.s, got, c.want)
		}
	}
	for _, c := range []struct {
		s    Support
		want string
	}{
		{probed, ""},
		{full, ""},
		{fallback, ""},
		{old, "cannot keep calls from connecting around peal's proxy: no pidfd_getfd (Linux 5.6); no network namespace: the kernel refused them: operation not permitted"},
		{supportOf(0, "Landlock is disabled"), "cannot confine files: Landlock is disabled"},
	} {
		if got := c.s.Lacks(); got != c.want {
			t.Errorf("Lacks of %+v = %q, want %q", c.s, got, c.want)
		}
	}
}
