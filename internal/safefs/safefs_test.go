//go:build unix

package safefs

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"peal/internal/testkit/safefstest"
)

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := unix.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, text string, perm fs.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil { // whatever the umask
		t.Fatal(err)
	}
}

func notRegular(t *testing.T, err error, kind string) {
	t.Helper()
	var nr *NotRegularError
	if !errors.As(err, &nr) || nr.Kind != kind {
		t.Fatalf("error %v, want a NotRegularError for %s", err, kind)
	}
}

// TestReadFileRefusesSpecialFiles: a named pipe would block a plain read
// forever and /dev/zero would never end; both are refused at once.
func TestReadFileRefusesSpecialFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	mkfifo(t, fifo)
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(fifo, 1<<20)
	notRegular(t, err, "a named pipe (FIFO)")
	_, err = ReadFile(zero, 1<<20)
	notRegular(t, err, "a character device")
	_, err = ReadFile(dir, 1<<20)
	notRegular(t, err, "a folder")
	if !strings.Contains(err.Error(), dir+" is a folder, not a regular file") {
		t.Errorf("message %q", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing"), 10); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestReadFileFollowsLinksAndCaps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	write(t, file, "12345", 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(file, link)
	if data, err := ReadFile(link, 5); err != nil || string(data) != "12345" {
		t.Errorf("read through a link: %q, %v", data, err)
	}
	_, err := ReadFile(file, 4)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Limit != 4 || !strings.Contains(err.Error(), "larger than 4 bytes") {
		t.Errorf("over the cap: %v", err)
	}
}

func TestDirRefusesLinksAndSpecialFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	outside := t.TempDir()
	write(t, filepath.Join(outside, "secret"), "x", 0o644)
	d, err := OpenDir(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "link"))
	mkfifo(t, filepath.Join(dir, "fifo"))
	os.Symlink("/dev/zero", filepath.Join(dir, "zero"))
	_, err = d.ReadFile("link", 100)
	notRegular(t, err, "a symbolic link")
	_, err = d.ReadFile("fifo", 100)
	notRegular(t, err, "a named pipe (FIFO)")
	_, err = d.ReadFile("zero", 100)
	notRegular(t, err, "a symbolic link")

	// A linked folder is not entered, even to create it.
	os.Symlink(outside, filepath.Join(dir, "sub"))
	_, err = d.Sub("sub", true)
	notRegular(t, err, "a symbolic link")
	sub, err := d.Sub("real", true)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if sub.Path() != filepath.Join(dir, "real") {
		t.Errorf("sub path %s", sub.Path())
	}
	write(t, filepath.Join(dir, "file"), "", 0o644)
	_, err = d.Sub("file", false)
	if err == nil || err.Error() != filepath.Join(dir, "file")+" is a regular file, not a folder" {
		t.Errorf("a file as a folder: %v", err)
	}

	// Open gives the file and what it is, and refuses the rest as ReadFile does.
	write(t, filepath.Join(dir, "data"), "hello", 0o600)
	f, info, err := d.Open("data")
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(f)
	f.Close()
	if err != nil || string(data) != "hello" || info.Size() != 5 || info.Mode().Perm() != 0o600 {
		t.Errorf("open data: %q, %v, size %d mode %v", data, err, info.Size(), info.Mode())
	}
	for name, want := range map[string]string{"link": "a symbolic link", "fifo": "a named pipe (FIFO)", "zero": "a symbolic link"} {
		f, _, err := d.Open(name)
		if f != nil {
			f.Close()
		}
		notRegular(t, err, want)
	}
}

// umask reads the process's umask without changing it (Linux only).
func umask(t *testing.T) fs.FileMode {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc here to read the umask from: %v", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "Umask:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			if err != nil {
				t.Fatal(err)
			}
			return fs.FileMode(n)
		}
	}
	t.Skip("no Umask line in /proc/self/status")
	return 0
}

func TestWriteFileModes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, err := OpenDir(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// A new file obeys the umask.
	if err := d.WriteFile("new.json", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "linux" {
		info, _ := os.Stat(filepath.Join(dir, "new.json"))
		if want := 0o666 &^ umask(t); info.Mode().Perm() != want {
			t.Errorf("new file mode %v, want %v", info.Mode().Perm(), want)
		}
	}
	// A replaced file keeps its mode, a private one included.
	for _, perm := range []fs.FileMode{0o600, 0o640, 0o664} {
		write(t, filepath.Join(dir, "old.json"), "old", perm)
		if err := d.WriteFile("old.json", []byte("new")); err != nil {
			t.Fatal(err)
		}
		info, _ := os.Stat(filepath.Join(dir, "old.json"))
		if data, _ := os.ReadFile(filepath.Join(dir, "old.json")); string(data) != "new" || info.Mode().Perm() != perm {
			t.Errorf("replaced %v file: %q, mode %v", perm, data, info.Mode().Perm())
		}
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestWriteFileReplacesALink: a link at the name is replaced by the file;
// what it pointed to is not touched.
func TestWriteFileReplacesALink(t *testing.T) {
	t.Parallel()
	dir, outside := t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "target")
	write(t, target, "untouched", 0o644)
	os.Symlink(target, filepath.Join(dir, "state.json"))
	if err := WriteFile(filepath.Join(dir, "state.json"), []byte("mine")); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(target); string(data) != "untouched" {
		t.Errorf("the link's target was written: %q", data)
	}
	info, err := os.Lstat(filepath.Join(dir, "state.json"))
	if err != nil || !info.Mode().IsRegular() {
		t.Errorf("state.json is not a regular file: %v %v", info, err)
	}
}

func TestLock(t *testing.T) {
	t.Parallel()
	dir, outside := t.TempDir(), t.TempDir()
	d, err := OpenDir(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	l, err := d.Lock("x.lock")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Lock("x.lock"); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), filepath.Join(dir, "x.lock")) {
		t.Errorf("second lock: %v", err)
	}
	l.Close()
	l, err = d.Lock("x.lock") // the file exists now
	if err != nil {
		t.Fatal(err)
	}
	l.Close()

	// A linked lock file is refused and its target never created, whether
	// the link dangles or not.
	os.Symlink(filepath.Join(outside, "created"), filepath.Join(dir, "dangling.lock"))
	_, err = d.Lock("dangling.lock")
	notRegular(t, err, "a symbolic link")
	if _, err := os.Lstat(filepath.Join(outside, "created")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the link's target was created: %v", err)
	}
	write(t, filepath.Join(outside, "real"), "", 0o644)
	os.Symlink(filepath.Join(outside, "real"), filepath.Join(dir, "linked.lock"))
	_, err = d.Lock("linked.lock")
	notRegular(t, err, "a symbolic link")
}

// TestKeepAsideNeverOverwrites: three files kept aside under one name in
// the same second stay three files.
func TestKeepAsideNeverOverwrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, err := OpenDir(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var got []string
	for i := range 3 {
		write(t, filepath.Join(dir, "state.json"), strconv.Itoa(i), 0o644)
		aside, err := d.KeepAside("state.json", "state.json.corrupt-20260210T120000Z")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, filepath.Base(aside))
	}
	want := []string{"state.json.corrupt-20260210T120000Z", "state.json.corrupt-20260210T120000Z.1", "state.json.corrupt-20260210T120000Z.2"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("kept aside as %v, want %v", got, want)
	}
	for i, name := range want {
		if data, _ := os.ReadFile(filepath.Join(dir, name)); string(data) != strconv.Itoa(i) {
			t.Errorf("%s holds %q", name, data)
		}
	}
}

func TestRemoveTemps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{".state.json.tmp-abc", ".state.json.tmp-1", ".run_summary.json.tmp-x", ".other.tmp-1", "state.json", "retry-state.tmp"} {
		write(t, filepath.Join(dir, name), "", 0o644)
	}
	d, _ := OpenDir(dir, false)
	defer d.Close()
	n, err := d.RemoveTemps("state.json", "run_summary.json")
	if err != nil || n != 3 {
		t.Fatalf("removed %d, %v", n, err)
	}
	entries, _ := os.ReadDir(dir)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if strings.Join(left, " ") != ".other.tmp-1 retry-state.tmp state.json" {
		t.Errorf("left %v", left)
	}
}

func TestCheckWritable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, _ := OpenDir(dir, false)
	defer d.Close()
	if err := d.CheckWritable(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the check left %v", entries)
	}
	safefstest.ReadOnly(t, dir)
	if err := d.CheckWritable(); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("read-only folder: %v", err)
	}
}
