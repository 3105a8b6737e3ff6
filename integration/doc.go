// Package integration holds the tests that run the real coding-agent CLIs
// (the kinds whose mock set-up is in agents_test.go) against mock model APIs
// served on 127.0.0.1 by peal/internal/testkit/mockllm: first the CLIs alone, then
// peal driving them. Nothing reaches the network and no real credential is
// used; each test gives the CLI a fresh HOME, TMPDIR and git repository.
//
// A CLI is looked up in PEAL_AGENT_BIN_DIR, else on PATH; the tests of a CLI
// that is not found are skipped. The peal tests build ./cmd/peal and skip
// when that build does not know --agent-kind. The connection-refused tests
// wait out peal's default network retries, so give the run time:
//
//	PEAL_AGENT_BIN_DIR=/path/to/node_modules/.bin go test -timeout 30m ./integration/
package integration
