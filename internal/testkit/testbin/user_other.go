//go:build !unix

package testbin

// UserEnv is set in the environment of a test run again as an unprivileged
// user, which is Unix's.
const UserEnv = "PEAL_TEST_AS_USER"
