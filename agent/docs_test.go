package agent

import (
	"flag"
	"fmt"
	"os"
	"peal/phase"
	"slices"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the per-kind tables of docs/agents.md from the kinds' declarations")

const agentsDoc = "../docs/agents.md"

// TestDocumented: every per-kind table of docs/agents.md is generated from
// the kinds' declarations, one row per registered kind, so a kind is
// documented by its own file. A table follows a marker line
// `<!-- kinds: NAME -->`; with -update the test writes the tables.
func TestDocumented(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(agentsDoc)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	tables := docTables(t)
	var out []string
	seen := map[string]bool{}
	for i := 0; i < len(lines); i++ {
		out = append(out, lines[i])
		name, ok := strings.CutPrefix(lines[i], "<!-- kinds: ")
		if !ok {
			continue
		}
		name = strings.TrimSuffix(name, " -->")
		want, known := tables[name]
		if !known {
			t.Errorf("docs/agents.md has a marker for no table: %q", lines[i])
			continue
		}
		seen[name] = true
		end := i + 1
		for end < len(lines) && strings.HasPrefix(lines[end], "|") {
			end++
		}
		got := lines[i+1 : end]
		if !*update && !slices.Equal(got, want) {
			t.Errorf("docs/agents.md, table %q:\n%s\nwant (go test ./agent -run TestDocumented -update writes it):\n%s",
				name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		out = append(out, want...)
		i = end - 1
	}
	for name := range tables {
		if !seen[name] {
			t.Errorf("docs/agents.md lacks the marker of table %q (<!-- kinds: %s -->)", name, name)
		}
	}
	if *update {
		if err := os.WriteFile(agentsDoc, []byte(strings.Join(out, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// docTables are the per-kind tables of docs/agents.md, by marker name: a
// header, then one row per kind (or per group of kinds that share the
// cells, for the event formats).
func docTables(t *testing.T) map[string][]string {
	t.Helper()
	kinds := make([]*Kind, 0, len(Names()))
	for _, name := range Names() {
		k, _ := Lookup(name)
		kinds = append(kinds, k)
		for field, cell := range map[string]string{
			"CLI": k.CLI, "ModelFlag": k.ModelFlag, "Notes": k.Notes, "Doc.Measured": k.Doc.Measured,
			"Doc.NoCredentials": k.Doc.NoCredentials, "Doc.Unreachable": k.Doc.Unreachable, "Doc.InvalidKey": k.Doc.InvalidKey,
			"Doc.RateLimit": k.Doc.RateLimit, "Doc.Unauthorized": k.Doc.Unauthorized, "Doc.Forbidden": k.Doc.Forbidden,
			"Doc.ModelNotFound": k.Doc.ModelNotFound, "Doc.Outage": k.Doc.Outage, "Doc.OutageBound": k.Doc.OutageBound,
			"Doc.OutageAttempts": k.Doc.OutageAttempts, "Doc.OutageExit": k.Doc.OutageExit,
			"Doc.OutOfQuota": k.Doc.OutOfQuota, "Doc.OverContext": k.Doc.OverContext, "Doc.OwnRetries": k.Doc.OwnRetries,
			"Doc.RetryTime": k.Doc.RetryTime, "Doc.CapExit": k.Doc.CapExit, "Confine.Notes": k.Confine.Notes,
		} {
			if cell == "" {
				t.Errorf("kind %s declares no %s: docs/agents.md needs it", name, field)
			}
		}
	}
	each := func(header []string, row func(k *Kind) []string) []string {
		out := table(header)
		for _, k := range kinds {
			out = append(out, cells(append([]string{"`" + k.Name + "`"}, row(k)...)))
		}
		return out
	}
	return map[string][]string{
		"overview": each([]string{"kind", "CLI", "binary (`agent_cmd` default)", "prompt", "model", "structured output (`structured_output = true`)", "measured version"},
			func(k *Kind) []string {
				prompt := "last argument"
				if k.PromptOnStdin {
					prompt = "stdin"
					if k.StdinArg != "" {
						prompt += " (`" + k.StdinArg + "`)"
					}
				}
				name := k.CLI
				if k.Name == Default {
					name += " (the default)"
				}
				return []string{name, "`" + k.DefaultCmd + "`", prompt, "`" + k.ModelFlag + " M`", "`" + structuredFlags(t, k) + "`", k.Doc.Measured}
			}),
		"argv": each([]string{"kind", "read-only calls", "writing calls", "what the writing flags grant"},
			func(k *Kind) []string {
				return []string{argvByPhase(t, k, "plan", "normalize", "triage"), argvByPhase(t, k, "execute", "address"), k.Notes}
			}),
		"failures": each([]string{"kind", "no credentials", "API unreachable", "invalid key", "rate limit", "exit codes that decide alone"},
			func(k *Kind) []string {
				return []string{k.Doc.NoCredentials, k.Doc.Unreachable, k.Doc.InvalidKey, k.Doc.RateLimit, exitCodes(k)}
			}),
		"refusals": each([]string{"kind", "401", "403"},
			func(k *Kind) []string { return []string{k.Doc.Unauthorized, k.Doc.Forbidden} }),
		"model-not-found": each([]string{"kind", "404 for the model (measured)", "what peal recognises, besides the common patterns"},
			func(k *Kind) []string { return []string{k.Doc.ModelNotFound, patterns(k.Failures.ModelNotFound)} }),
		"no-wait": each([]string{"kind", "account out of quota or credit (measured)", "prompt over the context window (measured)", "what peal recognises, besides the common patterns"},
			func(k *Kind) []string {
				return []string{k.Doc.OutOfQuota, k.Doc.OverContext, patterns(concat(k.Failures.OutOfQuota, k.Failures.OverContext))}
			}),
		"own-retries": each([]string{"kind", "its own retries of a 429 or 529 that never lifts (measured)", "the server's time to retry, as peal reads it", "exit 4 with `rate_limit_max_wait_sec = 40` (measured)"},
			func(k *Kind) []string { return []string{k.Doc.OwnRetries, k.Doc.RetryTime, k.Doc.CapExit} }),
		"outages": each([]string{"kind", "one attempt against a refused connection", "what bounds it", "attempts", "exit 4 after (measured)"},
			func(k *Kind) []string {
				return []string{k.Doc.Outage, k.Doc.OutageBound, k.Doc.OutageAttempts, k.Doc.OutageExit}
			}),
		"events": eventsTable(kinds),
		"sessions": each([]string{"kind", "the session's id", "a first call (execute)", "a resumed call (execute)", "a session it cannot resume (measured)", "what peal recognises", "what peal never passes, and why"},
			func(k *Kind) []string {
				s := k.Session
				if s == nil {
					return []string{"cannot continue a session: every call starts fresh", "—", "—", "—", "—", "—"}
				}
				for field, cell := range map[string]string{"Learnt": s.Doc.Learnt, "Lost": s.Doc.Lost, "Hazards": s.Doc.Hazards} {
					if cell == "" {
						t.Errorf("kind %s declares no Session.Doc.%s: docs/agents.md needs it", k.Name, field)
					}
				}
				id := "learnt: " + s.Doc.Learnt
				if s.Chosen {
					id = "chosen by peal, a new UUID; " + s.Doc.Learnt + " names it too"
				}
				recognised := patterns(s.Lost)
				for _, code := range s.LostExit {
					recognised += fmt.Sprintf(", exit %d", code)
				}
				if !s.Measured() {
					recognised = "a failure before the events name the session"
				}
				return []string{id, "`" + sessionArgv(t, k, false) + "`", "`" + sessionArgv(t, k, true) + "`", s.Doc.Lost, recognised, s.Doc.Hazards}
			}),
		"confine": each([]string{"kind", "folders its calls write", "what else its calls read in the home folder", "its credentials (no other kind's call reads them)", "hosts", "variables", "base URL variables (their hosts are allowed)"},
			func(k *Kind) []string {
				c := k.Confine
				return []string{patterns(c.Folders), patterns(c.Reads), patterns(c.Credentials), patterns(c.Hosts), patterns(c.Env), patterns(c.BaseURLs)}
			}),
		"keys":     keysTable(t, kinds),
		"key-apis": apisTable(),
		"confine-measured": each([]string{"kind", "under confinement"},
			func(k *Kind) []string { return []string{k.Confine.Notes} }),
		"auth": each([]string{"kind", "credential variables (any one)", "status command", "checked before the first call", "how to log in, in CI"},
			func(k *Kind) []string {
				status := "none"
				if k.Auth.Status != nil {
					status = "`" + strings.Join(append([]string{k.DefaultCmd}, k.Auth.Status...), " ") + "`"
				}
				check := "no: `peal doctor` only"
				if k.Auth.BeforeRun {
					check = "yes"
				}
				hint := k.Auth.LoginHint
				if hint == "" {
					hint = k.Failures.FatalHint
				}
				return []string{patterns(k.Auth.Env), status, check, hint}
			}),
	}
}

// table is the header of a Markdown table.
func table(header []string) []string {
	sep := make([]string, len(header))
	for i := range sep {
		sep[i] = "---"
	}
	return []string{cells(header), "|" + strings.Join(sep, "|") + "|"}
}

// cells is one row of a Markdown table, its pipes escaped.
func cells(c []string) string {
	for i, s := range c {
		c[i] = strings.ReplaceAll(s, "|", `\|`)
	}
	return "| " + strings.Join(c, " | ") + " |"
}

// patterns are a list in code spans; "—" when empty.
func patterns(list []string) string {
	if len(list) == 0 {
		return "—"
	}
	quoted := make([]string, len(list))
	for i, p := range list {
		quoted[i] = "`" + p + "`"
	}
	return strings.Join(quoted, ", ")
}

// exitCodes are the exit codes whose class the kind declares.
func exitCodes(k *Kind) string {
	if len(k.Failures.ExitCodes) == 0 {
		return "—"
	}
	var codes []int
	for c := range k.Failures.ExitCodes {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var out []string
	for _, c := range codes {
		out = append(out, fmt.Sprintf("%d: %s", c, k.Failures.ExitCodes[c]))
	}
	return strings.Join(out, ", ")
}

// docCall is a call as the tables show it: placeholders for the values a
// run fills in.
func docCall(phaseName phase.Name, structured bool, model string) Call {
	return Call{Phase: phaseName, Repo: "REPO", Model: model, Prompt: "PROMPT", Structured: structured,
		Options: Options{Sandbox: "SANDBOX", Trust: true, Force: true}}
}

// shownArgv is the argv of a call after the program, the model shown as
// optional: `[--model M]`.
func shownArgv(t *testing.T, k *Kind, phaseName phase.Name) string {
	t.Helper()
	inv, err := k.Invocation("", docCall(phaseName, false, "M"))
	if err != nil {
		t.Fatal(err)
	}
	argv := strings.Join(inv.Argv[1:], " ")
	return strings.Replace(argv, k.ModelFlag+" M", "["+k.ModelFlag+" M]", 1)
}

// sessionArgv is the argv of an execute call with the kind's structured
// output that begins a session (resume false) or continues one, the id
// shown as ID.
func sessionArgv(t *testing.T, k *Kind, resume bool) string {
	t.Helper()
	c := docCall("execute", true, "M")
	c.Session, c.Resume = "ID", resume
	inv, err := k.invocation("", c)
	if err != nil {
		t.Fatal(err)
	}
	argv := strings.Join(inv.Argv[1:], " ")
	return strings.Replace(argv, k.ModelFlag+" M", "["+k.ModelFlag+" M]", 1)
}

// argvByPhase is the argv of the phases, in code spans; phases whose argv
// differ are named.
func argvByPhase(t *testing.T, k *Kind, phases ...phase.Name) string {
	var order []string // the distinct argvs, in the order of the phases
	byArgv := map[string][]string{}
	for _, p := range phases {
		a := shownArgv(t, k, p)
		if _, seen := byArgv[a]; !seen {
			order = append(order, a)
		}
		byArgv[a] = append(byArgv[a], string(p))
	}
	if len(order) == 1 {
		return "`" + order[0] + "`"
	}
	var out []string
	for _, a := range order {
		out = append(out, strings.Join(byArgv[a], ", ")+": `"+a+"`")
	}
	return strings.Join(out, "; ")
}

// structuredFlags are the arguments a writing call gains when it asks for
// the event stream.
func structuredFlags(t *testing.T, k *Kind) string {
	t.Helper()
	plain, err1 := k.Invocation("", docCall("execute", false, ""))
	events, err2 := k.Invocation("", docCall("execute", true, ""))
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	var added []string
	i := 0
	for _, a := range events.Argv {
		if i < len(plain.Argv) && plain.Argv[i] == a {
			i++
			continue
		}
		added = append(added, a)
	}
	return strings.Join(added, " ")
}

// eventsTable is the table of the event formats: the kinds that share one
// (Claude Code's stream-json) share a row.
func eventsTable(kinds []*Kind) []string {
	out := table([]string{"kind", "answer", "end of the answer", "error", "usage"})
	var formats []*Events
	names := map[*Events][]string{}
	for _, k := range kinds {
		if k.Events == nil {
			continue
		}
		if names[k.Events] == nil {
			formats = append(formats, k.Events)
		}
		names[k.Events] = append(names[k.Events], "`"+k.Name+"`")
	}
	for _, e := range formats {
		out = append(out, cells([]string{strings.Join(names[e], ", "), e.Answer, e.End, e.Error, e.Usage}))
	}
	return out
}

// keysTable is the table of the model keys: a row per kind and way to log
// in, whether peal's model endpoint holds its key.
func keysTable(t *testing.T, kinds []*Kind) []string {
	out := table([]string{"kind", "login", "key held by peal", "how (or why not)"})
	for _, k := range kinds {
		if len(k.Confine.Keys.Logins) == 0 {
			t.Errorf("kind %s declares no Confine.Keys.Logins: docs/agents.md needs them", k.Name)
		}
		held := false
		for _, l := range k.Confine.Keys.Logins {
			yes := "no"
			if l.Held {
				yes, held = "yes", true
			}
			out = append(out, cells([]string{"`" + k.Name + "`", l.Name, yes, l.How}))
		}
		if held != (k.Confine.Keys.Hold != nil) {
			t.Errorf("kind %s: a login held (%v) but Confine.Keys.Hold set (%v)", k.Name, held, k.Confine.Keys.Hold != nil)
		}
	}
	return out
}

// apisTable is the table of the model APIs peal's endpoint forwards to.
func apisTable() []string {
	out := table([]string{"API", "its own address", "where the key goes", "requests forwarded (all others refused)", "forwarded without a key"})
	for _, a := range APIs {
		var places []string
		for _, p := range a.Places {
			switch {
			case p.Query != "":
				places = append(places, "`?"+p.Query+"=`")
			case p.Prefix != "":
				places = append(places, "`"+p.Header+": "+strings.TrimSpace(p.Prefix)+"`")
			default:
				places = append(places, "`"+p.Header+"`")
			}
		}
		out = append(out, cells([]string{a.Name, "`" + a.Root + "`", strings.Join(places, ", "), patterns(a.Routes), patterns(a.Open)}))
	}
	return out
}
