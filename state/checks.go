package state

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"peal/internal/safefs"
)

// ChecksNoteName is the file of the state folder that names the first task
// whose work may be in the work tree unfinished, and the checks that failed
// before it started: on a re-run, the checks that fail beyond those are
// that task's to fix, not failures that were there before.
const ChecksNoteName = "checks.json"

// ChecksNote is the content of ChecksNoteName.
type ChecksNote struct {
	Task          int      `json:"task"`
	FailingBefore []string `json:"failing_before"`
}

// WriteChecksNote writes the note n in the state folder dir.
func WriteChecksNote(dir string, n ChecksNote) error {
	if n.FailingBefore == nil {
		n.FailingBefore = []string{}
	}
	return WriteJSONAtomic(filepath.Join(dir, ChecksNoteName), n)
}

// RemoveChecksNote removes the note in the state folder dir, if any.
func RemoveChecksNote(dir string) error {
	if err := os.Remove(filepath.Join(dir, ChecksNoteName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// ReadChecksNote reads the note in the state folder dir (its checks
// sorted); ok is false when there is none. One that cannot be read is kept
// aside, said through warn, and counts as none.
func ReadChecksNote(dir string, now time.Time, warn func(msg string, args ...any)) (n ChecksNote, ok bool) {
	d, err := safefs.OpenDir(dir, false)
	if err != nil {
		return n, false
	}
	defer d.Close()
	d.RemoveTemps(ChecksNoteName)
	data, err := d.ReadFile(ChecksNoteName, 1<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return n, false
	}
	if err == nil && json.Unmarshal(data, &n) == nil {
		slices.Sort(n.FailingBefore)
		return n, true
	}
	if aside, kerr := d.KeepUnreadable(ChecksNoteName, now); kerr == nil {
		warn("the note of an unfinished task is unreadable; kept aside, it is ignored", "file", aside)
	} else {
		warn("the note of an unfinished task is unreadable and could not be moved aside", "file", d.Join(ChecksNoteName), "err", safefs.Reason(kerr))
	}
	return ChecksNote{}, false
}
