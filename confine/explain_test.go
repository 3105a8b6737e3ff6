package confine

import (
	"slices"
	"strings"
	"testing"
)

// explainAccess is an agent call's access in /w (a main work tree), with a
// temporary folder in peal's state folder.
func explainAccess() *Access {
	p := Base("/home/u")
	p.Write = append(p.Write, Paths("work tree", "/w")...)
	p.Write = append(p.Write, Path{Path: "/w/.peal/tmp/call-1", Key: KeyTemp})
	p.Protect = append(p.Protect, Paths(KeyGit, "/w/.git")...)
	p.Protect = append(p.Protect, Path{Path: "/w/.peal", Key: "peal's state folder"})
	p.Deny = append(p.Deny, Path{Path: "/home/u/.codex/auth.json", Key: KeyReadDeny})
	p.Hide = append(p.Hide, Path{Path: "/home/u", Key: "the home folder"})
	p.Read = append(p.Read, Path{Path: "/home/u/go", Key: "toolchains"})
	p.TCP = &TCP{}
	return &p
}

func TestExplain(t *testing.T) {
	p := explainAccess()
	outside := func(path, dir string) string {
		return "the call was refused writing " + path + `: it is outside what the call may write; confine_write_paths = ["` + dir + `"] would allow it`
	}
	secret := func(path, d, key string) string {
		return "the call was refused " + path + ": it is a secret (" + d + ", " + key + "), which a confined call never reads"
	}
	hidden := func(path string) string {
		return "the call was refused reading " + path + `: it lies in /home/u (the home folder), which a confined call reads only where allowed; confine_read_paths = ["` + path + `"] would allow it`
	}
	git := func(path string) string {
		return "the call was refused writing " + path + ": /w/.git (the repository's .git) is never written by a confined call"
	}
	for _, c := range []struct{ line, want string }{
		// The shell and coreutils.
		{"bash: /etc/profile.d/x.sh: Permission denied", outside("/etc/profile.d/x.sh", "/etc/profile.d")},
		{"sh: 1: cannot create /home/u/.bashrc: Permission denied", outside("/home/u/.bashrc", "/home/u")},
		{"touch: cannot touch '/opt/x': Permission denied", outside("/opt/x", "/opt")},
		{"mkdir: cannot create directory ‘/srv/data’: Permission denied", outside("/srv/data", "/srv")},
		{"cp: cannot create regular file '/usr/local/bin/tool': Permission denied", outside("/usr/local/bin/tool", "/usr/local/bin")},
		{"cat: /home/u/.ssh/id_ed25519: Permission denied", secret("/home/u/.ssh/id_ed25519", "/home/u/.ssh", "secret")},
		{"mv: cannot move 'a.txt' to '/tmp/a.txt': Permission denied", outside("/tmp/a.txt", "/tmp")},
		{"sed: couldn't open temporary file ./sedAbc123: Permission denied", "the call was refused creating or removing /w/sedAbc123: /w holds /w/.git, which a confined call never writes, so entries directly in /w cannot be created, removed or renamed (its subfolders can)"},
		// git.
		{"fatal: Unable to create '/w/.git/index.lock': Permission denied", git("/w/.git/index.lock")},
		{"error: could not lock config file .git/config: Permission denied", git("/w/.git/config")},
		{"fatal: cannot copy '/usr/share/git-core/templates/hooks/x' to '/w/.git/hooks/x': Permission denied", git("/w/.git/hooks/x")},
		// Node.
		{"Error: EACCES: permission denied, open '/home/u/.aws/credentials'", secret("/home/u/.aws/credentials", "/home/u/.aws", "secret")},
		{"[Error: EPERM: operation not permitted, mkdir '/var/lib/app'] { errno: -1 }", outside("/var/lib/app", "/var/lib")},
		{"Error: EACCES: permission denied, open '/home/u/.codex/auth.json'", secret("/home/u/.codex/auth.json", "/home/u/.codex/auth.json", KeyReadDeny)},
		// Python.
		{"PermissionError: [Errno 13] Permission denied: '/var/cache/pip/x'", outside("/var/cache/pip/x", "/var/cache/pip")},
		{"PermissionError: [Errno 1] Operation not permitted: 'out.txt'", "the call was refused creating or removing /w/out.txt: /w holds /w/.git, which a confined call never writes, so entries directly in /w cannot be created, removed or renamed (its subfolders can)"},
		// Go.
		{"open /root/go/pkg/mod/cache/lock: permission denied", outside("/root/go/pkg/mod/cache/lock", "/root/go/pkg/mod/cache")},
		{"go: writing stat cache: mkdir /home/u/go/pkg: permission denied", outside("/home/u/go/pkg", "/home/u/go")},
		{"dial tcp 10.1.2.3:443: connect: permission denied", "the call was refused a direct connection to 10.1.2.3:443: confined calls connect only through peal's proxy (HTTPS_PROXY); confine_network_allow names the hosts it may reach"},
		{"Error: connect EACCES 127.0.0.1:5432", "the call was refused a direct connection to 127.0.0.1:5432: confined calls connect only through peal's proxy (HTTPS_PROXY); confine_network_allow names the hosts it may reach"},
		{"bash: /dev/tcp/example.org/80: Permission denied", "the call was refused a direct connection to example.org:80: confined calls connect only through peal's proxy (HTTPS_PROXY); confine_network_allow names the hosts it may reach"},
		// peal's supervisor of connections and its seccomp filter.
		{"dial unix /run/user/1000/docker.sock: connect: permission denied", "the call was refused a connection to the UNIX socket /run/user/1000/docker.sock: a confined call connects only to the sockets it made; confine_unix_sockets = [\"/run/user/1000/docker.sock\"] would allow it"},
		{"Error: connect EACCES /tmp/ssh-x/agent.1", "the call was refused a connection to the UNIX socket /tmp/ssh-x/agent.1: a confined call connects only to the sockets it made; confine_unix_sockets = [\"/tmp/ssh-x/agent.1\"] would allow it"},
		{"lookup example.org on 10.0.0.1:53: dial udp 10.0.0.1:53: socket: permission denied", "the call was refused a direct connection to 10.0.0.1:53 (UDP): confined calls have no UDP or raw sockets; a host name goes to peal's proxy (HTTPS_PROXY), which looks it up"},
		// Peal's state folder; its temporary folder is the call's own.
		{"open /w/.peal/state.json: permission denied", "the call was refused writing /w/.peal/state.json: /w/.peal (peal's state folder) is never written by a confined call"},
		// Not the confinement's: a path it may write, or no path at all.
		{"open /w/.peal/tmp/call-1/x: permission denied", ""},
		{"open /w/src/readonly.go: permission denied", ""},
		{"Permission denied (os error 13)", ""},
		{"all good: 3 tests passed", ""},
		{"/w/src/a.go: no such file or directory", ""},
		// The home folder, read by allow list: a read there is named with
		// confine_read_paths, a write with confine_write_paths; a grant
		// beneath it is the grant's.
		{"cat: /home/u/notes.txt: Permission denied", hidden("/home/u/notes.txt")},
		{"PermissionError: [Errno 13] Permission denied: '/home/u/.cache/pip/x'", hidden("/home/u/.cache/pip/x")},
		{"Error: EACCES: permission denied, open '/home/u/.config/tool/config.json'", hidden("/home/u/.config/tool/config.json")},
		{"sh: 1: cannot create /home/u/notes.txt: Permission denied", outside("/home/u/notes.txt", "/home/u")},
		{"open /home/u/go/bin/tool: permission denied", outside("/home/u/go/bin/tool", "/home/u/go/bin")},
	} {
		if got := Explain(p, "/w", []string{"noise before", c.line}, nil); got != c.want {
			t.Errorf("%s\n got %q\nwant %q", c.line, got, c.want)
		}
	}
}

func TestExplainOrder(t *testing.T) {
	p := explainAccess()
	lines := []string{"open /opt/first: permission denied", "something else", "open /opt/last: permission denied", "exit 1"}
	if got := Explain(p, "/w", lines, nil); !strings.Contains(got, "/opt/last:") {
		t.Errorf("the last denial does not win: %q", got)
	}
	// A refusal the output does not speak of (telemetry) does not hide
	// the path that failed the call, nor explain anything by itself; one
	// it names wins.
	refused := []Refusal{{Call: "c", Host: "api.example.com:443", Method: "CONNECT"}, {Call: "c", Host: "telemetry.example.net:443", Method: "CONNECT"}}
	if got := Explain(p, "/w", lines, refused); !strings.Contains(got, "/opt/last:") {
		t.Errorf("an unrelated refusal wins over the denial: %q", got)
	}
	named := append(slices.Clone(lines), "Error: request to https://api.example.com/v1 failed: 403 Forbidden")
	if got := Explain(p, "/w", named, refused); got != RefusalLine("api.example.com:443") {
		t.Errorf("the refusal the output names does not win: %q", got)
	}
	if got := Explain(p, "/w", []string{"exit 1"}, refused); got != "" {
		t.Errorf("a refusal the output does not name explains the failure: %q", got)
	}
	if got := LastRefusal(refused); got != RefusalLine("telemetry.example.net:443") {
		t.Errorf("LastRefusal = %q", got)
	}
	if !RefusedConnection(LastRefusal(refused)) || !RefusedConnection(explainLine(p, "/w", "dial tcp 10.1.2.3:443: connect: permission denied")) ||
		RefusedConnection(Explain(p, "/w", lines, nil)) {
		t.Error("RefusedConnection does not tell a refused connection from a path")
	}
	if got := LastRefusal(nil); got != "" {
		t.Errorf("LastRefusal(nil) = %q", got)
	}
	// Without TCP rules a refused connection is not the confinement's.
	p.TCP = nil
	if got := Explain(p, "/w", []string{"dial tcp 1.2.3.4:443: connect: permission denied"}, nil); got != "" {
		t.Errorf("without TCP rules: %q", got)
	}
}

func FuzzExplain(f *testing.F) {
	for _, s := range []string{
		"fatal: Unable to create '/w/.git/index.lock': Permission denied",
		"Error: EACCES: permission denied, open '/home/u/.aws/credentials'",
		"dial tcp 127.0.0.1:9: connect: permission denied",
		"sed: couldn't open temporary file ./sedAbc123: Permission denied",
		"mv: cannot move '' to '/': Operation not permitted",
		"bash: /dev/tcp//: Permission denied",
		"‘’ ' \" ` EPERM",
	} {
		f.Add(s, "/w")
	}
	p := explainAccess()
	f.Fuzz(func(t *testing.T, line, dir string) {
		got := Explain(p, dir, []string{line}, nil)
		if got == "" {
			return
		}
		if strings.ContainsAny(got, "\n\r") && !strings.ContainsAny(line+dir, "\n\r") {
			t.Errorf("more than one line: %q", got)
		}
		if !strings.HasPrefix(got, "the call was refused ") {
			t.Errorf("not a refusal: %q", got)
		}
		if !deniedRe.MatchString(line) {
			t.Errorf("explained a line without a denial: %q -> %q", line, got)
		}
	})
}
