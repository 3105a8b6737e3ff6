package fakes

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// SessionFlags are how a fake CLI begins and resumes its sessions, as the
// real CLI does (see agent.Session and docs/agents.md): the fake keeps its
// sessions in the scenario folder (SessionsFile), refuses to resume one it
// does not have in the real CLI's words, and names the session in its
// events.
type SessionFlags struct {
	// Begin is the option that begins a session with the id given; "" for
	// a CLI that chooses its ids (NewID).
	Begin string
	// Resume is the option that resumes the session it names. ResumeSub,
	// instead, is a word followed by the id (codex's `resume <id>`), after
	// which the options of NotAfter are usage errors.
	Resume, ResumeSub string
	NotAfter          []string
	// NewID makes the id of a session the CLI chooses.
	NewID func() string
	// Lost is what the CLI prints when it cannot resume id; Taken what it
	// prints when asked to begin a session whose id it has (nil: it
	// cannot be asked).
	Lost, Taken func(id string) Failure
	// Line is the event that names the session, first of its stream.
	Line func(id string) any
	// PerFolder: a session resumes only in the folder it began in
	// (elsewhere it is lost); Hangs: elsewhere, the CLI never exits.
	PerFolder, Hangs bool
	// Cumulative: the usage its events report counts the whole session.
	Cumulative bool
}

// SessionsFile, in the fake agent's folder, is the sessions of the fake
// CLIs: one line per call that began or continued one.
const SessionsFile = "agent-sessions.jsonl"

// SessionTurn is one line of SessionsFile: a call of a session.
type SessionTurn struct {
	Kind  string `json:"kind"`
	ID    string `json:"id"`
	Dir   string `json:"dir"`
	Phase string `json:"phase"`
	// Input and Output are the tokens the call reported.
	Input  int64 `json:"input"`
	Cached int64 `json:"cached"`
	Output int64 `json:"output"`
}

// AddSessionTurn appends a call of a session to SessionsFile.
func AddSessionTurn(dir string, t SessionTurn) error {
	return appendLocked(filepath.Join(dir, SessionsFile), func([]byte) ([]byte, error) { return json.Marshal(t) })
}

// SessionTurns are the calls of kind's session id so far, in order.
func SessionTurns(dir, kind, id string) ([]SessionTurn, error) {
	all, err := readJSONL[SessionTurn](filepath.Join(dir, SessionsFile))
	if err != nil {
		return nil, err
	}
	var out []SessionTurn
	for _, t := range all {
		if t.Kind == kind && t.ID == id {
			out = append(out, t)
		}
	}
	return out, nil
}

// ForgetSessions removes SessionsFile: the CLIs' sessions are gone (their
// files deleted, another machine).
func ForgetSessions(dir string) error {
	if err := os.Remove(filepath.Join(dir, SessionsFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// uuid4 is a random UUID, as the CLIs that choose their ids make them.
func uuid4() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// opencodeID is an id of opencode's form: "ses_" and 26 letters and digits.
func opencodeID() string {
	var b [13]byte
	_, _ = rand.Read(b[:])
	return "ses_" + hex.EncodeToString(b[:])
}
