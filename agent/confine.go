package agent

// Confinement is what a kind's CLI needs when peal confines its calls
// (confine = auto or on): the folders it writes, the files that hold its
// login, the hosts of its API and the variables it reads. Each kind
// declares it once, in its file; docs/agents.md shows it.
type Confinement struct {
	// Folders are where the CLI keeps its state, sessions, logs and
	// caches, writable by its calls; ~/ is the home folder. peal makes
	// them before a confined call: a grant of a folder that does not exist
	// grants nothing.
	Folders []string
	// Credentials are the files (or folders) that hold its login:
	// readable by its own calls, never by another kind's.
	Credentials []string
	// Hosts are the hosts of its API and its login (host or host:port).
	Hosts []string
	// Env are the variables it reads: names, or PREFIX_*.
	Env []string
	// BaseURLs are the variables that point it at another API (a proxy, a
	// local model): the hosts they name are allowed too.
	BaseURLs []string
}
