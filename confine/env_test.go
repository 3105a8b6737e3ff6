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
	probed := Support{ABI: 7, Files: true, TCP: true, Seccomp: true, Supervise: true,
		PIDNamespace: true, IPCNamespace: true, UTSNamespace: true, NetNamespace: true, NetNamespaceAllowed: true}
	user := probed
	user.UserNamespace = true
	netOff := probed.WithoutNetNamespace()
	why := "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)"
	fallback := Support{ABI: 4, Files: true, TCP: true, Seccomp: true, Supervise: true, NamespaceWhy: why}
	netOnly := probed
	netOnly.PIDNamespace, netOnly.IPCNamespace, netOnly.UTSNamespace = false, false, false
	netOnly.NamespaceWhy = "the launcher could not mount the /proc of the call's PID namespace: operation not permitted"
	noNet := probed
	noNet.NetNamespace, noNet.NetNamespaceAllowed, noNet.NamespaceWhy = false, false, "the kernel refused it: operation not permitted"
	old := Support{ABI: 3, Files: true, Seccomp: true, SeccompWhy: "no pidfd_getfd (Linux 5.6)", NamespaceWhy: "the kernel refused them: operation not permitted"}
	root := probed
	root.CapsKept = "root's capabilities (peal lacks CAP_SETPCAP to drop them)"
	const filter = "seccomp allow list: no UDP, raw, packet or datagram UNIX sockets, no netlink but NETLINK_ROUTE; no ptrace, bpf, keyrings, mounts or namespaces of its own"
	const sockets = filter + "; every connect decided by peal: TCP to the allowed loopback ports; UNIX sockets only those the call made and confine_unix_sockets"
	const all = "each call in PID, mount, IPC, UTS and network namespaces of its own (loopback only, peal's proxy inside)"
	for _, c := range []struct {
		s    Support
		want string
	}{
		{probed, "files and TCP enforced by Landlock ABI 7; " + all + "; " + sockets + "; no capabilities; no terminal"},
		{user, "files and TCP enforced by Landlock ABI 7; each call in user, PID, mount, IPC, UTS and network namespaces of its own (loopback only, peal's proxy inside); " + sockets + "; no capabilities; no terminal"},
		{netOff, "files and TCP enforced by Landlock ABI 7; each call in PID, mount, IPC and UTS namespaces of its own; no network namespace (confine_network_namespace = false): weaker, a call shares this machine's network, kept to its proxy by seccomp and peal; " + sockets + "; no capabilities; no terminal"},
		{noNet, "files and TCP enforced by Landlock ABI 7; each call in PID, mount, IPC and UTS namespaces of its own; no network namespace: the kernel refused it: operation not permitted; " + sockets + "; no capabilities; no terminal"},
		{fallback, "files and TCP enforced by Landlock ABI 4; a call's processes held by its launcher and peal as subreapers, System V IPC refused (no namespaces: " + why + "); " + sockets + "; no capabilities; no terminal"},
		{netOnly, "files and TCP enforced by Landlock ABI 7; each call in a network namespace of its own (loopback only, peal's proxy inside); a call's processes held by its launcher and peal as subreapers, System V IPC refused (no PID, mount, IPC or UTS namespace: the launcher could not mount the /proc of the call's PID namespace: operation not permitted); " + sockets + "; no capabilities; no terminal"},
		{old, "files enforced by Landlock ABI 3; TCP ports not enforced (it needs Landlock ABI 4, Linux 6.7); a call's processes held by its launcher and peal as subreapers, System V IPC refused (no namespaces: the kernel refused them: operation not permitted); " + filter + "; connections not decided by peal (no pidfd_getfd (Linux 5.6)); UNIX sockets by path not confined; no capabilities; no terminal; a call that ignores the proxy variables connects directly to any host"},
		{root, "files and TCP enforced by Landlock ABI 7; " + all + "; " + sockets + "; calls keep root's capabilities (peal lacks CAP_SETPCAP to drop them); no terminal"},
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
		{user, ""},
		{netOff, ""},
		{noNet, "cannot give calls a network namespace of their own: the kernel refused it: operation not permitted (confine_network_namespace = false runs without, weaker)"},
		{fallback, "cannot give calls PID, mount, IPC and UTS namespaces of their own: " + why + "; it cannot give calls a network namespace of their own: " + why + " (confine_network_namespace = false runs without, weaker)"},
		{old, "cannot give calls PID, mount, IPC and UTS namespaces of their own: the kernel refused them: operation not permitted; it cannot give calls a network namespace of their own: the kernel refused them: operation not permitted (confine_network_namespace = false runs without, weaker); it cannot keep calls from connecting around peal's proxy: no pidfd_getfd (Linux 5.6); no network namespace: the kernel refused them: operation not permitted"},
		{root, "cannot take root's capabilities from calls: they keep root's capabilities (peal lacks CAP_SETPCAP to drop them)"},
		{supportOf(0, "Landlock is disabled"), "cannot confine files: Landlock is disabled"},
	} {
		if got := c.s.Lacks(); got != c.want {
			t.Errorf("Lacks of %+v =\n %q, want\n %q", c.s, got, c.want)
		}
	}
}
