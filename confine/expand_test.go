package confine

import (
	"errors"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// table is a file system made of a table: a path ending in "/" is a folder,
// "a -> b" is a link, anything else a file. Parents are implied.
type table map[string]node

type node struct {
	typ    fs.FileMode
	target string
}

func tree(entries ...string) table {
	t := table{"/": {typ: fs.ModeDir}}
	for _, e := range entries {
		var n node
		switch {
		case strings.Contains(e, " -> "):
			e, n.target, _ = strings.Cut(e, " -> ")
			n.typ = fs.ModeSymlink
		case strings.HasSuffix(e, "/"):
			e, n.typ = strings.TrimSuffix(e, "/"), fs.ModeDir
		}
		t[e] = n
		for d := filepath.Dir(e); d != "/"; d = filepath.Dir(d) {
			t[d] = node{typ: fs.ModeDir}
		}
	}
	return t
}

var errUnlistable = errors.New("unlistable")

func (t table) Lstat(name string) (fs.FileMode, error) {
	for d := filepath.Dir(name); d != "/"; d = filepath.Dir(d) {
		if n, ok := t[d]; ok && n.typ == 0 {
			return 0, errNotDir
		}
	}
	n, ok := t[name]
	if !ok {
		return 0, fs.ErrNotExist
	}
	return n.typ, nil
}

func (t table) Readlink(name string) (string, error) { return t[name].target, nil }

func (t table) ReadDir(name string) ([]Entry, error) {
	if strings.HasSuffix(name, "/locked") {
		return nil, errUnlistable
	}
	var out []Entry
	for p, n := range t {
		if p != "/" && filepath.Dir(p) == name {
			out = append(out, Entry{Name: filepath.Base(p), Type: n.typ})
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// rules spells rules compactly: "w /a/" is a writable folder, "r /a/f" a
// readable file.
func rules(rs []Rule) []string {
	out := []string{}
	for _, r := range rs {
		s := "r "
		if r.Write {
			s = "w "
		}
		s += r.Path
		if r.Dir && r.Path != "/" {
			s += "/"
		}
		out = append(out, s)
	}
	return out
}

func TestResolve(t *testing.T) {
	fsys := tree("/home/u/.ssh/id", "/home/u/keys -> .ssh", "/home/u/abs -> /etc", "/etc/passwd",
		"/w/up -> ../home/u", "/loop/a -> b", "/loop/b -> a", "/w/file")
	for _, c := range []struct {
		in, want string
		exists   bool
		dir      bool
	}{
		{"/home/u/.ssh", "/home/u/.ssh", true, true},
		{"/home/u/keys/id", "/home/u/.ssh/id", true, false},
		{"/home/u/keys/../abs", "/etc", true, true},                   // ".." after a link is the target's parent
		{"/home/u/keys/../keys", "/home/u/.ssh", true, true},          // the parent of .ssh is /home/u
		{"/w/up/.ssh/../keys/id", "/home/u/.ssh/id", true, false},     // links inside links
		{"/home/u/abs/passwd", "/etc/passwd", true, false},            // absolute target
		{"/home/u/missing/x/../y", "/home/u/missing/y", false, false}, // the missing rest is cleaned as written
		{"/w/file/x", "/w/file/x", false, false},                      // beneath a file: missing
		{"/w/../home/./u//.ssh/", "/home/u/.ssh", true, true},
		{"/", "/", true, true},
	} {
		got, typ, exists, err := resolve(fsys, c.in)
		if err != nil || got != c.want || exists != c.exists || (exists && typ.IsDir() != c.dir) {
			t.Errorf("resolve(%q) = %q, %v, %v, %v; want %q, %v, dir %v", c.in, got, typ, exists, err, c.want, c.exists, c.dir)
		}
	}
	if _, _, _, err := resolve(fsys, "/loop/a/x"); !errors.Is(err, errLinkLoop) {
		t.Errorf("a link loop: %v", err)
	}
}

func TestExpand(t *testing.T) {
	fsys := tree(
		"/usr/bin/env", "/etc/passwd",
		"/home/u/.ssh/id", "/home/u/.profile", "/home/u/.config/gh/hosts.yml", "/home/u/.config/go/env",
		"/home/u/notes -> .ssh", "/home/u/go/",
		"/work/repo/.git/hooks/", "/work/repo/.git/config", "/work/repo/.git/objects/",
		"/work/repo/README", "/work/repo/src/main.go", "/work/repo/.peal/tmp/call-1/", "/work/repo/.peal/state.json",
		"/work/repo/link-to-key -> /home/u/.ssh/id",
		"/cache -> /home/u/go", "/sneaky -> /home/u/.ssh",
		"/work/locked/a", "/work/locked/.secret",
	)
	home := func(p *Access) {
		p.Deny = append(p.Deny, Paths(KeySecret, "/home/u/.ssh", "/home/u/.aws", "/home/u/.config/gh")...)
	}
	for _, c := range []struct {
		name     string
		access   func(*Access)
		want     []string
		narrowed []string
		missing  []string
		err      string
	}{
		{name: "a folder with nothing kept out is one rule",
			access: func(p *Access) { p.Write = Paths("work tree", "/work/repo") },
			want:   []string{"w /work/repo/"}},
		{name: "secrets narrow the whole file system down to them; links (/cache, /sneaky, notes) are never granted",
			access:   func(p *Access) { p.Read = Paths(KeySystem, "/"); home(p) },
			want:     []string{"r /etc/", "r /home/u/.config/go/", "r /home/u/.profile", "r /home/u/go/", "r /usr/", "r /work/"},
			narrowed: []string{"/", "/home", "/home/u", "/home/u/.config"}},
		{name: "a missing secret narrows all the same",
			access: func(p *Access) {
				p.Read = Paths(KeySystem, "/work")
				p.Deny = Paths(KeySecret, "/work/repo/.aws/credentials")
			},
			want: []string{"r /work/locked/", "r /work/repo/.git/", "r /work/repo/.peal/", "r /work/repo/README",
				"r /work/repo/src/"},
			narrowed: []string{"/work", "/work/repo"}},
		{name: "a protected .git narrows the work tree, which stays readable",
			access: func(p *Access) {
				p.Read = Paths(KeySystem, "/work")
				p.Write = Paths("work tree", "/work/repo")
				p.Protect = Paths(KeyGit, "/work/repo/.git")
			},
			want:     []string{"r /work/", "w /work/repo/.peal/", "w /work/repo/README", "w /work/repo/src/"},
			narrowed: []string{"/work/repo"}},
		{name: "a write grant beneath a protected folder is honoured",
			access: func(p *Access) {
				p.Write = Paths("work tree", "/work/repo")
				p.Write = append(p.Write, Path{Path: "/work/repo/.peal/tmp/call-1", Key: KeyTemp})
				p.Protect = Paths(KeyGit, "/work/repo/.git")
				p.Protect = append(p.Protect, Path{Path: "/work/repo/.peal", Key: "peal's state folder"})
			},
			want:     []string{"w /work/repo/.peal/tmp/call-1/", "w /work/repo/README", "w /work/repo/src/"},
			narrowed: []string{"/work/repo"}},
		{name: "deny and protect together, down to a file",
			access: func(p *Access) {
				p.Write = Paths("work tree", "/work/repo")
				p.Protect = Paths(KeyGit, "/work/repo/.git/hooks", "/work/repo/.git/config")
				p.Deny = Paths(KeySecret, "/work/repo/.peal/state.json")
			},
			want:     []string{"w /work/repo/.git/objects/", "w /work/repo/.peal/tmp/", "w /work/repo/README", "w /work/repo/src/"},
			narrowed: []string{"/work/repo", "/work/repo/.git", "/work/repo/.peal"}},
		{name: "a grant through a link is the target's",
			access: func(p *Access) { p.Write = Paths(KeyWritePaths, "/cache"); home(p) },
			want:   []string{"w /home/u/go/"}},
		{name: "a file grant is a file rule; read and write of one path merge",
			access: func(p *Access) {
				p.Read = Paths(KeySystem, "/etc/passwd")
				p.Write = Paths(KeySystem, "/etc/passwd")
			},
			want: []string{"w /etc/passwd"}},
		{name: "a missing grant grants nothing",
			access:  func(p *Access) { p.Write = Paths(KeyWritePaths, "/home/u/.npm", "/work/repo") },
			want:    []string{"w /work/repo/"},
			missing: []string{"/home/u/.npm"}},
		{name: "an unlistable narrowed folder grants nothing beneath it",
			access: func(p *Access) {
				p.Read = Paths(KeySystem, "/work")
				p.Deny = Paths(KeySecret, "/work/locked/.secret")
			},
			want:     []string{"r /work/repo/"},
			narrowed: []string{"/work", "/work/locked"}},
		{name: "a hidden folder narrows the grants that enclose it; a grant beneath it is honoured",
			access: func(p *Access) {
				p.Read = Paths(KeySystem, "/")
				p.Read = append(p.Read, Paths("toolchains", "/home/u/go", "/home/u/.config")...)
				p.Hide = Paths("home", "/home/u")
				home(p)
			},
			want:     []string{"r /etc/", "r /home/u/.config/go/", "r /home/u/go/", "r /usr/", "r /work/"},
			narrowed: []string{"/", "/home", "/home/u/.config"}},
		{name: "a grant at a hidden folder is honoured whole, but its secrets",
			access: func(p *Access) {
				p.Read = Paths(KeyReadPaths, "/home/u")
				p.Hide = Paths("home", "/home/u")
				home(p)
			},
			want:     []string{"r /home/u/.config/go/", "r /home/u/.profile", "r /home/u/go/"},
			narrowed: []string{"/home/u", "/home/u/.config"}},
		{name: "writing a secret is an error",
			access: func(p *Access) { p.Write = Paths(KeyWritePaths, "/home/u/.ssh/sub"); home(p) },
			err:    `confine: confine_write_paths: "/home/u/.ssh/sub" lies in /home/u/.ssh, which is never readable (secret)`},
		{name: "reaching a secret through a link is an error",
			access: func(p *Access) { p.Read = Paths(KeyWritePaths, "/sneaky"); home(p) },
			err:    `confine: confine_write_paths: "/sneaky" lies in /home/u/.ssh, which is never readable (secret)`},
		{name: "reaching a secret through .. is an error",
			access: func(p *Access) { p.Read = Paths(KeyWritePaths, "/home/u/notes/../.ssh"); home(p) },
			err:    `confine: confine_write_paths: "/home/u/notes/../.ssh" lies in /home/u/.ssh, which is never readable (secret)`},
		{name: "writing a protected path is an error",
			access: func(p *Access) {
				p.Write = Paths(KeyWritePaths, "/work/repo/.git/")
				p.Protect = Paths(KeyGit, "/work/repo/.git")
			},
			err: `confine: confine_write_paths: "/work/repo/.git/" is never writable (the repository's .git)`},
		{name: "a relative path is an error",
			access: func(p *Access) { p.Write = Paths(KeyWritePaths, "cache") },
			err:    `confine: confine_write_paths: "cache" is not a full path`},
		{name: "an empty path is an error",
			access: func(p *Access) { p.Deny = Paths(KeyReadDeny, "") },
			err:    `confine: confine_read_deny: "" is empty`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var p Access
			c.access(&p)
			plan, err := Expand(p, fsys)
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("err = %v, want %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := rules(plan.Rules); !reflect.DeepEqual(got, c.want) {
				t.Errorf("rules\n got %q\nwant %q", got, c.want)
			}
			if !reflect.DeepEqual(plan.Narrowed, c.narrowed) {
				t.Errorf("narrowed = %q, want %q", plan.Narrowed, c.narrowed)
			}
			var missing []string
			for _, m := range plan.Missing {
				missing = append(missing, m.Path)
			}
			if !reflect.DeepEqual(missing, c.missing) {
				t.Errorf("missing = %q, want %q", missing, c.missing)
			}
		})
	}
}

// TestExpandKeepsOut checks the invariant on every path of the table: no
// rule covers a denied path, and no write rule covers a protected one.
func TestExpandKeepsOut(t *testing.T) {
	fsys := tree("/a/b/c/secret", "/a/b/c/ok", "/a/b/d/", "/a/x -> b/c", "/a/git/hooks/h", "/a/git/objects/o", "/z/",
		"/h/.npmrc", "/h/granted/tool")
	p := Access{
		Read:    Paths(KeySystem, "/", "/h/granted"),
		Write:   Paths("work tree", "/a"),
		Deny:    Paths(KeySecret, "/a/b/c/secret", "/z/none"),
		Hide:    Paths("home", "/h"),
		Protect: Paths(KeyGit, "/a/git/hooks"),
	}
	plan, err := Expand(p, fsys)
	if err != nil {
		t.Fatal(err)
	}
	for path := range fsys {
		for _, r := range plan.Rules {
			covers := path == r.Path || (r.Dir && beneath(path, r.Path))
			if !covers {
				continue
			}
			if within(path, "/a/b/c/secret") || within(path, "/z/none") {
				t.Errorf("%s is covered by %+v", path, r)
			}
			if r.Write && within(path, "/a/git/hooks") {
				t.Errorf("%s is writable through %+v", path, r)
			}
			if within(path, "/h") && !within(path, "/h/granted") {
				t.Errorf("%s, hidden, is covered by %+v", path, r)
			}
		}
	}
	// And what is not kept out is covered: /a/b/c/ok for writing, the
	// grant beneath the hidden folder for reading.
	ok, granted := false, false
	for _, r := range plan.Rules {
		ok = ok || (r.Write && r.Path == "/a/b/c/ok")
		granted = granted || r.Path == "/h/granted"
	}
	if !ok || !granted {
		t.Errorf("/a/b/c/ok is not writable, or /h/granted not readable: %q", rules(plan.Rules))
	}
}
