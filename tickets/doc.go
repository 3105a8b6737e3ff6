// Package tickets owns the retry-state store shared with ticketflow: a
// folder per ticket under <knowledge_dir>/tickets holding retry-state.json
// (ticketflow's schema v1) and close-summary.md. It locks a ticket, begins
// and resumes its attempts (skipping a ticket that used its retries), ends
// each as its work ended, resets it, says which models an attempt
// escalates to, writes the close summary, and reads a ticket's
// verdict from its artifacts as ticketflow's detection does. Files are
// written atomically and read back capped; what another program added to a
// file is kept. It knows nothing of processes or of peal's state folder.
package tickets
