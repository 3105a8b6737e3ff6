// Package gitrepo owns every git command peal runs. A Repo is git in one
// folder of a work tree; its named methods are what peal does with git (the
// commits that make a task's work visible to its review, the status and
// diffs a review needs, the worktrees, branches and merges of parallel
// blocks), and its one command builder (Command) serves the rest, with a
// standard input, a stream for long output, variables and a folder. Every
// command is a supervised call of package phase; one that fails is an
// *Error with its exit status and the end of what it printed. No other
// package starts git.
package gitrepo
