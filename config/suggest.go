package config

import (
	"fmt"
	"strings"
)

// Nearest is the candidate a person most likely meant by word, or "" when
// none is close enough to say so: the same name but for case and the
// separators (-, _ and .); else the one fewest edits away (a letter added,
// dropped, changed or two swapped), within a quarter of the word; else
// the first that begins with word as a whole part (plan for plan_path);
// else the first that holds it as one (timeout for phase_timeout_sec).
// Among equals the first of candidates wins: keep them in the order of
// what people set most.
func Nearest(word string, candidates []string) string {
	w := fold(word)
	if w == "" {
		return ""
	}
	for _, c := range candidates {
		if fold(c) == w {
			return c
		}
	}
	best, bestD := "", max(1, len([]rune(w))/4)+1
	for _, c := range candidates {
		if d := editDistance(w, fold(c)); d < bestD {
			best, bestD = c, d
		}
	}
	if best != "" || len(w) < 3 {
		return best
	}
	for _, c := range candidates {
		if strings.HasPrefix(fold(c)+"_", w+"_") {
			return c
		}
	}
	for _, c := range candidates {
		if strings.Contains("_"+fold(c)+"_", "_"+w+"_") {
			return c
		}
	}
	return ""
}

// fold is a name as Nearest compares it: lower case, every separator an
// underscore.
func fold(s string) string {
	return strings.Trim(strings.NewReplacer("-", "_", ".", "_").Replace(strings.ToLower(strings.TrimSpace(s))), "_")
}

// editDistance is the optimal string alignment distance of a and b: the
// fewest letters added, dropped or changed, or neighbours swapped, that make
// one the other.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// keyNames are the names of every key.
func keyNames() []string {
	names := make([]string, len(Keys))
	for i, k := range Keys {
		names[i] = k.Name
	}
	return names
}

// unknownKey is the error of a configuration file's key that is no key,
// with the key the person most likely meant.
func unknownKey(path, name string) error {
	if near := Nearest(name, keyNames()); near != "" {
		return fmt.Errorf("config file %s: unknown key %s: did you mean %s? (docs/configuration.md lists every key)", path, Quote(name), near)
	}
	return fmt.Errorf("config file %s: unknown key %s (docs/configuration.md lists every key)", path, Quote(name))
}

// otherVariables are the PEAL_* variables that are no key and still
// peal's: Peal's log filter, and what peal sets for the programs it
// starts (so that a peal started by one of them, an agent's or a check's,
// reads them without a word) and the variables of its own test suites.
var otherVariables = []string{
	pealLogEnv,
	"PEAL_PHASE", "PEAL_TASK_INDEX", "PEAL_ATTEMPT", "PEAL_AGENT_ROLE", "PEAL_CALL_ID",
	"PEAL_GUARD_OF", "PEAL_CONFINED_LAUNCH",
	"PEAL_BIN", "PEAL_STET_BIN", "PEAL_AGENT_BIN_DIR", "PEAL_STRESS", "PEAL_STRESS_SEED", "PEAL_REPORT_FIXTURES",
	"PEAL_BENCH_DIR", "PEAL_TICKETFLOW_SRC",
}

// unknownVariables are the warnings for the PEAL_* variables of environ that
// set no key, one each, with the variable the person most likely meant. An
// empty one is left out, as an empty key variable counts as unset.
func unknownVariables(environ []string) []string {
	known := map[string]bool{}
	vars := make([]string, 0, len(Keys))
	for _, k := range Keys {
		known[k.Env()] = true
		vars = append(vars, k.Env())
	}
	for _, v := range otherVariables {
		known[v] = true
	}
	var warnings []string
	seen := map[string]bool{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, "PEAL_") || known[name] || seen[name] || value == "" {
			continue
		}
		seen[name] = true
		shown := Quote(name)
		if near := Nearest(strings.TrimPrefix(name, "PEAL_"), trimmed(vars)); near != "" {
			warnings = append(warnings, fmt.Sprintf("%s is not a peal variable and is ignored: did you mean PEAL_%s?", shown, near))
		} else {
			warnings = append(warnings, fmt.Sprintf("%s is not a peal variable and is ignored (peal run --help lists them)", shown))
		}
	}
	return warnings
}

// trimmed are the variables without their PEAL_ prefix.
func trimmed(vars []string) []string {
	out := make([]string, len(vars))
	for i, v := range vars {
		out[i] = strings.TrimPrefix(v, "PEAL_")
	}
	return out
}
