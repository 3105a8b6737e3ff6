// Package state owns the files peal keeps in its state folder and how each
// is written and read back: state.json (the completed and deferred tasks,
// and the lock that keeps two runs off one state folder), the run summary,
// the run record (run_record.jsonl, every call of a run as it happens), the
// agent sessions of the tasks, the notes in the repository's .git/peal of
// where each plan's state lives and of what peal kept for the user, the
// note of a task whose unfinished work may be in the work tree
// (checks.json), and what `peal status` shows of a plan's tasks. The
// retry-state store shared with ticketflow is package tickets. Every file
// is written atomically (the run record, a stream, line by line, a torn
// last line repaired) and read back capped; one that cannot be read is
// kept aside, never lost. It knows nothing of processes.
package state
