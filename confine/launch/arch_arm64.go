//go:build linux

package launch

// The system-call ABI of this architecture as seccomp tells it: the native
// one (a program may still enter the 32-bit ARM one, whose audit value
// differs).
const (
	NativeArch   = 0xc00000b7 // AUDIT_ARCH_AARCH64
	x32Bit       = 0
	seccompReady = true

	sysSeccomp     = 277
	sysPrctl       = 167
	sysCapget      = 90
	sysCapset      = 91
	sysRtSigaction = 134
	sysIoctl       = 29
	sysSetns       = 268
)

// nativeNr is the number of s on this architecture (-1: none).
func nativeNr(s syscallRule) int16 { return s.arm64 }

const is386 = false
