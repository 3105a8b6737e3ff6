package phase

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"peal/confine"
	"peal/internal/testkit/fakes"
)

// benchHome makes a scratch home shaped like a developer's: 100 entries,
// a .config of 30, and the secrets, so that the policy narrows it as it
// would a real one.
func benchHome(b *testing.B) string {
	home := filepath.Join(b.TempDir(), "home")
	for i := range 100 {
		if err := os.MkdirAll(filepath.Join(home, fmt.Sprintf(".tool%d", i)), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 30 {
		os.MkdirAll(filepath.Join(home, ".config", fmt.Sprintf("app%d", i)), 0o755)
	}
	for _, s := range []string{".ssh", ".aws", ".config/gh", ".kube"} {
		os.MkdirAll(filepath.Join(home, s), 0o700)
	}
	return home
}

// BenchmarkRunConfined100 is BenchmarkRun100 with every call confined:
// the policy expanded, the Landlock ruleset built, the launcher started
// in the call's place, and a proxy endpoint opened and closed. The
// difference per call is what confinement costs at the start (the target
// is at most 5 ms).
func BenchmarkRunConfined100(b *testing.B) {
	if s := confine.Probe(); !s.Files {
		b.Skip("this kernel enforces no Landlock rules: " + s.String())
	}
	bin := noop(b)
	home := benchHome(b)
	tree := b.TempDir()
	pol := confine.Base(home)
	pol.Write = append(pol.Write, confine.Paths("work tree", tree)...)
	pol.TCP = &confine.TCP{}
	spec := Spec{Phase: "execute", Argv: []string{bin}, Dir: tree, Timeout: time.Minute, IdleTimeout: time.Minute, KillGrace: 5 * time.Second,
		Confine: &confine.Call{Mode: confine.On, Access: pol, Proxy: confine.NewProxy(nil)}}
	before := cpuTime()
	for b.Loop() {
		for range 100 {
			res, err := Run(context.Background(), spec)
			if err != nil || res.ExitCode != 0 {
				b.Fatal(err, res.ExitCode, res.Stdout, res.Stderr)
			}
		}
	}
	reportCPU(b, before)
}

// BenchmarkTimeout1sConfined is BenchmarkTimeout1s beside the same call
// confined (the policy of BenchmarkRunConfined100, a proxy endpoint): the
// call must return right after its timeout either way (target 1.05 s per
// call).
func BenchmarkTimeout1sConfined(b *testing.B) {
	if s := confine.Probe(); !s.Files {
		b.Skip("this kernel enforces no Landlock rules: " + s.String())
	}
	home := benchHome(b)
	for _, mode := range []string{"off", "confined"} {
		b.Run(mode, func(b *testing.B) {
			dir := setup(b, fakes.Outcome{Hang: true})
			spec := agentSpec(dir, time.Second, 5*time.Second)
			if mode == "confined" {
				pol := confine.Base(home)
				pol.Write = append(pol.Write, confine.Paths("work tree", dir)...)
				pol.TCP = &confine.TCP{}
				spec.Confine = &confine.Call{Mode: confine.On, Access: pol, Proxy: confine.NewProxy(nil), EnvPass: []string{"FAKE_*"}}
			}
			for b.Loop() {
				res, err := Run(context.Background(), spec)
				if err != nil || !res.TimedOut {
					b.Fatal(err, res.TimedOut, res.Stderr)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/call")
		})
	}
}
