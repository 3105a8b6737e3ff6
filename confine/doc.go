// Package confine owns the kernel-enforced confinement of one child process
// (an agent call or a project check): what this machine can enforce (Probe),
// the policy of a call (Policy: the paths it may write, read, never read,
// never write; the TCP ports it may reach), its expansion into Landlock rules
// (Expand), the launcher that applies them to the child before the program
// runs (peal's own binary, re-executed), the environment a call may see
// (FilterEnv), the HTTP/CONNECT proxy through which a call reaches only its
// allowed hosts (Proxy), and the one line that explains a failure caused by
// a denial (Explain).
//
// What it does not own: which calls are confined and with what (the run's
// policy, the agent kinds' declarations, the configuration keys); phase
// starts the child and asks this package to confine it (phase.Spec.Confine).
package confine
