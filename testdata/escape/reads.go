package main

import (
	"os"
	"path/filepath"
)

// secretFiles are files of the home folder that hold credentials, which no
// call reads: git's second credential store, npm's, PostgreSQL's, the
// container engines', Maven's and Gradle's settings, the shell's history;
// and tokens inside folders a call may read: Hugging Face's (in the cache
// folder), Go's settings (a password in GOPROXY; Go's settings are a
// toolchain's), cargo's configuration (a registry's token; ~/.cargo is a
// toolchain's).
var secretFiles = []string{
	".config/git/credentials", ".npmrc", ".pgpass", ".config/containers/auth.json", ".m2/settings.xml",
	".gradle/gradle.properties", ".bash_history", ".cache/huggingface/token", ".config/go/env", ".cargo/config.toml",
}

// readTries are the reads a task must never make: each secret file, any
// other file of the home folder (it is read by allow list) and its
// listing, peal's configuration file (ESCAPE_CONFIG), and another user's
// home folder (/root, when it is not the home folder).
func readTries(who, home string) {
	for _, f := range secretFiles {
		escape(who+"read-"+f, func() error { return readOK(filepath.Join(home, f)) })
	}
	escape(who+"read-home-file", func() error { return readOK(filepath.Join(home, ".bashrc")) })
	escape(who+"list-home", func() error { _, err := os.ReadDir(home); return err })
	if p := os.Getenv("ESCAPE_CONFIG"); p != "" {
		escape(who+"read-peal-config", func() error { return readOK(p) })
	}
	if home != "/root" {
		escape(who+"list-root", func() error { _, err := os.ReadDir("/root"); return err })
	}
}
