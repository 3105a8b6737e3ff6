package confine

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// benchAccess is an agent call's access with a scratch home shaped like a
// developer's (100 entries, a .config of 30, the secrets), so that it is
// narrowed as a real one would be.
func benchAccess(b *testing.B) (Access, string) {
	root := b.TempDir()
	home, tree := filepath.Join(root, "home"), filepath.Join(root, "tree")
	for i := range 100 {
		os.MkdirAll(filepath.Join(home, fmt.Sprintf(".tool%d", i)), 0o755)
	}
	for i := range 30 {
		os.MkdirAll(filepath.Join(home, ".config", fmt.Sprintf("app%d", i)), 0o755)
	}
	for _, s := range []string{".ssh", ".aws", ".config/gh", ".kube", ".docker"} {
		os.MkdirAll(filepath.Join(home, s), 0o700)
	}
	os.MkdirAll(filepath.Join(tree, ".git", "hooks"), 0o755)
	for i := range 20 {
		os.WriteFile(filepath.Join(tree, fmt.Sprintf("file%d", i)), nil, 0o644)
	}
	p := Base(home)
	p.Write = append(p.Write, Paths("work tree", tree)...)
	p.Protect = append(p.Protect, Paths(KeyGit, filepath.Join(tree, ".git"))...)
	p.TCP = &TCP{Connect: []uint16{8080}}
	return p, tree
}

// BenchmarkExpand is the expansion of a call's access into rules.
func BenchmarkExpand(b *testing.B) {
	p, _ := benchAccess(b)
	var n int
	for b.Loop() {
		plan, err := Expand(p, OS)
		if err != nil {
			b.Fatal(err)
		}
		n = len(plan.Rules)
	}
	b.ReportMetric(float64(n), "rules")
}

// BenchmarkPrepare is what peal does before a confined call starts: the
// expansion, the Landlock ruleset, the status pipe.
func BenchmarkPrepare(b *testing.B) {
	if !Probe().Files {
		b.Skip("no Landlock")
	}
	p, tree := benchAccess(b)
	call := &Call{Mode: On, Access: p}
	for b.Loop() {
		cmd := exec.Command("/bin/true")
		cmd.Dir = tree
		l, err := call.Prepare(cmd, "b", "")
		if err != nil {
			b.Fatal(err)
		}
		l.Close()
	}
}

// BenchmarkStart compares starting /bin/true and waiting for it, plain
// and confined (the launcher sets up the call's namespaces, applies the
// rules and the filter, runs the program and reaps it): as this machine
// confines by default, with a network namespace for the call too, without
// namespaces (as where the system refuses them), and with the run's proxy,
// then a model endpoint too (as an agent call whose key peal holds).
func BenchmarkStart(b *testing.B) {
	sup := Probe()
	if !sup.Files {
		b.Skip("no Landlock")
	}
	p, tree := benchAccess(b)
	calls := []struct {
		name string
		call *Call
	}{{"plain", nil}, {"confined", &Call{Mode: On, Access: p}}}
	if sup.NetNamespace {
		s := sup.WithoutNetNamespace()
		calls = append(calls, struct {
			name string
			call *Call
		}{"confined-no-netns", &Call{Mode: On, Access: p, Support: &s}})
	}
	if sup.PIDNamespace {
		s := sup
		s.PIDNamespace, s.IPCNamespace, s.UTSNamespace, s.NetNamespace, s.UserNamespace = false, false, false, false, false
		calls = append(calls, struct {
			name string
			call *Call
		}{"confined-no-namespaces", &Call{Mode: Auto, Access: p, Support: &s}})
	}
	// With the run's proxy (an endpoint per call), and with a model
	// endpoint too, holding a key (never used here): what the model
	// endpoint adds to a call's start and end.
	proxy := NewProxy(nil)
	up, _ := url.Parse("https://api.example.com")
	routes, _ := ParseRoutes("POST /v1/messages")
	keys := func() *KeyHold {
		return &KeyHold{Count: &KeyCount{}, APIs: []HeldAPI{{Name: "anthropic", Upstream: up, Keys: map[string]string{"ANTHROPIC_API_KEY": "sk"},
			Places: []KeyPlace{{Header: "X-Api-Key"}}, Routes: routes}},
			Point: func(base, _ map[string]string) ([]string, []string) {
				return []string{"ANTHROPIC_BASE_URL=" + base["anthropic"]}, nil
			}}
	}
	calls = append(calls, struct {
		name string
		call *Call
	}{"confined-proxy", &Call{Mode: On, Access: p, Proxy: proxy}}, struct {
		name string
		call *Call
	}{"confined-proxy-keys", &Call{Mode: On, Access: p, Proxy: proxy}})
	for _, c := range calls {
		b.Run(c.name, func(b *testing.B) {
			before := cpuOfAll()
			var launchers sync.WaitGroup
			for b.Loop() {
				cmd := exec.Command("/bin/true")
				cmd.Dir = tree
				cmd.Env = []string{"PATH=/usr/bin:/bin"}
				var l *Launch
				if c.call != nil {
					var err error
					call := c.call
					if c.name == "confined-proxy-keys" {
						held := *call
						held.Keys = keys() // a hold per call, as policy gives it
						call = &held
					}
					if l, err = call.Prepare(cmd, "b", ""); err != nil {
						b.Fatal(err)
					}
				}
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				if l.Launched() {
					// As phase does: the call ends with its program; its
					// launcher, left with nothing, ends by itself and is
					// reaped meanwhile.
					if err := l.Wait(); err != nil {
						b.Fatal(err)
					}
					<-l.Done()
					if code, ok := l.ExitCode(); !ok || code != 0 {
						b.Fatalf("exit %d %v", code, ok)
					}
					l.Close()
					launchers.Go(func() { cmd.Wait() })
					continue
				}
				if err := cmd.Wait(); err != nil {
					b.Fatal(err)
				}
			}
			launchers.Wait()
			b.ReportMetric(float64((cpuOfAll()-before).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

// BenchmarkConnect is what a connection of a confined call costs: the
// helper connects 200 times to a loopback server, unconfined and confined
// (each connect handed to peal, which takes the socket and connects it
// itself), and in a network namespace of the call's (through the
// launcher's listener and peal's bridge). The metric is per connection; the start of
// the helper is in it, spread over the 200.
func BenchmarkConnect(b *testing.B) {
	sup := Probe()
	if !sup.Supervise {
		b.Skip("peal does not decide connections here: " + sup.String())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	p, tree := benchAccess(b)
	p.TCP.Connect = append(p.TCP.Connect, port)
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	const n = 200
	calls := []struct {
		name string
		call *Call
	}{{"plain", &Call{Mode: Off}}, {"confined", &Call{Mode: On, Access: p, EnvPass: []string{helperEnv}}}}
	if sup.NetNamespace {
		s := sup.WithoutNetNamespace()
		calls = append(calls, struct {
			name string
			call *Call
		}{"confined-no-netns", &Call{Mode: On, Access: p, EnvPass: []string{helperEnv}, Support: &s}})
	}
	for _, c := range calls {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				cmd := exec.Command(exe, "dialn", fmt.Sprintf("%s,%d", ln.Addr(), n))
				cmd.Dir = tree
				cmd.Env = []string{"PATH=/usr/bin:/bin", helperEnv + "=1"}
				l, err := c.call.Prepare(cmd, "b", "")
				if err != nil {
					b.Fatal(err)
				}
				var out strings.Builder
				cmd.Stdout = &out
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				if err := l.Wait(); err != nil {
					b.Fatal(err)
				}
				if err := cmd.Wait(); err != nil || out.String() != "ok\n" {
					b.Fatalf("%v: %s", err, out.String())
				}
				l.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/connect")
		})
	}
}

// cpuOfAll is the processor time of this process and of the children it
// has waited for (theirs included): the whole of a start, but for what
// the kernel does in its own threads.
func cpuOfAll() time.Duration {
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	return time.Duration(self.Utime.Nano() + self.Stime.Nano() + children.Utime.Nano() + children.Stime.Nano())
}
