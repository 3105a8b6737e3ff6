// Package text holds the helpers that make untrusted output fit a message:
// terminal codes and stray control characters removed (Clean), one line
// quoted and bounded (Quote, Snippet), the line that best explains a failure
// (Meaningful, LastMeaningful), and durations and counts in words (Seconds,
// AttemptCount). It imports nothing of peal, so every package may use it.
package text
