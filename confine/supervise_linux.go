package confine

import (
	"bufio"
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"peal/confine/launch"
)

// The supervisor of a call's connections. The seccomp filter hands every
// connect() of the call to peal (a user notification): the calling thread
// waits while peal
//
//  1. reads the address the call passed, once, from its memory;
//  2. takes the call's socket itself (pidfd_getfd: the same socket, in
//     peal's hands);
//  3. decides on its own copy of the address and on the socket's real
//     family and type;
//  4. connects that socket itself, and hands the result back as the
//     system call's.
//
// Nothing is left for the kernel to read again from the call's memory, as
// letting the system call go on would (the call's other threads could
// change the address meanwhile). A UNIX socket's path is opened by peal
// (O_PATH, relative to the calling thread's folder), the socket listening
// on that very file checked to be the call's own (or the file to be in
// confine_unix_sockets), and the socket connected through /proc/self/fd/N,
// so that a link swapped meanwhile cannot redirect it. TCP goes only to the
// allowed loopback addresses and ports.
//
// Without a network namespace of the call's own, every listen() of the
// call comes to peal the same way: a TCP socket listens only where it is
// bound to a loopback address (listen() on an unbound socket would pick a
// port on every address of the machine), and peal makes it listen itself.

// netRules are what a call may connect to.
type netRules struct {
	netns bool
	// anyPort: TCP to any loopback address and port (confine_tcp = any);
	// otherwise to 127.0.0.1 and ::1 on ports, and to pairs.
	anyPort bool
	ports   map[uint16]bool
	pairs   map[netip.AddrPort]bool
	// bridged are the ports the launcher listens on in the call's
	// network namespace, for peal to serve: the call's doors first (the
	// proxy's, the model endpoint's).
	bridged []uint16
	// The UNIX sockets besides the call's own: those beneath named
	// (confine_unix_sockets, made real once).
	pol      Access
	resolved sync.Once
	named    []string
}

// newNetRules are the rules of a call under pol and allow, whose doors
// (its proxy and model endpoints) listen on doors. A call connects
// directly to what its access's TCP ports open (on 127.0.0.1 and ::1, or
// at the loopback address an allow-list entry names with that port), or,
// without TCP rules (confine_tcp = any), to any loopback address and port;
// in its network namespace the launcher listens for peal on the doors'
// ports, on those ports and, without TCP rules, on the ports of the allow
// list's loopback entries.
func newNetRules(pol Access, allow Allow, netns bool, doors ...uint16) *netRules {
	r := &netRules{netns: netns, anyPort: pol.TCP == nil, ports: map[uint16]bool{}, pairs: map[netip.AddrPort]bool{}, pol: pol}
	add := func(p uint16) {
		if p != 0 && !slicesContains(r.bridged, p) {
			r.bridged = append(r.bridged, p)
		}
	}
	for _, p := range doors {
		add(p)
	}
	if pol.TCP != nil {
		for _, p := range pol.TCP.Connect {
			r.ports[p] = true
			add(p)
		}
	}
	for _, e := range allow.entries {
		n, err := strconv.ParseUint(e.port, 10, 16)
		if e.wildcard || err != nil || n == 0 || !r.anyPort && !r.ports[uint16(n)] {
			continue
		}
		if a, err := netip.ParseAddr(e.host); err == nil && a.Unmap().IsLoopback() {
			r.pairs[netip.AddrPortFrom(a.Unmap(), uint16(n))] = true
			add(uint16(n))
		} else if e.host == "localhost" {
			add(uint16(n))
		}
	}
	return r
}

func slicesContains(list []uint16, v uint16) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

var (
	loop4 = netip.MustParseAddr("127.0.0.1")
	loop6 = netip.MustParseAddr("::1")
)

// tcp tells whether a call may connect to a:port.
func (r *netRules) tcp(a netip.Addr, port uint16) bool {
	a = a.Unmap()
	if a.IsUnspecified() {
		// Linux takes 0.0.0.0 and :: to mean this machine.
		if a.Is4() {
			a = loop4
		} else {
			a = loop6
		}
	}
	if r.anyPort {
		return a.IsLoopback()
	}
	if (a == loop4 || a == loop6) && r.ports[port] {
		return true
	}
	return r.pairs[netip.AddrPortFrom(a, port)]
}

// namedSocket tells whether the UNIX socket whose real path is p is in
// confine_unix_sockets.
func (r *netRules) namedSocket(p string) bool {
	r.resolved.Do(r.resolve)
	for _, n := range r.named {
		if within(p, n) {
			return true
		}
	}
	return false
}

// resolve makes confine_unix_sockets real, once, at the first UNIX
// connection of the call.
func (r *netRules) resolve() {
	for _, e := range r.pol.UnixSockets {
		if p, err := filepath.EvalSymlinks(e.Path); err == nil {
			r.named = append(r.named, p)
		} else {
			r.named = append(r.named, filepath.Clean(e.Path))
		}
	}
}

// The kernel's structures of a user notification.
type seccompData struct {
	Nr   int32
	Arch uint32
	IP   uint64
	Args [6]uint64
}

type seccompNotif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Data  seccompData
}

type seccompResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// supervisor serves one call's listener.
type supervisor struct {
	f        *os.File
	rules    *netRules
	launcher int // the call's processes are below it
	// diag is a sock_diag socket of the call's network namespace (nil
	// without one), which lists only the call's own sockets.
	diag *sockDiag
}

// supervise serves the listener fd of a call (whose launcher is pid
// launcher) under rules, until the call's processes are gone or close;
// diag is the sock_diag socket of the call's network namespace (-1 without
// one), which it then owns.
func supervise(fd int, rules *netRules, launcher, diag int) *supervisor {
	unix.SetNonblock(fd, true)
	s := &supervisor{f: os.NewFile(uintptr(fd), "seccomp-listener"), rules: rules, launcher: launcher}
	if diag >= 0 {
		s.diag = &sockDiag{fd: diag}
	}
	go s.serve()
	return s
}

func (s *supervisor) close() {
	s.f.Close()
	if s.diag != nil {
		s.diag.close()
	}
}

func (s *supervisor) serve() {
	rc, err := s.f.SyscallConn()
	if err != nil {
		return
	}
	for {
		var n seccompNotif
		got, gone := false, false
		err := rc.Read(func(fd uintptr) bool {
			p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			if k, err := unix.Poll(p, 0); err != nil || k == 0 {
				return false
			}
			if p[0].Revents&unix.POLLIN == 0 {
				// Every process under the filter has exited.
				gone = true
				return true
			}
			n = seccompNotif{}
			// A notification withdrawn since (its thread was killed)
			// fails with ENOENT: there is nothing to answer.
			_, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&n)))
			got = errno == 0
			return true
		})
		if err != nil || gone {
			return
		}
		if got {
			go s.answer(n)
		}
	}
}

// answer decides one connect() or listen() and sends its result.
func (s *supervisor) answer(n seccompNotif) {
	resp := seccompResp{ID: n.ID}
	var errno unix.Errno
	switch {
	case n.Data.Arch != launch.NativeArch:
		errno = unix.ENOSYS
	case n.Data.Nr == unix.SYS_CONNECT:
		errno = s.connect(&n)
	case n.Data.Nr == unix.SYS_LISTEN:
		errno = s.listen(&n)
	default:
		errno = unix.ENOSYS
	}
	if errno != 0 {
		resp.Error = -int32(errno)
	}
	if rc, err := s.f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			unix.Syscall(unix.SYS_IOCTL, fd, unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
		})
	}
}

// valid tells whether the notification is still pending: its thread is
// alive and waiting, so the pid it names is still that thread's.
func (s *supervisor) valid(id uint64) bool {
	ok := false
	if rc, err := s.f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			_, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&id)))
			ok = errno == 0
		})
	}
	return ok
}

// maxSockaddr is the size of struct sockaddr_storage: the kernel takes no
// longer address.
const maxSockaddr = 128

// connect does the call's connect(): the errno it returns (0: connected).
func (s *supervisor) connect(n *seccompNotif) unix.Errno {
	tid := int(n.Pid)
	size := int(uint32(n.Data.Args[2]))
	if size > maxSockaddr || size < 0 {
		return unix.EINVAL
	}
	addr := make([]byte, size)
	if size > 0 {
		local := []unix.Iovec{{Base: &addr[0]}}
		local[0].SetLen(size)
		remote := []unix.RemoteIovec{{Base: uintptr(n.Data.Args[1]), Len: size}}
		got, err := unix.ProcessVMReadv(tid, local, remote, 0)
		if errors.Is(err, unix.EFAULT) || err == nil && got != size {
			return unix.EFAULT
		}
		if err != nil {
			return unix.EACCES
		}
	}
	sock, errno := s.take(n)
	if errno != 0 {
		return errno
	}
	defer unix.Close(sock)
	domain, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return errnoOf(err)
	}
	typ, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return errnoOf(err)
	}
	switch domain {
	case unix.AF_UNIX:
		return s.connectUnix(sock, addr, tid)
	case unix.AF_INET, unix.AF_INET6:
		return s.connectInet(sock, typ, addr)
	default:
		// A NETLINK_ROUTE socket (the filter makes no other): it talks to
		// the kernel of its network namespace.
		return connectRaw(sock, addr)
	}
}

// take is the socket the call named in its system call's first argument,
// in peal's hands (the same socket): the errno to answer when it cannot
// be had.
func (s *supervisor) take(n *seccompNotif) (int, unix.Errno) {
	pidfd, err := openPidfd(int(n.Pid))
	if err != nil || !s.valid(n.ID) {
		if err == nil {
			unix.Close(pidfd)
		}
		return -1, unix.EACCES
	}
	sock, err := unix.PidfdGetfd(pidfd, int(int32(n.Data.Args[0])), 0)
	unix.Close(pidfd)
	switch {
	case errors.Is(err, unix.EBADF):
		return -1, unix.EBADF
	case err != nil:
		return -1, unix.EACCES
	}
	return sock, 0
}

// listen does the call's listen() (without a network namespace of its
// own): a TCP socket listens only where it is bound to a loopback address,
// so that no port of the machine's other addresses opens to the outside;
// peal makes the socket listen itself (the call's other threads could
// meanwhile put another socket at the descriptor it named).
func (s *supervisor) listen(n *seccompNotif) unix.Errno {
	sock, errno := s.take(n)
	if errno != 0 {
		return errno
	}
	defer unix.Close(sock)
	domain, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return errnoOf(err)
	}
	if domain == unix.AF_INET || domain == unix.AF_INET6 {
		sa, err := unix.Getsockname(sock)
		if err != nil {
			return errnoOf(err)
		}
		var a netip.Addr
		port := 0
		switch sa := sa.(type) {
		case *unix.SockaddrInet4:
			a, port = netip.AddrFrom4(sa.Addr), sa.Port
		case *unix.SockaddrInet6:
			a, port = netip.AddrFrom16(sa.Addr), sa.Port
		}
		if port == 0 || !a.Unmap().IsLoopback() {
			return unix.EACCES
		}
	}
	return errnoOf0(unix.Listen(sock, int(int32(n.Data.Args[1]))))
}

// openPidfd is a pidfd of thread tid (Linux 6.9), or of its process.
func openPidfd(tid int) (int, error) {
	fd, err := unix.PidfdOpen(tid, unix.PIDFD_THREAD)
	if !errors.Is(err, unix.EINVAL) {
		return fd, err
	}
	fd, err = unix.PidfdOpen(tid, 0)
	if err == nil || errors.Is(err, unix.ESRCH) {
		return fd, err
	}
	// tid is not the leader of its thread group: the pidfd is its
	// process's.
	return processPidfd(tid)
}

// processPidfd is a pidfd of the process of thread tid.
func processPidfd(tid int) (int, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return -1, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Tgid:"); ok {
			tgid, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return -1, err
			}
			return unix.PidfdOpen(tgid, 0)
		}
	}
	return -1, unix.ESRCH
}

func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EACCES
}

// connectInet connects a TCP socket where the rules allow.
func (s *supervisor) connectInet(sock, typ int, addr []byte) unix.Errno {
	if typ != unix.SOCK_STREAM {
		return unix.EACCES
	}
	if len(addr) < 2 {
		return connectRaw(sock, addr)
	}
	var a netip.Addr
	var port uint16
	switch binary.NativeEndian.Uint16(addr) {
	case unix.AF_INET:
		if len(addr) < unix.SizeofSockaddrInet4 {
			return connectRaw(sock, addr)
		}
		port = binary.BigEndian.Uint16(addr[2:])
		a = netip.AddrFrom4([4]byte(addr[4:8]))
	case unix.AF_INET6:
		if len(addr) < 24 {
			return connectRaw(sock, addr)
		}
		port = binary.BigEndian.Uint16(addr[2:])
		a = netip.AddrFrom16([16]byte(addr[8:24]))
	default:
		// AF_UNSPEC undoes a connection; another family is the kernel's
		// to refuse.
		return connectRaw(sock, addr)
	}
	if !s.rules.tcp(a, port) {
		return unix.EACCES
	}
	return connectRaw(sock, addr)
}

// connectUnix connects a UNIX socket to a path whose listener is the
// call's own or that confine_unix_sockets names, or to an abstract name of
// the call's own.
func (s *supervisor) connectUnix(sock int, addr []byte, tid int) unix.Errno {
	if len(addr) <= 2 || binary.NativeEndian.Uint16(addr) != unix.AF_UNIX {
		return connectRaw(sock, addr)
	}
	path := addr[2:]
	if path[0] == 0 {
		// An abstract name: in the call's network namespace, only the
		// call's own; without one, only a name a process of the call
		// listens on.
		if !s.rules.netns && !s.ownsAbstract(path[1:]) {
			return unix.EACCES
		}
		return connectRaw(sock, addr)
	}
	if i := indexByte(path, 0); i >= 0 {
		path = path[:i]
	}
	p := string(path)
	if !filepath.IsAbs(p) {
		cwd, err := os.Readlink("/proc/" + strconv.Itoa(tid) + "/cwd")
		if err != nil || !filepath.IsAbs(cwd) {
			return unix.EACCES
		}
		p = filepath.Join(cwd, p)
	}
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return errnoOf(err)
	}
	defer unix.Close(fd)
	proc := "/proc/self/fd/" + strconv.Itoa(fd)
	real, err := os.Readlink(proc)
	if err != nil || !s.rules.namedSocket(real) && !s.ownsFile(fd) {
		return unix.EACCES
	}
	return errnoOf0(connectTo(sock, &unix.SockaddrUnix{Name: proc}))
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// ownsFile tells whether the socket file open at fd (O_PATH) is one a
// socket of the call listens on: one the call made (bound) and listens on
// still, in its own network namespace, or, without one, held by a process
// of the call. A socket of another program, even in a folder the call may
// write (a credential daemon's in a cache), is none.
func (s *supervisor) ownsFile(fd int) bool {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return false
	}
	diag := s.diag
	if diag == nil {
		d, err := openSockDiag()
		if err != nil {
			return false
		}
		defer d.close()
		diag = d
	}
	inodes, err := diag.listening(uint64(st.Dev), st.Ino)
	if err != nil || len(inodes) == 0 {
		return false
	}
	if s.diag != nil {
		return true // the namespace's sockets are the call's
	}
	want := map[string]bool{}
	for _, ino := range inodes {
		want["socket:["+strconv.FormatUint(uint64(ino), 10)+"]"] = true
	}
	return s.holds(want)
}

// holds tells whether a process of the call holds one of the sockets
// (their links in /proc: socket:[inode]).
func (s *supervisor) holds(sockets map[string]bool) bool {
	for _, pid := range launch.Descendants(s.launcher) {
		dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if link, err := os.Readlink(dir + e.Name()); err == nil && sockets[link] {
				return true
			}
		}
	}
	return false
}

// ownsAbstract tells whether a process of the call listens on the
// abstract UNIX name.
func (s *supervisor) ownsAbstract(name []byte) bool {
	want := "@" + strings.ReplaceAll(string(name), "\x00", "@")
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		return false
	}
	inodes := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// Num RefCount Protocol Flags Type St Inode Path; a listener has
		// __SO_ACCEPTCON (0x10000) in its flags.
		fields := strings.Fields(sc.Text())
		if len(fields) == 8 && fields[7] == want && fields[3] == "00010000" {
			inodes["socket:["+fields[6]+"]"] = true
		}
	}
	f.Close()
	return len(inodes) > 0 && s.holds(inodes)
}

// connectRaw connects sock to the address as the call wrote it (peal's
// copy).
func connectRaw(sock int, addr []byte) unix.Errno {
	var p unsafe.Pointer
	if len(addr) > 0 {
		p = unsafe.Pointer(&addr[0])
	}
	return retryConnect(sock, func() unix.Errno {
		_, _, errno := unix.Syscall(unix.SYS_CONNECT, uintptr(sock), uintptr(p), uintptr(len(addr)))
		return errno
	})
}

func connectTo(sock int, sa unix.Sockaddr) error {
	errno := retryConnect(sock, func() unix.Errno { return errnoOf0(unix.Connect(sock, sa)) })
	if errno == 0 {
		return nil
	}
	return errno
}

func errnoOf0(err error) unix.Errno {
	if err == nil {
		return 0
	}
	return errnoOf(err)
}

// retryConnect makes a connect whole across interruptions: one that a
// signal of peal's interrupted goes on in the kernel, and is waited for.
func retryConnect(sock int, connect func() unix.Errno) unix.Errno {
	errno := connect()
	for errno == unix.EINTR {
		errno = connect()
		switch errno {
		case unix.EISCONN:
			return 0
		case unix.EALREADY:
			return waitConnected(sock)
		}
	}
	return errno
}

// waitConnected waits for a connection under way on a blocking socket.
func waitConnected(sock int) unix.Errno {
	p := []unix.PollFd{{Fd: int32(sock), Events: unix.POLLOUT}}
	for {
		if _, err := unix.Poll(p, -1); !errors.Is(err, unix.EINTR) {
			break
		}
	}
	v, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil {
		return errnoOf(err)
	}
	return unix.Errno(v)
}
