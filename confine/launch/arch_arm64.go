//go:build linux

package launch

// The system-call ABIs of this architecture as seccomp tells them apart:
// the native one, and the 32-bit ARM one.
const (
	NativeArch   = 0xc00000b7 // AUDIT_ARCH_AARCH64
	compatArch   = 0x40000028 // AUDIT_ARCH_ARM
	hasCompat    = true
	x32Bit       = 0
	seccompReady = true

	sysSocket          = 198
	sysConnect         = 203
	sysSendto          = 206
	sysSendmsg         = 211
	sysSocketpair      = 199
	sysSendmmsg        = 269
	sysSeccomp         = 277
	sysIoUringSetup    = 425
	sysIoUringEnter    = 426
	sysIoUringRegister = 427
	sysPrctl           = 167
	sysCapget          = 90
	sysCapset          = 91
	sysRtSigaction     = 134
	sysIoctl           = 29
)

// compatNetwork are the 32-bit ABI's system calls that make or address
// sockets: socket, socketpair, connect, sendto, sendmsg and sendmmsg. A
// 32-bit program under confinement has no network.
var compatNetwork = []uint32{281, 288, 283, 290, 296, 374}

const is386 = false
