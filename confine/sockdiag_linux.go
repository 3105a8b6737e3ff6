package confine

import (
	"encoding/binary"
	"errors"
	"sync"

	"golang.org/x/sys/unix"
)

// sockDiag asks the kernel, through a NETLINK_SOCK_DIAG socket, which UNIX
// sockets of the socket's network namespace listen on a file: what tells
// the socket file a call made from another program's. The sockets it lists
// are those of the namespace it was opened in (the call's own, when the
// call's launcher opened it there).
type sockDiag struct {
	mu  sync.Mutex
	fd  int
	seq uint32
}

// openSockDiag is a sock_diag socket of peal's own network namespace.
func openSockDiag() (*sockDiag, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, err
	}
	return &sockDiag{fd: fd}, nil
}

func (d *sockDiag) close() { unix.Close(d.fd) }

// The kernel's structures and constants of a UNIX sock_diag request and
// its answers (linux/unix_diag.h, linux/sock_diag.h).
const (
	sockDiagByFamily = 20
	udiagShowVFS     = 0x2
	unixDiagVFS      = 1
	tcpListen        = 10
	sizeofUnixReq    = 24 // struct unix_diag_req
	sizeofUnixMsg    = 16 // struct unix_diag_msg
)

var errDiag = errors.New("sock_diag: malformed answer")

// listening lists the inodes of the UNIX sockets that listen on the file
// (dev, ino) (as stat gives them).
func (d *sockDiag) listening(dev, ino uint64) ([]uint32, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seq++
	req := make([]byte, unix.NLMSG_HDRLEN+sizeofUnixReq)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], sockDiagByFamily)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(req[8:], d.seq)
	r := req[unix.NLMSG_HDRLEN:]
	r[0] = unix.AF_UNIX                // sdiag_family
	ne.PutUint32(r[4:], 1<<tcpListen)  // udiag_states
	ne.PutUint32(r[12:], udiagShowVFS) // udiag_show
	ne.PutUint32(r[16:], ^uint32(0))   // udiag_cookie: none
	ne.PutUint32(r[20:], ^uint32(0))
	if err := unix.Sendto(d.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	// The kernel's dev_t is major<<20 | minor; stat's is encoded.
	kdev := uint32(unix.Major(dev))<<20 | uint32(unix.Minor(dev))
	var out []uint32
	buf := make([]byte, 32<<10)
	for {
		n, _, err := unix.Recvfrom(d.fd, buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for b := buf[:n]; len(b) >= unix.NLMSG_HDRLEN; {
			size := int(ne.Uint32(b))
			if size < unix.NLMSG_HDRLEN || size > len(b) {
				return nil, errDiag
			}
			typ, seq, data := ne.Uint16(b[4:]), ne.Uint32(b[8:]), b[unix.NLMSG_HDRLEN:size]
			b = b[min(align4(size), len(b)):]
			if seq != d.seq {
				continue
			}
			switch typ {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				if len(data) >= 4 {
					if e := int32(ne.Uint32(data)); e != 0 {
						return nil, unix.Errno(-e)
					}
				}
				return nil, errDiag
			case sockDiagByFamily:
			default:
				continue
			}
			if len(data) < sizeofUnixMsg {
				return nil, errDiag
			}
			sock := ne.Uint32(data[4:])
			// The attributes: struct rtattr (length, type), then the value.
			for a := data[sizeofUnixMsg:]; len(a) >= 4; {
				alen, atype := int(ne.Uint16(a)), ne.Uint16(a[2:])
				if alen < 4 || alen > len(a) {
					return nil, errDiag
				}
				if v := a[4:alen]; atype == unixDiagVFS && len(v) >= 8 && ne.Uint32(v) == uint32(ino) && ne.Uint32(v[4:]) == kdev {
					out = append(out, sock)
				}
				a = a[min(align4(alen), len(a)):]
			}
		}
	}
}

func align4(n int) int { return (n + 3) &^ 3 }
