package safefs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Dir is an open folder. Every name given to its methods is one entry of the
// folder: a link there is refused rather than followed (NotRegularError with
// Kind "a symbolic link"), and os.Root keeps even a link swapped in at the
// last moment from reaching outside the folder.
type Dir struct {
	root *os.Root
	path string
}

// ErrLocked is wrapped by Lock when another holder has the lock.
var ErrLocked = errors.New("locked by another holder")

// OpenDir opens the folder at path, creating it and its parents when create
// is set. Links in path itself are followed: it is the caller's choice of
// folder.
func OpenDir(path string, create bool) (*Dir, error) {
	if create {
		if err := os.MkdirAll(path, 0o777); err != nil {
			return nil, err
		}
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, &NotRegularError{Path: path, Kind: kind(info.Mode()), Want: "a folder"}
	}
	root, err := os.OpenRoot(path)
	if err != nil {
		return nil, err
	}
	return &Dir{root: root, path: path}, nil
}

// Path is the folder's path as given to OpenDir (or joined by Sub).
func (d *Dir) Path() string { return d.path }

// Join is the path of name inside the folder.
func (d *Dir) Join(name string) string { return filepath.Join(d.path, name) }

// Close closes the folder.
func (d *Dir) Close() error { return d.root.Close() }

// named rewrites an error of os.Root, which names the entry only, so that it
// names the whole path.
func (d *Dir) named(err error, name string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: pe.Op, Path: d.Join(name), Err: pe.Err}
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return &fs.PathError{Op: le.Op, Path: d.Join(name), Err: le.Err}
	}
	return err
}

// Lstat describes the entry name without following a link.
func (d *Dir) Lstat(name string) (fs.FileInfo, error) {
	info, err := d.root.Lstat(name)
	return info, d.named(err, name)
}

// Sub opens the folder name inside d, creating it when create is set. A link
// there is refused, even one to a folder.
func (d *Dir) Sub(name string, create bool) (*Dir, error) {
	if !create {
		return d.openSub(name)
	}
	sub, _, err := d.MakeSub(name)
	return sub, err
}

// MakeSub opens the folder name inside d, creating it if it is missing, and
// tells whether it was created by this call (and so holds nothing yet but
// what this process puts there). A link there is refused, as by Sub.
func (d *Dir) MakeSub(name string) (*Dir, bool, error) {
	created := true
	if err := d.root.Mkdir(name, 0o777); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return nil, false, d.named(err, name)
		}
		created = false
	}
	sub, err := d.openSub(name)
	return sub, created && err == nil, err
}

// openSub opens the existing folder name inside d, refusing a link.
func (d *Dir) openSub(name string) (*Dir, error) {
	info, err := d.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, &NotRegularError{Path: d.Join(name), Kind: kind(info.Mode()), Want: "a folder"}
	}
	sub, err := d.root.OpenRoot(name)
	if err != nil {
		return nil, d.named(err, name)
	}
	opened, err := sub.Stat(".")
	if err == nil && !os.SameFile(info, opened) {
		err = fmt.Errorf("%s: %w", d.Join(name), ErrChanged)
	}
	if err != nil {
		sub.Close()
		return nil, err
	}
	return &Dir{root: sub, path: d.Join(name)}, nil
}

// Symlink makes the entry name a symbolic link to target; it fails when
// name exists.
func (d *Dir) Symlink(target, name string) error {
	return d.named(d.root.Symlink(target, name), name)
}

// regular checks that the entry name is a regular file and returns it.
func (d *Dir) regular(name string) (fs.FileInfo, error) {
	info, err := d.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, &NotRegularError{Path: d.Join(name), Kind: kind(info.Mode())}
	}
	return info, nil
}

// ReadFile reads the regular file name, of at most limit bytes. A missing
// file gives an error wrapping fs.ErrNotExist.
func (d *Dir) ReadFile(name string, limit int64) ([]byte, error) {
	// A file replaced by a rename between the check and the open is read
	// again: another program's atomic save is not an attack.
	for try := 1; ; try++ {
		data, err := d.readFile(name, limit)
		if !errors.Is(err, ErrChanged) || try == 3 {
			return data, err
		}
	}
}

func (d *Dir) readFile(name string, limit int64) ([]byte, error) {
	f, info, err := d.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Open described the opened file itself: a regular one.
	return readChecked(f, d.Join(name), info, limit)
}

// Open opens the regular file name for reading and describes it. A link, a
// named pipe or a device there is refused, and the open never waits on one
// put there after the check; a file replaced between the check and the
// open gives an error wrapping ErrChanged.
func (d *Dir) Open(name string) (*os.File, fs.FileInfo, error) {
	info, err := d.regular(name)
	if err != nil {
		return nil, nil, err
	}
	f, err := d.root.OpenFile(name, os.O_RDONLY|nonblock, 0)
	if err != nil {
		return nil, nil, d.named(err, name)
	}
	opened, err := f.Stat()
	if err == nil && !os.SameFile(info, opened) {
		err = fmt.Errorf("%s: %w", d.Join(name), ErrChanged)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, opened, nil
}

// TempPrefix is how the temporary files of name start; a file of that form
// left behind was being written by a process that died.
func TempPrefix(name string) string { return "." + name + ".tmp-" }

// WriteFile replaces name with data atomically: a temporary file in the
// folder is written and fsynced, given the mode of the file it replaces (a
// new file gets 0666 less the umask), and renamed over name. The folder is
// not synced: call Sync once after the writes that must be durable together.
// Until then a crash leaves the old file or the new one, never a mix.
func (d *Dir) WriteFile(name string, data []byte) error {
	p, err := d.Prepare(name, data)
	if err != nil {
		return err
	}
	return p.Commit()
}

// Pending is a write prepared by Prepare: its data is on disk in a
// temporary file, and Commit puts it in place.
type Pending struct {
	d         *Dir
	name, tmp string
}

// Prepare does the slow half of WriteFile (writing and syncing the
// temporary file), so that a caller can check, just before Commit, that
// name has not changed meanwhile.
func (d *Dir) Prepare(name string, data []byte) (*Pending, error) {
	var keep fs.FileMode
	old, err := d.Lstat(name)
	haveOld := err == nil && old.Mode().IsRegular()
	if haveOld {
		keep = old.Mode().Perm()
	}
	f, tmp, err := d.createTemp(TempPrefix(name))
	if err != nil {
		return nil, Full(err, d.Path())
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			d.root.Remove(tmp)
		}
	}()
	// A full disk is said as such, naming the folder.
	if _, err := f.Write(data); err != nil {
		return nil, Full(d.named(err, tmp), d.Path())
	}
	if haveOld {
		if err := f.Chmod(keep); err != nil {
			return nil, d.named(err, tmp)
		}
	}
	if err := f.Sync(); err != nil {
		return nil, Full(d.named(err, tmp), d.Path())
	}
	if err := f.Close(); err != nil {
		return nil, Full(d.named(err, tmp), d.Path())
	}
	done = true
	return &Pending{d: d, name: name, tmp: tmp}, nil
}

// Commit renames the temporary file over the file.
func (p *Pending) Commit() error {
	if err := p.d.root.Rename(p.tmp, p.name); err != nil {
		p.Abort()
		return p.d.named(err, p.name)
	}
	return nil
}

// Abort removes the temporary file.
func (p *Pending) Abort() { p.d.root.Remove(p.tmp) }

// createTemp creates a new file whose name starts with prefix. O_EXCL never
// follows a link, so the file is always a new one in this folder.
func (d *Dir) createTemp(prefix string) (*os.File, string, error) {
	return d.createTempMode(prefix, 0o666)
}

// createTempMode is createTemp of a file made with mode perm (less the
// umask).
func (d *Dir) createTempMode(prefix string, perm fs.FileMode) (*os.File, string, error) {
	for range 100 {
		name := prefix + strconv.FormatUint(rand.Uint64(), 36)
		f, err := d.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|nonblock, perm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, "", d.named(err, name)
		}
		return f, name, nil
	}
	return nil, "", fmt.Errorf("%s: no free temporary file name", d.Join(prefix+"*"))
}

// openSelf opens the folder itself, to sync or list it.
func (d *Dir) openSelf() (*os.File, error) { return d.root.OpenFile(".", os.O_RDONLY|nonblock, 0) }

// Sync makes the renames and removals done in the folder durable.
func (d *Dir) Sync() error {
	f, err := d.openSelf()
	if err != nil {
		return d.named(err, ".")
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing folder %s: %w", d.path, err)
	}
	return nil
}

// WriteCheck names the probe of CheckWritable; RemoveTemps(WriteCheck)
// clears the probes of a process that died in between.
const WriteCheck = "peal-write-check"

// CheckWritable creates and removes a file in the folder, so that a folder
// peal cannot write to is found before any work depends on it.
func (d *Dir) CheckWritable() error {
	f, name, err := d.createTemp(TempPrefix(WriteCheck))
	if err != nil {
		return Full(err, d.path)
	}
	f.Close()
	if err := d.named(d.root.Remove(name), name); err != nil {
		return err
	}
	if DiskFull(d.path) {
		// An empty file still fits where nothing else will.
		return &FullError{Dir: d.path, Err: errors.New("less than 64 KiB left")}
	}
	return nil
}

// RemoveTemps removes the temporary files that writes of name left behind
// when their process died, and returns how many there were. Only a caller
// that holds the lock under which name is written may call it.
func (d *Dir) RemoveTemps(names ...string) (int, error) {
	f, err := d.openSelf()
	if err != nil {
		return 0, d.named(err, ".")
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return 0, fmt.Errorf("reading folder %s: %w", d.path, err)
	}
	n := 0
	for _, e := range entries {
		for _, name := range names {
			if strings.HasPrefix(e.Name(), TempPrefix(name)) && e.Type().IsRegular() {
				if err := d.root.Remove(e.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return n, d.named(err, e.Name())
				}
				n++
			}
		}
	}
	return n, nil
}

// Stamp is how a kept-aside or backed-up file's name tells when: UTC,
// to the second.
func Stamp(now time.Time) string { return now.UTC().Format("20060102T150405Z") }

// KeepUnreadable keeps an unreadable file aside as name.corrupt-<stamp>
// (see KeepAside): never overwritten, never lost.
func (d *Dir) KeepUnreadable(name string, now time.Time) (string, error) {
	return d.KeepAside(name, name+".corrupt-"+Stamp(now))
}

// KeepAside renames name to the first free name of aside, aside.1, aside.2…
// and returns its path: what was there is never overwritten. It does not
// sync the folder. Only a lock holder may call it, as two callers could
// otherwise pick the same free name.
func (d *Dir) KeepAside(name, aside string) (string, error) {
	target := aside
	for i := 1; ; i++ {
		_, err := d.root.Lstat(target)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return "", d.named(err, target)
		}
		target = aside + "." + strconv.Itoa(i)
	}
	if err := d.root.Rename(name, target); err != nil {
		return "", d.named(err, name)
	}
	return d.Join(target), nil
}

// Lock is an exclusive lock on a file, held until Close or the death of the
// process.
type Lock struct{ f *os.File }

// Close releases the lock. The file stays: removing it would let a later
// process lock a new file of the same name while an older one still holds
// the removed one.
func (l *Lock) Close() error {
	// Unlocking first matters: a child forked by another goroutine shares
	// the open file until it execs, and closing alone would leave the lock
	// held that long.
	uerr := unlock(l.f)
	if err := l.f.Close(); err != nil {
		return err
	}
	return uerr
}

// Lock takes an exclusive lock on the regular file name, creating it, without
// waiting: if another holder (another process, or another open of the same
// file in this one) has it, the error wraps ErrLocked.
func (d *Dir) Lock(name string) (*Lock, error) {
	// os.Root sets close-on-exec, so the children peal starts do not inherit
	// the lock and keep it alive after peal has gone.
	f, err := d.root.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL|nonblock, 0o666)
	if errors.Is(err, fs.ErrExist) {
		var info fs.FileInfo
		if info, err = d.regular(name); err != nil {
			return nil, err
		}
		if f, err = d.root.OpenFile(name, os.O_RDWR|nonblock, 0); err == nil {
			if opened, serr := f.Stat(); serr != nil || !os.SameFile(info, opened) {
				f.Close()
				return nil, fmt.Errorf("%s: %w", d.Join(name), ErrChanged)
			}
		}
	}
	if err != nil {
		return nil, d.named(err, name)
	}
	held, err := tryLock(f)
	if err == nil && held {
		return &Lock{f: f}, nil
	}
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", d.Join(name), err)
	}
	return nil, fmt.Errorf("%s: %w", d.Join(name), ErrLocked)
}

// Readlink is the target of the symbolic link name.
func (d *Dir) Readlink(name string) (string, error) {
	target, err := d.root.Readlink(name)
	return target, d.named(err, name)
}

// Remove removes the entry name (a folder only when it is empty).
func (d *Dir) Remove(name string) error { return d.named(d.root.Remove(name), name) }

// Put replaces the entry name, whatever it is, with a regular file of mode
// perm (less the umask) holding what r reads, or, when link is set, with a
// symbolic link to link: the new entry is made under a temporary name and
// renamed over name, so that name is the old entry or the new one, never a
// part of it; a full disk is said as such (FullError). It is not synced:
// it is for files a program writes as git checks them out (or git's own
// index), not for peal's own records.
func (d *Dir) Put(name string, r io.Reader, perm fs.FileMode, link string) error {
	var tmp string
	if link != "" {
		for range 100 {
			tmp = TempPrefix(name) + strconv.FormatUint(rand.Uint64(), 36)
			err := d.root.Symlink(link, tmp)
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			if err != nil {
				return d.named(err, tmp)
			}
			break
		}
	} else {
		f, name2, err := d.createTempMode(TempPrefix(name), perm)
		if err != nil {
			return Full(err, d.Path())
		}
		tmp = name2
		_, err = io.Copy(f, r)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			d.root.Remove(tmp)
			return Full(d.named(err, tmp), d.Path())
		}
	}
	if err := d.root.Rename(tmp, name); err != nil {
		d.root.Remove(tmp)
		return d.named(err, name)
	}
	return nil
}
