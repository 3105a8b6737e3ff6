package agent

import (
	"crypto/rand"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"peal/internal/text"
	"peal/phase"
)

// Session is how a kind's CLI continues one conversation over several calls
// (agent_session = "task"): how the id of a new session is chosen or learnt,
// the arguments of a call that begins one and of a call that resumes one,
// and the CLI's own words for a session it cannot resume. Each kind declares
// it once, in its file; nil for a CLI that cannot continue a conversation.
//
// A session is only ever named by its id: never by recency (--continue,
// --last, `latest`, an index), never by an empty id, never through a picker.
// Those pick the newest session of a folder, which may be another task's or
// the developer's own.
type Session struct {
	// Chosen: peal chooses the id of a new session (a new UUID, see NewID)
	// and passes it with Begin. Otherwise the CLI chooses it, and its
	// events name it (Event.Session): the id is learnt during the call.
	Chosen bool
	// Begin are the arguments of a call that begins session id; nil when
	// the CLI chooses the id (a first call then has no session argument).
	Begin func(id string) []string
	// Resume are the arguments of a call that continues session id. They
	// follow the kind's own arguments (Kind.Args), before the model, the
	// user's extra arguments and the prompt.
	Resume func(id string) []string
	// ID tells an id the CLI could have given or would take for what it
	// is: never empty, never an option, never a word the CLI reads as "the
	// newest session" or as a title to search.
	ID *regexp.Regexp
	// Lost are the CLI's words when it cannot resume a session (an id it
	// does not know, its files gone or unreadable, a session of another
	// folder), as case-insensitive substrings of a line of its output; and
	// LostExit the exit codes that say so by themselves. Neither declared
	// (a CLI not measured): a resumed call that failed before its events
	// named the session counts as one that could not be resumed.
	Lost     []string
	LostExit []int
	// Doc is what docs/agents.md says of it, in Markdown.
	Doc SessionDoc
}

// SessionDoc holds the cells of docs/agents.md's table of sessions that
// are measurements of the real CLI rather than declarations.
type SessionDoc struct {
	// Learnt is where the events name the session.
	Learnt string
	// Lost is what the CLI does with an id it cannot resume: its words,
	// exit code and time, as measured.
	Lost string
	// Hazards are the inputs that would pick or start another session
	// silently, and what the CLI does in another folder.
	Hazards string
}

// uuidPattern is a UUID in its usual spelling (any version).
var uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// NewID is a new random UUID (version 4), the id peal gives a session
// whose id it chooses.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// ValidID reports whether id can name a session of the CLI: it has the
// form the CLI gives or takes, so that it can never be read as an option,
// an empty id, an index or a word that picks another session.
func (s *Session) ValidID(id string) bool {
	return s != nil && id != "" && !strings.HasPrefix(id, "-") && strings.Trim(id, "0123456789") != "" && s.ID.MatchString(id)
}

// Args are the session's arguments of a call: Resume when resume is set,
// else Begin (none for a CLI that chooses its ids, or with no id).
func (s *Session) Args(id string, resume bool) []string {
	switch {
	case s == nil || id == "":
		return nil
	case resume:
		return s.Resume(id)
	case s.Begin != nil:
		return s.Begin(id)
	}
	return nil
}

// Measured reports whether the CLI's words for a session it cannot resume
// are declared.
func (s *Session) Measured() bool { return len(s.Lost) > 0 || len(s.LostExit) > 0 }

// LostIn reports whether a resumed call that failed with res says that the
// CLI could not resume its session, and the line that says so. named tells
// whether the call's events named the session: for a CLI whose words are
// not measured, a failure before they did counts as a session it could not
// resume.
func (s *Session) LostIn(res phase.Result, named bool) (string, bool) {
	if !s.Measured() {
		if named {
			return "", false
		}
		line := phase.Explain(res)
		if line == "" {
			line = fmt.Sprintf("exit %d before its events named the session", res.ExitCode)
		}
		return line, true
	}
	for _, out := range []string{res.Stderr, tail(res.Stdout, tailBytes)} {
		for _, line := range strings.Split(out, "\n") {
			line = text.Clean(line)
			l := strings.ToLower(line)
			for _, p := range s.Lost {
				if strings.Contains(l, strings.ToLower(p)) {
					return text.Quote(line), true
				}
			}
		}
	}
	if !res.TimedOut && slices.Contains(s.LostExit, res.ExitCode) {
		line := phase.Explain(res)
		if line == "" {
			line = fmt.Sprintf("exit %d", res.ExitCode)
		}
		return line, true
	}
	return "", false
}
