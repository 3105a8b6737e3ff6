package confine

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// The launcher is peal's own binary, started by the kernel in the call's
// place (/proc/self/exe) with LaunchEnv set: in init, before anything else
// of peal runs, it applies the Landlock ruleset that peal built and handed
// it as a file descriptor, then runs the call's program (execve) with the
// call's arguments and environment. peal builds the ruleset itself, so that
// a path that cannot be used fails the call in peal, with its key, and the
// launcher has only two system calls to make; only what fails in them
// comes back through the status pipe, which the program's start closes.

func init() {
	if v, ok := os.LookupEnv(LaunchEnv); ok {
		os.Exit(launcherMain(v))
	}
}

// launcherMain applies the ruleset named by v ("<ruleset fd>,<status
// fd>,<flags>,<program>") and runs the program; it returns only on failure.
func launcherMain(v string) int {
	f := strings.SplitN(v, ",", 4)
	if len(f) != 4 {
		fmt.Fprintf(os.Stderr, "peal: %s is set but malformed; peal sets it for its confined calls only\n", LaunchEnv)
		return 126
	}
	ruleset, err1 := strconv.Atoi(f[0])
	status, err2 := strconv.Atoi(f[1])
	flags, err3 := strconv.ParseUint(f[2], 10, 32)
	if err1 != nil || err2 != nil || err3 != nil {
		fmt.Fprintf(os.Stderr, "peal: %s is set but malformed; peal sets it for its confined calls only\n", LaunchEnv)
		return 126
	}
	program := f[3]
	fail := func(code int, format string, a ...any) int {
		unix.Write(status, []byte(fmt.Sprintf(format, a...)))
		return code
	}
	// The status pipe must close when the program starts.
	unix.CloseOnExec(status)
	// Landlock and no_new_privs apply to the calling thread; execve then
	// carries them into the program. The thread is never unlocked.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail(126, "confine: the launcher could not set no_new_privs: %v", err)
	}
	if err := ll.LandlockRestrictSelf(ruleset, uint32(flags)); err != nil {
		return fail(126, "confine: the kernel refused the Landlock rules: %v", err)
	}
	unix.Close(ruleset)
	// What is kept for want of CAP_SETPCAP, the start line names.
	if _, err := dropCaps(); err != nil {
		return fail(126, "confine: the launcher could not drop the capabilities a call never holds: %v", err)
	}
	env := os.Environ()
	kept := env[:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, LaunchEnv+"=") {
			kept = append(kept, kv)
		}
	}
	err := unix.Exec(program, os.Args, kept)
	return fail(127, "confine: cannot run %s: %v", program, err)
}

// Access rights of each kind of rule.
const (
	readFileRights  = ll.AccessFSExecute | ll.AccessFSReadFile
	readDirRights   = readFileRights | ll.AccessFSReadDir
	writeFileRights = readFileRights | ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev
)

// launcher makes cmd start as the launcher of its program under pol.
func (l *Launch) launcher(cmd *exec.Cmd, pol Policy, sup Support) error {
	plan, err := Expand(pol, OS)
	if err != nil {
		return err
	}
	cfg, rules := rulesOf(plan, pol.TCP, sup)
	fd, flags, err := cfg.BestEffort().NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("confine: cannot build the Landlock rules: %w", err)
	}
	if fd < 0 {
		return errNoRules
	}
	ruleset := os.NewFile(uintptr(fd), "landlock-ruleset")
	r, w, err := os.Pipe()
	if err != nil {
		ruleset.Close()
		return err
	}
	l.status, l.child = r, []*os.File{ruleset, w}
	first := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, ruleset, w)
	cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d,%d,%d,%s", LaunchEnv, first, first+1, flags, cmd.Path))
	cmd.Path = "/proc/self/exe"
	return nil
}

// rulesOf is the Landlock configuration and rules of a plan, at the
// kernel's ABI: every file-system right and IPC scope the kernel has,
// TCP when asked. Renames between folders need the "refer" right, which
// ABI 1 lacks; asking for it there would make the library enforce nothing,
// so it is asked for only from ABI 2.
func rulesOf(plan Plan, tcp *TCP, sup Support) (landlock.Config, []landlock.Rule) {
	cfg := landlock.Config{HandledAccessFS: landlock.V11.HandledAccessFS, Scoped: landlock.V11.Scoped}
	// No call makes a device node, even in its tree: one of the disk
	// would read what the rules keep out.
	writeDir := landlock.V11.HandledAccessFS &^ (ll.AccessFSMakeChar | ll.AccessFSMakeBlock)
	if sup.ABI < referABI {
		writeDir &^= ll.AccessFSRefer
		cfg.HandledAccessFS &^= ll.AccessFSRefer
	}
	var groups [4][]string // write dir, write file, read dir, read file
	for _, r := range plan.Rules {
		i := 0
		if !r.Write {
			i = 2
		}
		if !r.Dir {
			i++
		}
		groups[i] = append(groups[i], r.Path)
	}
	// An entry that vanished since the expansion listed it grants nothing
	// (it cannot be granted more than it had): another process may remove
	// files in a narrowed folder (/tmp) at any time.
	var rules []landlock.Rule
	for i, access := range []landlock.AccessFSSet{writeDir, writeFileRights, readDirRights, readFileRights} {
		if len(groups[i]) > 0 {
			rules = append(rules, landlock.PathAccess(access, groups[i]...).IgnoreIfMissing())
		}
	}
	if tcp != nil {
		cfg.HandledAccessNet = ll.AccessNetBindTCP | ll.AccessNetConnectTCP
		for _, p := range tcp.Connect {
			rules = append(rules, landlock.ConnectTCP(p))
		}
		for _, p := range tcp.Bind {
			rules = append(rules, landlock.BindTCP(p))
		}
	}
	return cfg, rules
}
