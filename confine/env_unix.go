//go:build !windows

package confine

const foldEnvNames = false

var platformEnv []string
