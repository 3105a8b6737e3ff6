package phase

// Name names what a supervised call is for: the phase of a task an agent
// call belongs to, or the kind of command peal runs besides (git, stet,
// a check...). It is the word the log, the record and the report use.
type Name string

// The phases of a task's agent calls.
const (
	Normalize Name = "normalize" // the plan converted before the run
	Plan      Name = "plan"
	Execute   Name = "execute"
	Triage    Name = "triage"  // is a review's finding worth fixing
	Address   Name = "address" // a round fixing the review's findings and failing checks
)

// The calls that are not an agent's work on a task.
const (
	Auth    Name = "auth"    // the check that the agent can authenticate
	Version Name = "version" // an agent CLI's version
	Setup   Name = "setup"   // worktree_setup_command
	Merge   Name = "merge"   // a parallel block's task merged into the work tree
	RunName Name = "run"     // the run as a whole (an interruption between calls)
	PostRun Name = "post-run"
	Stet    Name = "stet"  // the review CLI and its commands
	Git     Name = "git"   // peal's own git (in the report's timeline)
	Check   Name = "check" // one of check_commands
)

// Role is which agent an attempt ran: the configured one, or the fallback.
type Role string

// The roles of an attempt.
const (
	RolePrimary  Role = "primary"
	RoleFallback Role = "fallback"
)
