package phase

// NoteKill has the guard of this process (Linux: see guard_linux.go) append
// a line to the file at path when peal dies while calls are under way: the
// bytes before, the time the guard saw peal die (RFC 3339, UTC, to the
// nanosecond), then after. It is how a record kept by a run that is killed
// (SIGKILL, which nothing in peal sees) learns how long its last calls
// really ran. The guard writes only to the file that was at path when
// NoteKill was called, found there still (never a file put in its place
// since, never a link, never one made anew), and only once. NoteKill("", "", "") forgets the note; a later
// call replaces it. Where there is no guard, nothing is noted.
func NoteKill(path, before, after string) { noteKill(path, before, after) }
