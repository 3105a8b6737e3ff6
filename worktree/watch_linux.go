package worktree

import (
	"bytes"
	"errors"
	"io/fs"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// changeWatch tells whether anything was made, changed, moved or removed
// in a tree since it was last asked, through the kernel's inotify: a watch
// on each of its folders (links are not followed: a linked folder is not
// the tree's), and on each folder made in it since. The events a process
// caused are queued when it makes its system calls, so once it has exited
// Changed sees them all, without waiting. Where a watch cannot be made (the
// user's limit of watches), it answers that the tree may have changed.
type changeWatch struct {
	fd     int
	broken bool // a watch is missing, or the queue overflowed: always "changed"
	dirs   map[int32]string
}

// watchEvents are the events that tell a change.
const watchEvents = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_ATTRIB | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_DONT_FOLLOW | unix.IN_ONLYDIR

// watchTree watches the folders of root but .git; nil when inotify cannot
// be used at all.
func watchTree(root string) *changeWatch {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	w := &changeWatch{fd: fd, dirs: map[int32]string{}}
	w.add(root)
	return w
}

// add watches dir and the folders beneath it.
func (w *changeWatch) add(dir string) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			if !errors.Is(err, fs.ErrNotExist) {
				w.broken = true
			}
			return nil
		case !d.IsDir():
			return nil
		case d.Name() == ".git" && p != dir:
			return filepath.SkipDir
		}
		wd, err := unix.InotifyAddWatch(w.fd, p, watchEvents)
		if err != nil {
			if !errors.Is(err, unix.ENOENT) {
				w.broken = true
				return filepath.SkipAll
			}
			return nil
		}
		w.dirs[int32(wd)] = p
		return nil
	})
}

// Changed reports whether anything changed since it was last asked (or
// since the watch began), and starts over.
func (w *changeWatch) Changed() bool {
	if w == nil {
		return true
	}
	changed := w.broken
	var buf [16 << 10]byte
	for {
		n, err := unix.Read(w.fd, buf[:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			break
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := ""
			if ev.Len > 0 {
				b := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
				if i := bytes.IndexByte(b, 0); i >= 0 {
					b = b[:i]
				}
				name = string(b)
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
			switch {
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				changed, w.broken = true, true
			case ev.Mask&unix.IN_IGNORED != 0:
				delete(w.dirs, ev.Wd)
			default:
				changed = true
				if dir, ok := w.dirs[ev.Wd]; ok && ev.Mask&unix.IN_ISDIR != 0 && ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 && name != ".git" {
					w.add(filepath.Join(dir, name))
				}
			}
		}
	}
	return changed
}

// Close ends the watch.
func (w *changeWatch) Close() {
	if w != nil {
		unix.Close(w.fd)
	}
}
