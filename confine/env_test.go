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
	for _, c := range []struct {
		s    Support
		want string
	}{
		{supportOf(9, ""), "files and TCP enforced by Landlock ABI 9"},
		{supportOf(7, ""), "files and TCP enforced by Landlock ABI 7; UNIX sockets by path not enforced (Landlock ABI 9)"},
		{supportOf(3, ""), "files enforced by Landlock ABI 3; TCP not enforced (it needs Landlock ABI 4, Linux 6.7): calls reach the network through peal's proxy only when they use it; UNIX sockets by path not enforced (Landlock ABI 9)"},
		{Support{ABI: 9, Files: true, TCP: true, CapsKept: "CAP_SYS_ADMIN, CAP_NET_RAW"},
			"files and TCP enforced by Landlock ABI 9; calls keep root's CAP_SYS_ADMIN, CAP_NET_RAW (peal lacks CAP_SETPCAP to drop them)"},
		{supportOf(0, "this Linux has no Landlock (it needs Linux 5.13 built with Landlock)"),
			"not enforced: this Linux has no Landlock (it needs Linux 5.13 built with Landlock); calls get the allowed environment and peal's proxy only"},
	} {
		if got := c.s.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.s, got, c.want)
		}
	}
}
