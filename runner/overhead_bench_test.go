package runner

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"peal/config"
	"peal/internal/procs"
	"peal/internal/testkit/testbin"
)

// BenchmarkPlan50TasksOverhead runs a 50-task plan whose agent is a no-op
// binary: 100 supervised calls per op, and per task the durable writes of a
// run (the ticket's retry-state.json when its attempt starts and ends, its
// close-summary.md, state.json). The baseline sub-benchmark is 100 bare
// execs of the same binary; the target is at most 2x the baseline on disk
// (Peal: 46x). The disk case runs in the process's temporary folder as it
// found it (testbin.DiskTemp: TMPDIR or /tmp, not the tests' memory folder),
// the tmpfs case in /dev/shm (or PEAL_BENCH_DIR), which tells the disk's
// share from peal's own. The run uses one processor for its Go code, as the
// peal binary does (procs.Limit).
func BenchmarkPlan50TasksOverhead(b *testing.B) {
	testbin.NoStet(b)
	bin, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no `true` binary on PATH")
	}
	b.Run("bare-exec-100", func(b *testing.B) {
		before := selfCPU()
		for b.Loop() {
			for range 100 {
				if err := exec.Command(bin).Run(); err != nil {
					b.Fatal(err)
				}
			}
		}
		reportSelfCPU(b, before)
	})
	// What any supervisor pays at the least: the standard library running
	// each call in its own process group, with the parent-death signal,
	// both output streams kept; the system calls of each task's durable
	// writes made bare, on tmpfs (floor-writes-50-tasks); and both together
	// (floor-50-tasks), the least a run of these 50 tasks can cost.
	b.Run("captured-exec-100", func(b *testing.B) {
		before := selfCPU()
		for b.Loop() {
			for range 100 {
				capturedExec(b, bin)
			}
		}
		reportSelfCPU(b, before)
	})
	floor := func(calls bool) func(b *testing.B) {
		return func(b *testing.B) {
			dir := testbin.BenchDir(b, testbin.BenchTmpfs())
			before := selfCPU()
			n := 0
			for b.Loop() {
				n++
				state := filepath.Join(dir, fmt.Sprintf("state-%d", n))
				if err := os.Mkdir(state, 0o755); err != nil {
					b.Fatal(err)
				}
				for i := range 50 {
					if calls {
						capturedExec(b, bin)
						capturedExec(b, bin)
					}
					if err := taskWritesFloor(state, i); err != nil {
						b.Fatal(err)
					}
				}
			}
			reportSelfCPU(b, before)
		}
	}
	b.Run("floor-writes-50-tasks", floor(false))
	b.Run("floor-50-tasks", floor(true))
	b.Run("peal-100-calls", func(b *testing.B) {
		testbin.BenchPlaces(b, func(b *testing.B, dir string) { benchPlan50(b, bin, dir) })
	})
}

// capturedExec runs bin as the standard library does it with both streams
// kept, in a process group of its own that dies with this process.
func capturedExec(b *testing.B, bin string) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		b.Fatal(err)
	}
}

// taskWritesFloor makes, as bare system calls, the writes one task of a
// run needs at the least: its ticket folder and lock, retry-state.json
// when the attempt starts, close-summary.md, retry-state.json when it ends
// and the folder synced, then state.json replaced and its folder synced;
// each file a temporary one written, synced and renamed over the old. No
// check against a concurrent writer, no encoding, no run record.
func taskWritesFloor(state string, task int) error {
	var body [512]byte
	replace := func(dir int, name string) error {
		tmp := "." + name + ".tmp"
		fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return err
		}
		_, err = unix.Write(fd, body[:])
		if err == nil {
			err = unix.Fsync(fd)
		}
		unix.Close(fd)
		if err != nil {
			return err
		}
		return unix.Renameat(dir, tmp, dir, name)
	}
	sd, err := unix.Open(state, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(sd)
	name := fmt.Sprintf("task-%d", task)
	if err := unix.Mkdirat(sd, name, 0o755); err != nil {
		return err
	}
	td, err := unix.Openat(sd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(td)
	lock, err := unix.Openat(td, "retry-state.lock", unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	defer unix.Close(lock)
	if err := unix.Flock(lock, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return err
	}
	for _, name := range []string{"retry-state.json", "close-summary.md", "retry-state.json"} {
		if err := replace(td, name); err != nil {
			return err
		}
	}
	if err := unix.Fsync(td); err != nil {
		return err
	}
	if err := unix.Flock(lock, unix.LOCK_UN); err != nil {
		return err
	}
	if err := replace(sd, "state.json"); err != nil {
		return err
	}
	return unix.Fsync(sd)
}

func benchPlan50(b *testing.B, bin, dir string) {
	// As the peal binary runs (procs.Limit in main); the bare execs keep the
	// default, under which they are faster.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	procs.Limit()
	repo := filepath.Join(dir, "repo")
	os.MkdirAll(filepath.Join(repo, ".git"), 0o755)
	var plan strings.Builder
	for i := 1; i <= 50; i++ {
		fmt.Fprintf(&plan, "## Task %d\nDo thing %d.\n", i, i)
	}
	planPath := filepath.Join(dir, "plan.md")
	os.WriteFile(planPath, []byte(plan.String()), 0o644)
	n := 0
	var cpu time.Duration
	defer func() { b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "self-cpu-ms/op") }()
	for b.Loop() {
		b.StopTimer()
		// A fresh state folder per run, and the disk's pending work flushed
		// first, so that no run pays for the previous one's files.
		n++
		stateDir := filepath.Join(dir, fmt.Sprintf("state-%d", n))
		syscall.Sync()
		cfg, err := config.Load(config.Inputs{Env: []string{"PEAL_PLAN_PATH=" + planOf(b, planPath, stateDir), "PEAL_REPO_PATH=" + repo,
			"PEAL_STATE_DIR=" + stateDir, "PEAL_AGENT_CMD=" + bin}})
		if err == nil {
			err = cfg.Validate()
		}
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		before := selfCPU()
		out, err := Run(context.Background(), cfg, slog.New(slog.DiscardHandler))
		cpu += selfCPU() - before
		if err != nil || len(out.Completed) != 50 {
			b.Fatal(err, out)
		}
	}
}

// selfCPU is the CPU time this process has used: on a busy machine it
// varies less than the wall time, and it is peal's own share (the
// children's time is not in it).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportSelfCPU(b *testing.B, before time.Duration) {
	b.ReportMetric(float64((selfCPU()-before).Microseconds())/1000/float64(b.N), "self-cpu-ms/op")
}
