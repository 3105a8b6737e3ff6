//go:build !linux

package main

// The tries of sockets and of the terminal are Linux's.
func systemEscapes(who string) {}
func systemWork(who string)    {}

func daemonStage(stage, lock string) int { return 1 }
