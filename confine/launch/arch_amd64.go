//go:build linux

package launch

// The system-call ABIs of this architecture as seccomp tells them apart:
// the native one, and the 32-bit one a program may still enter (int 0x80).
// The x32 ABI shares the native audit value and sets x32Bit in the system
// call's number.
const (
	NativeArch   = 0xc000003e // AUDIT_ARCH_X86_64
	compatArch   = 0x40000003 // AUDIT_ARCH_I386
	hasCompat    = true
	x32Bit       = 0x40000000
	seccompReady = true

	sysSocket          = 41
	sysConnect         = 42
	sysSendto          = 44
	sysSendmsg         = 46
	sysSocketpair      = 53
	sysSendmmsg        = 307
	sysSeccomp         = 317
	sysIoUringSetup    = 425
	sysIoUringEnter    = 426
	sysIoUringRegister = 427
	sysPrctl           = 157
	sysCapget          = 125
	sysCapset          = 126
	sysRtSigaction     = 13
	sysIoctl           = 16
)

// compatNetwork are the 32-bit ABI's system calls that make or address
// sockets: socketcall (which carries its arguments in memory, out of the
// filter's sight), socket, socketpair, connect, sendto, sendmsg and
// sendmmsg. A 32-bit program under confinement has no network.
var compatNetwork = []uint32{102, 359, 360, 362, 369, 370, 345}

const is386 = false
