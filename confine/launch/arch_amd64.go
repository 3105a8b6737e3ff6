//go:build linux

package launch

// The system-call ABI of this architecture as seccomp tells it: the native
// one (a program may still enter the 32-bit one, int 0x80, whose audit
// value differs, and the x32 one, which shares the native audit value and
// sets x32Bit in the system call's number).
const (
	NativeArch   = 0xc000003e // AUDIT_ARCH_X86_64
	x32Bit       = 0x40000000
	seccompReady = true

	sysSeccomp     = 317
	sysPrctl       = 157
	sysCapget      = 125
	sysCapset      = 126
	sysRtSigaction = 13
	sysIoctl       = 16
	sysSetns       = 308
)

// nativeNr is the number of s on this architecture (-1: none).
func nativeNr(s syscallRule) int16 { return s.amd64 }

const is386 = false
