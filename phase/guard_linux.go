package phase

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The guard is peal's own binary, started once per peal process (at its
// first call) to outlive it: when peal dies, even of SIGKILL, it kills what
// peal's calls started, at once, rather than leaving it to the next run's
// sweep. The agent itself dies by its parent-death signal; the guard takes
// care of what the agent started (a test run, a dev server, a daemon).
//
// It learns of peal's death from a pipe: peal holds the only write end, so
// the guard reads EOF when peal is gone, whatever killed it and whichever
// thread started the guard. What is under way it reads from memory the two
// share (a memfd): the number of calls between the start of their child
// and their end, and the group of each running call; peal keeps it up to
// date with atomic stores, without a system call. When peal dies with no
// call under way, nothing of it can be running and the guard exits at once;
// otherwise it SIGKILLs the groups of the calls under way, then every
// process whose call id names peal's pid, until none is left: that search
// covers a child whose group peal had not recorded yet, and what left its
// group.

// guardEnv, set only in the guard's environment, makes peal's binary act
// as the guard of the peal whose pid it names (see init).
const guardEnv = "PEAL_GUARD_OF"

// guardSlots is the size of the shared table, in int32 slots: slot 0
// counts the calls under way, the others hold their groups (0: free). More
// calls at once than slots is harmless: the search by call id finds them.
const guardSlots = 1024

// noteBytes is the size of the kill note (NoteKill) that follows the table
// in the shared memory: a sequence number (odd while peal writes the
// note), the device and inode of the file, the lengths of its path and of
// the bytes before and after the time, then those three.
const (
	noteBytes  = 4096
	noteHeader = 32
	sharedSize = guardSlots*4 + noteBytes
)

func init() {
	if pid := os.Getenv(guardEnv); pid != "" {
		os.Exit(guardMain(pid))
	}
}

// guardMain is the guard's whole life: it waits for EOF on standard input,
// then reads the shared table (fd 3) and stops what is left.
func guardMain(pealPID string) int {
	// Signals meant for peal's terminal or group are not for the guard: it
	// lives in a group of its own and ends on EOF alone.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE)
	table, note, err := mapShared(3, unix.PROT_READ)
	io.Copy(io.Discard, os.Stdin)
	died := time.Now()
	if err != nil {
		table = nil // no table: search as if calls were under way
	}
	groups := map[int]bool{}
	for i := 1; i < len(table); i++ {
		if g := atomic.LoadInt32(&table[i]); g > 0 {
			groups[int(g)] = true
		}
	}
	if table != nil && atomic.LoadInt32(&table[0]) <= 0 && len(groups) == 0 {
		return 0
	}
	killed := guardKill(pealPID, groups)
	if killed > 0 {
		fmt.Fprintf(os.Stderr, "peal: peal (pid %s) died while calls ran; its guard stopped %d process(es) they had started\n", pealPID, killed)
	}
	writeKillNote(note, died)
	return 0
}

// mapShared maps the memory peal shares with its guard (file descriptor
// fd): the table, and the kill note after it.
func mapShared(fd, prot int) ([]int32, []byte, error) {
	mem, err := unix.Mmap(fd, 0, sharedSize, prot, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&mem[0])), guardSlots), mem[guardSlots*4:], nil
}

// noteSeq is the sequence number at the start of the note.
func noteSeq(note []byte) *uint32 { return (*uint32)(unsafe.Pointer(&note[0])) }

// noteKill writes the kill note into the shared memory (see NoteKill); a
// note that does not fit, or whose file cannot be found, is none.
func noteKill(path, before, after string) {
	if path == "" && guard.table == nil {
		return
	}
	guard.once.Do(startGuard)
	if guard.note == nil {
		return
	}
	guard.mu.Lock()
	defer guard.mu.Unlock()
	putKillNote(guard.note, path, before, after)
}

// putKillNote writes the note of NoteKill into n, the shared memory's.
func putKillNote(n []byte, path, before, after string) {
	var st unix.Stat_t
	size := noteHeader + len(path) + len(before) + len(after)
	if path != "" && (size > noteBytes || len(path) > 0xffff || len(before) > 0xffff || len(after) > 0xffff || unix.Stat(path, &st) != nil) {
		path = ""
	}
	seq := noteSeq(n)
	atomic.AddUint32(seq, 1) // odd: a note half written is none
	clear(n[8:noteHeader])
	if path != "" {
		binary.NativeEndian.PutUint64(n[8:], uint64(st.Dev))
		binary.NativeEndian.PutUint64(n[16:], st.Ino)
		binary.NativeEndian.PutUint16(n[24:], uint16(len(path)))
		binary.NativeEndian.PutUint16(n[26:], uint16(len(before)))
		binary.NativeEndian.PutUint16(n[28:], uint16(len(after)))
		copy(n[noteHeader:], path+before+after)
	}
	atomic.AddUint32(seq, 1)
}

// writeKillNote is the guard's side: once peal died (at died) with calls
// under way, it appends the note's line to the file the note names, when
// that file is still the one peal named (same device and inode, whatever
// its name now) and no link.
func writeKillNote(note []byte, died time.Time) {
	if len(note) < noteHeader || atomic.LoadUint32(noteSeq(note))%2 != 0 {
		return
	}
	pathLen, beforeLen, afterLen := int(binary.NativeEndian.Uint16(note[24:])), int(binary.NativeEndian.Uint16(note[26:])), int(binary.NativeEndian.Uint16(note[28:]))
	if pathLen == 0 || noteHeader+pathLen+beforeLen+afterLen > len(note) {
		return
	}
	rest := note[noteHeader:]
	path, before, after := string(rest[:pathLen]), rest[pathLen:pathLen+beforeLen], rest[pathLen+beforeLen:pathLen+beforeLen+afterLen]
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG ||
		uint64(st.Dev) != binary.NativeEndian.Uint64(note[8:]) || st.Ino != binary.NativeEndian.Uint64(note[16:]) {
		return
	}
	line := append(append(append([]byte(nil), before...), died.UTC().Format(time.RFC3339Nano)...), after...)
	unix.Write(fd, line)
}

// guardKill SIGKILLs the groups, then every process whose call id was given
// by peal pid pealPID, again until a search finds none (a process may start
// another while it is being killed), and returns how many it found.
func guardKill(pealPID string, groups map[int]bool) int {
	for pgid := range groups {
		unix.Kill(-pgid, unix.SIGKILL)
	}
	prefix := []byte(CallIDEnv + "=")
	mid := "/" + pealPID + "/"
	ofPeal := func(kv []byte) bool {
		if !bytes.HasPrefix(kv, prefix) {
			return false
		}
		// <scope>/<pid>/<n>: the scope may hold slashes, the rest not.
		rest, seq, ok := cutLast(kv[len(prefix):])
		if !ok || !isDigits(seq) {
			return false
		}
		_, pid, ok := cutLast(rest)
		return ok && "/"+string(pid)+"/" == mid
	}
	return stopCarriers(ofPeal, 0)
}

// cutLast splits b at its last slash.
func cutLast(b []byte) (before, after []byte, ok bool) {
	i := bytes.LastIndexByte(b, '/')
	if i < 0 {
		return nil, nil, false
	}
	return b[:i], b[i+1:], true
}

func isDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// guard is peal's side: the write end of the pipe, which it never writes
// to, and the shared table; table is nil when there is no guard.
var guard struct {
	once  sync.Once
	pipe  *os.File
	table []int32
	note  []byte     // the kill note (NoteKill)
	mu    sync.Mutex // NoteKill's writers
}

// guardStarting records, starting the guard on first use, that a child is
// about to start. Without a guard (it could not start) nothing is
// recorded: the next run's sweep remains.
func guardStarting() {
	guard.once.Do(startGuard)
	if guard.table != nil {
		atomic.AddInt32(&guard.table[0], 1)
	}
}

// guardStarted records that the child now leads group pgid, or could not
// start (err not nil), and returns the slot that holds the group (0: none).
func guardStarted(pgid int, err error) int {
	t := guard.table
	if t == nil {
		return 0
	}
	if err != nil {
		atomic.AddInt32(&t[0], -1)
		return 0
	}
	for i := 1; i < len(t); i++ {
		if atomic.CompareAndSwapInt32(&t[i], 0, int32(pgid)) {
			return i
		}
	}
	return 0
}

// guardEnded records that the call whose group is in slot (0: none) is
// over: nothing of it is running any more.
func guardEnded(slot int) {
	t := guard.table
	if t == nil {
		return
	}
	if slot > 0 {
		atomic.StoreInt32(&t[slot], 0)
	}
	atomic.AddInt32(&t[0], -1)
}

// startGuard starts the guard: this very binary, in a group of its own (a
// Ctrl-C for peal is not for it), with the read end of the pipe as its
// standard input and the shared table as fd 3.
func startGuard() {
	fd, err := unix.MemfdCreate("peal-guard", unix.MFD_CLOEXEC)
	if err != nil {
		return
	}
	mem := os.NewFile(uintptr(fd), "peal-guard")
	defer mem.Close()
	if err := mem.Truncate(sharedSize); err != nil {
		return
	}
	table, note, err := mapShared(fd, unix.PROT_READ|unix.PROT_WRITE)
	if err != nil {
		return
	}
	r, w, err := os.Pipe()
	if err != nil {
		return
	}
	defer r.Close()
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = []string{guardEnv + "=" + strconv.Itoa(os.Getpid())}
	cmd.Stdin, cmd.Stderr = r, os.Stderr
	cmd.ExtraFiles = []*os.File{mem}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return
	}
	guard.pipe, guard.table, guard.note = w, table, note
	go cmd.Wait() // reaps it should it die before peal
}
