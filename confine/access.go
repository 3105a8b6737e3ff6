package confine

import (
	"fmt"
	"path/filepath"
	"strings"

	"peal/policy/secrets"
)

// Path is one path of an access and the setting or origin that put it there,
// so that an error or a denial can name it ("confine_write_paths", "work
// tree", "secret").
type Path struct {
	Path string
	Key  string
	// Data, in a Write grant, keeps the call to data beneath it: files,
	// folders and links, never a named pipe or a socket (nor a device,
	// which no grant makes). The ignored folders of the work tree a call
	// writes through links are granted so: nothing of its making there is
	// anything but data once it is over.
	Data bool
}

// Paths tags each path with key.
func Paths(key string, paths ...string) []Path {
	out := make([]Path, len(paths))
	for i, p := range paths {
		out[i] = Path{Path: p, Key: key}
	}
	return out
}

// Access is the kernel-enforced access of one call. Every path is a full
// path; a path is taken as the kernel takes it: symbolic links are followed
// and ".." goes to the parent of what the path names so far.
//
// Landlock only grants, so the rules are these:
//   - Write: folders and files the call may create, change, remove and
//     rename in (and read and run).
//   - Read: folders and files it may read and run.
//   - Deny: paths it may never read nor write (secrets). A grant that
//     encloses one is narrowed to the grant's other entries, down to the
//     denied path; a grant at or beneath one is an error. A denied path
//     that does not exist is kept out all the same.
//   - Hide: folders it reads and writes only where a grant at or beneath
//     them says so (the home folder, read by allow list; other users'
//     homes). A grant that encloses one is narrowed as for Deny; a grant
//     at or beneath one is honoured.
//   - Protect: paths it may never write even inside a Write folder (the
//     repository's .git/hooks, peal's state folder). A Write grant that
//     encloses one is narrowed the same way; it stays readable when a Read
//     grant covers it. A Write grant strictly beneath a protected path is
//     honoured (it is the narrower, deliberate one: the call's temporary
//     folder inside peal's state folder); one equal to it is an error.
//
// Narrowing a folder costs the rights on the folder itself: its existing
// entries keep theirs, but nothing can be created, removed or renamed
// directly in it, and it cannot be listed. A symbolic link is never
// granted: what it points at is granted or not on its own, so a link in a
// work tree that points at a secret opens nothing.
type Access struct {
	Write   []Path
	Read    []Path
	Deny    []Path
	Hide    []Path
	Protect []Path
	// TCP, when set, restricts TCP: the call may connect only to the
	// Connect ports and bind only the Bind ports (0 binds any free port).
	// Where the kernel has no TCP rules (before Linux 6.7) Landlock does
	// not enforce it; where peal decides the connections (Support.
	// Supervise), they go to 127.0.0.1 and ::1 on these ports only (and
	// to the loopback host:port entries of the call's Allow): another
	// address on an allowed port is refused. Without it (confine_tcp =
	// any), any loopback address and port; never another host.
	TCP *TCP
	// UnixSockets are the UNIX sockets (files, or folders holding them)
	// a call may connect to besides those in what it may write, where peal
	// decides the connections (confine_unix_sockets).
	UnixSockets []Path
}

// TCP is the TCP part of an access.
type TCP struct {
	Connect []uint16
	Bind    []uint16
}

// PathError is an access path that cannot be used, with the key that gave it.
type PathError struct {
	Key, Path string
	Reason    string
}

func (e *PathError) Error() string {
	return fmt.Sprintf("confine: %s: %q %s", e.Key, e.Path, e.Reason)
}

// Validate makes the cheap checks of every path: present, full, no NUL.
// It is done in peal, before the call, so that the error names the key.
func (p *Access) Validate() error {
	for _, list := range [][]Path{p.Write, p.Read, p.Deny, p.Hide, p.Protect, p.UnixSockets} {
		for _, e := range list {
			switch {
			case e.Path == "":
				return &PathError{Key: e.Key, Path: e.Path, Reason: "is empty"}
			case strings.IndexByte(e.Path, 0) >= 0:
				return &PathError{Key: e.Key, Path: e.Path, Reason: "holds a NUL byte"}
			case !filepath.IsAbs(e.Path):
				return &PathError{Key: e.Key, Path: e.Path, Reason: "is not a full path"}
			}
		}
	}
	if p.TCP != nil {
		for _, port := range p.TCP.Connect {
			if port == 0 {
				return fmt.Errorf("confine: TCP port 0 cannot be connected to")
			}
		}
	}
	return nil
}

// Clone copies p, so that a caller can add to a shared access.
func (p Access) Clone() Access {
	p.Write = append([]Path(nil), p.Write...)
	p.Read = append([]Path(nil), p.Read...)
	p.Deny = append([]Path(nil), p.Deny...)
	p.Hide = append([]Path(nil), p.Hide...)
	p.Protect = append([]Path(nil), p.Protect...)
	p.UnixSockets = append([]Path(nil), p.UnixSockets...)
	if p.TCP != nil {
		t := TCP{Connect: append([]uint16(nil), p.TCP.Connect...), Bind: append([]uint16(nil), p.TCP.Bind...)}
		p.TCP = &t
	}
	return p
}

// Key names of the grants this package adds itself.
const (
	KeySystem = "system"
	KeySecret = "secret"
	KeyTemp   = "temporary folder"
	// KeyUnixSockets names the setting of Access.UnixSockets.
	KeyUnixSockets = "confine_unix_sockets"
)

// Devices are the device files every program may write and control: the
// null, zero and random devices. The terminal devices are not among them
// (/dev/tty, /dev/ptmx, /dev/pts): a call runs in a session of its own,
// with no terminal, and may neither write to the user's terminals nor push
// input into them (TIOCSTI); a program that makes a pseudo-terminal for
// itself is refused one. /dev/shm is not one of them either: every process
// of the machine shares it, so a call that needs POSIX shared memory
// (Python's multiprocessing, a browser under test) is given it by the
// user.
var Devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}

// Base is what every confined call starts from: it reads and runs the
// whole file system but the secrets of home and of the system (package
// secrets, as they lie with no variable of the tools' set), and writes the
// devices. The caller adds its work tree, the CLI's folders, the build
// caches and the user's paths, and the paths to protect.
//
// What reading the whole file system includes: /proc. Landlock refuses a
// confined process the access to processes outside its rules: their memory
// (/proc/<pid>/mem) and their environment (/proc/<pid>/environ, where
// peal's tokens are), but the latter only to a process without
// CAP_SYS_ADMIN and CAP_PERFMON (measured on Linux 6.18): root's are
// dropped by the launcher (see droppedCaps). A /proc narrowed to some
// processes would not hold the call's own, which start after the rules
// are made (/proc/self).
func Base(home string) Access {
	p := Access{
		Read:  Paths(KeySystem, "/"),
		Write: Paths(KeySystem, Devices...),
		Deny:  Paths(KeySecret, secrets.System...),
	}
	p.Deny = append(p.Deny, Paths(KeySecret, secrets.In(home, nil)...)...)
	return p
}
