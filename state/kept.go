package state

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"peal/internal/safefs"
)

// What peal keeps for the user is noted in the repository's git folder,
// beside the notes of where each plan's state lives: a file per thing
// kept in .git/peal/kept, naming the branch or ref that holds it and the
// commands that look at it and take it back. The notes, like what they
// name, outlive the state folder, so that starting over (removing it)
// loses nothing; `peal status`, `peal report` and the end of a run list
// them. A note whose ref is gone (the user deleted the branch once done
// with it) is not listed.

// Kept is one thing peal kept for the user.
type Kept struct {
	At string `json:"at"` // RFC 3339, UTC
	// Task is the task whose run it comes from (-1: none; the lowest of a
	// block that shared its work).
	Task int `json:"task"`
	// What is KeptWork or KeptFiles.
	What string `json:"what"`
	// Ref is the branch (peal-kept/task-2-1a2b3c4d) or the ref
	// (refs/peal-kept/files/…) that holds it.
	Ref string `json:"ref"`
	// Why is the one line that says why it did not stay where it was.
	Why string `json:"why"`
	// Look and Take are the commands that show it and take it back; Files
	// the files kept, each with the command that puts it back.
	Look  string     `json:"look,omitempty"`
	Take  string     `json:"take,omitempty"`
	Files []KeptFile `json:"files,omitempty"`
}

// The kinds of Kept.
const (
	// KeptWork is the work of a task that did not complete (its commits
	// and what it left uncommitted), or that rewrote history, or that the
	// work tree could not take: never on the user's branch.
	KeptWork = "work"
	// KeptFiles are files of the user's (uncommitted, untracked, ignored)
	// that a task removed or replaced, as they were before.
	KeptFiles = "files"
)

// KeptFile is one file kept, and the command that puts it back.
type KeptFile struct {
	Path    string `json:"path"`
	Restore string `json:"restore"`
}

// KeptDir is the folder of the kept notes of the repository whose git
// folder (the one its worktrees share) is gitDir.
func KeptDir(gitDir string) string { return filepath.Join(gitDir, "peal", "kept") }

// maxKeptNotes bounds how many notes are read: far beyond what a person
// leaves unread.
const maxKeptNotes = 1000

// NoteKept writes k as a new note in dir (KeptDir), atomically.
func NoteKept(dir string, k Kept) error {
	data, err := json.MarshalIndent(k, "", "  ")
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(k.Ref))
	at, err := time.Parse(time.RFC3339, k.At)
	if err != nil {
		at = time.Now()
	}
	name := safefs.Stamp(at) + "-" + hex.EncodeToString(sum[:4]) + ".json"
	return safefs.WriteFile(filepath.Join(dir, name), append(data, '\n'))
}

// ReadKept is what the notes of dir (KeptDir) name, the newest first, but
// those whose ref exists no more (exists tells; nil: every one is shown).
// A note that cannot be read is skipped.
func ReadKept(dir string, exists func(ref string) bool) []Kept {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") && e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	slices.Reverse(names)
	var out []Kept
	for _, n := range names[:min(len(names), maxKeptNotes)] {
		data, err := safefs.ReadFile(filepath.Join(dir, n), maxNote)
		var k Kept
		if err != nil || json.Unmarshal(data, &k) != nil || k.Ref == "" {
			continue
		}
		if exists == nil || exists(k.Ref) {
			out = append(out, k)
		}
	}
	return out
}

// RefExists reports, without running git, whether the repository whose
// git folder is gitDir has ref (a branch by its short name, or a full
// ref): a loose ref file or a line of packed-refs. A repository whose refs
// peal cannot read this way (git's reftable) counts as having it.
func RefExists(gitDir, ref string) bool {
	full := ref
	if !strings.HasPrefix(full, "refs/") {
		full = "refs/heads/" + ref
	}
	if _, err := os.Stat(filepath.Join(gitDir, "reftable")); err == nil {
		return true
	}
	if info, err := os.Lstat(filepath.Join(gitDir, filepath.FromSlash(full))); err == nil && info.Mode().IsRegular() {
		return true
	}
	packed, err := safefs.ReadFile(filepath.Join(gitDir, "packed-refs"), 64<<20)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(packed), "\n") {
		if _, name, ok := strings.Cut(strings.TrimSpace(line), " "); ok && name == full {
			return true
		}
	}
	return false
}

// Line is k in one line for a person: what is kept where, why, and the
// commands that look at it and take it back (the first files' own, for
// files).
func (k Kept) Line() string {
	who := fmt.Sprintf("task %d", k.Task)
	if k.Task < 0 {
		who = "the run"
	}
	if k.What == KeptFiles {
		var each []string
		for i, f := range k.Files {
			if i == 5 {
				each = append(each, fmt.Sprintf("%d more (see them: %s)", len(k.Files)-i, k.Look))
				break
			}
			each = append(each, fmt.Sprintf("%s (put it back: %s)", f.Path, f.Restore))
		}
		return fmt.Sprintf("files of yours that %s removed or replaced are kept on %s: %s", who, k.Ref, strings.Join(each, ", "))
	}
	line := fmt.Sprintf("%s's work is kept on branch %s, not on your branch", who, k.Ref)
	if k.Why != "" {
		line += " (" + k.Why + ")"
	}
	return line + fmt.Sprintf(": see it with %s, take it with %s", k.Look, k.Take)
}
