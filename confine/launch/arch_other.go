//go:build linux && !amd64 && !arm64

package launch

import (
	"runtime"
	"syscall"
)

// Seccomp filters are made for amd64 and arm64 only: elsewhere (386, whose
// programs reach sockets through socketcall with its arguments in memory,
// and the rarer architectures) none is installed, and the start line says
// so.
const (
	NativeArch   = 0
	x32Bit       = 0
	seccompReady = false

	sysSeccomp     = 0
	sysPrctl       = syscall.SYS_PRCTL
	sysCapget      = syscall.SYS_CAPGET
	sysCapset      = syscall.SYS_CAPSET
	sysRtSigaction = syscall.SYS_RT_SIGACTION
	sysIoctl       = syscall.SYS_IOCTL
	sysSetns       = 0 // none joins: nothing is made ahead here
)

// nativeNr: no filter is made here.
func nativeNr(syscallRule) int16 { return -1 }

const is386 = runtime.GOARCH == "386"
