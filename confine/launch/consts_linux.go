package launch

// The kernel's constants the launcher uses, as its headers define them
// (the same on every architecture); the tests check them against
// golang.org/x/sys/unix.
const (
	prSetDumpable        = 4
	prCapbsetRead        = 23
	prCapbsetDrop        = 24
	prSetChildSubreaper  = 36
	prSetNoNewPrivs      = 38
	prCapAmbient         = 47
	prCapAmbientClearAll = 4

	capSysAdmin          = 21
	capPerfmon           = 38
	capSysPtrace         = 19
	capDacReadSearch     = 2
	capMknod             = 27
	capNetRaw            = 13
	capNetAdmin          = 12
	capBPF               = 39
	capSysModule         = 16
	capSysRawio          = 17
	capSysBoot           = 22
	capSysTime           = 25
	capSyslog            = 34
	capMacAdmin          = 33
	capMacOverride       = 32
	capAuditControl      = 30
	capLinuxImmutable    = 9
	capSysPacct          = 20
	capCheckpointRestore = 40
	capSetpcap           = 8
	capVersion3          = 0x20080522

	seccompSetModeFilter     = 1
	seccompGetActionAvail    = 2
	seccompFlagNewListener   = 8
	seccompRetAllow          = 0x7fff0000
	seccompRetErrno          = 0x00050000
	seccompRetUserNotif      = 0x7fc00000
	bpfLdWAbs                = 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfJeqK                  = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	bpfJgeK                  = 0x35 // BPF_JMP | BPF_JGE | BPF_K
	bpfJsetK                 = 0x45 // BPF_JMP | BPF_JSET | BPF_K
	bpfAndK                  = 0x54 // BPF_ALU | BPF_AND | BPF_K
	bpfRetK                  = 0x06 // BPF_RET | BPF_K
	afUnix                   = 1
	afInet                   = 2
	afInet6                  = 10
	afNetlink                = 16
	sockStream               = 1
	sockDgram                = 2
	sockTypeMask             = 0xf
	ipprotoTCP               = 6
	msgFastopen              = 0x20000000
	eacces                   = 13
	enosys                   = 38
	eprotonosupport          = 93
	sysLandlockAddRule       = 445
	sysLandlockRestrictSelf  = 446
	landlockRulePathBeneath  = 1
	landlockAccessFSExecute  = 1
	landlockAccessFSReadFile = 4
	landlockAccessFSReadDir  = 8
	oPath                    = 0x200000
	siocgifflags             = 0x8913
	siocsifflags             = 0x8914
	iffUp                    = 1
)
