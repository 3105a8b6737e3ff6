// Package state owns the files peal keeps on disk and how each is written
// and read back: state.json (the completed and deferred tasks, and the lock
// that keeps two runs off one state folder), the run summary, the run record
// (run_record.jsonl, every call of a run as it happens), the retry-state
// store shared with ticketflow (a folder per ticket: retry-state.json and
// close-summary.md, in ticketflow's schema v1) and how a ticket's verdict is
// read from it, and what `peal status` shows of a plan's tasks. Every file
// is written atomically and read back capped; one that cannot be read is
// kept aside, never lost. It knows nothing of processes.
package state
