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

	capVersion3 = 0x20080522

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
	bpfJa                    = 0x05 // BPF_JMP | BPF_JA
	bpfMaxInsns              = 4096 // BPF_MAXINSNS
	afUnix                   = 1
	afInet                   = 2
	afInet6                  = 10
	afNetlink                = 16
	sockStream               = 1
	sockDgram                = 2
	sockRaw                  = 3
	sockSeqpacket            = 5
	sockTypeMask             = 0xf
	ipprotoTCP               = 6
	netlinkRoute             = 0
	netlinkSockDiag          = 4
	msgFastopen              = 0x20000000
	eperm                    = 1
	eacces                   = 13
	enosys                   = 38
	eprotonosupport          = 93
	cloneNewTime             = 0x80
	setIDBits                = 0o6000 // S_ISUID | S_ISGID
	cloneNewNS               = 0x20000
	cloneNewCgroup           = 0x2000000
	cloneNewUTS              = 0x4000000
	cloneNewIPC              = 0x8000000
	cloneNewUser             = 0x10000000
	cloneNewPID              = 0x20000000
	cloneNewNet              = 0x40000000
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
