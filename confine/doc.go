// Package confine owns the kernel-enforced confinement of one child process
// (an agent call or a project check): what this machine can enforce
// (Probe: Landlock, seccomp, the namespaces the system allows), the access
// of a call (Access: the paths it may write, read, never read, never
// write; the TCP ports and UNIX sockets it may reach), its expansion into
// Landlock rules (Expand), the start of the call through the launcher
// (package launch: peal's own binary, which sets up the call's
// namespaces, applies the rules and the seccomp filter and holds every
// process the call starts), the supervisor that decides and makes every
// connection of the call, the environment a call may see (FilterEnv), the
// HTTP/CONNECT proxy through which a call reaches only its allowed hosts
// (Proxy), the model endpoint that holds a call's model API keys and
// forwards only its API's requests (KeyEndpoint), both doors of the call
// that its network namespace serves too (Door), and the one line that
// explains a failure caused by a denial (Explain).
//
// What it does not own: which calls are confined and with what (package
// policy, the agent kinds' declarations, the configuration keys); phase
// starts the child and asks this package to confine it (phase.Spec.Confine),
// and ends what the call left when it ends.
package confine
