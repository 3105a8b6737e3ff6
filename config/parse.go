package config

import (
	"errors"
	"fmt"
	"math"
	"peal/tickets"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// DismissPattern dismisses a stet finding whose message or path contains Pattern.
type DismissPattern struct {
	Pattern string `json:"pattern" toml:"pattern"`
	Reason  string `json:"reason" toml:"reason"`
}

// ParseText parses the text form of the key's value, as a variable or a flag
// gives it, into the Go type of its Config field. Errors name the value, not
// where it came from: the caller adds the flag or variable.
func (k Key) ParseText(text string) (any, error) {
	v, err := parseText(k, text)
	if err != nil {
		return nil, err
	}
	f := reflect.New(k.GoType).Elem()
	setField(f, v)
	return f.Interface(), nil
}

// parseText parses the text form of a value into its parsed type (a string,
// bool, uint64, []string or []DismissPattern).
func parseText(k Key, raw string) (any, error) {
	switch k.Kind {
	case KindString, KindPath:
		return raw, nil
	case KindEnum:
		return checkEnum(k, strings.TrimSpace(raw))
	case KindLogLevel:
		return parseLogLevel(raw)
	case KindBool:
		switch strings.TrimSpace(raw) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, fmt.Errorf("invalid value %s: want true or false", Quote(raw))
	case KindU32, KindU64, KindSeconds:
		n, err := strconv.ParseUint(strings.TrimSpace(raw), 10, 64)
		if errors.Is(err, strconv.ErrRange) {
			return nil, tooLarge(k, raw)
		}
		if err != nil {
			return nil, fmt.Errorf("invalid value %s: want a non-negative whole number", Quote(raw))
		}
		return checkMax(k, n, raw)
	case KindF64:
		x, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
		if err != nil || x < 0 || math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, fmt.Errorf("invalid value %s: want a non-negative number such as 2.5", Quote(raw))
		}
		return x, nil
	case KindCommands, KindList:
		return splitCommas(raw), nil
	case KindShell:
		return splitLines(raw), nil
	case KindArgs:
		return strings.FieldsFunc(raw, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }), nil
	case KindSeverities:
		return checkSeverities(splitCommas(raw))
	case KindPatterns:
		// Malformed pairs are skipped, as documented for PEAL_STET_DISMISS_PATTERNS.
		out := []DismissPattern{}
		for _, pair := range splitCommas(raw) {
			pattern, reason, ok := strings.Cut(pair, "|")
			pattern, reason = strings.TrimSpace(pattern), strings.TrimSpace(reason)
			if !ok || pattern == "" || !slices.Contains(DismissReasons, reason) {
				continue
			}
			out = append(out, DismissPattern{Pattern: pattern, Reason: reason})
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported key kind")
}

func checkMax(k Key, n uint64, shown any) (any, error) {
	if n > k.Max {
		return nil, tooLarge(k, shown)
	}
	return n, nil
}

func tooLarge(k Key, shown any) error {
	if s, ok := shown.(string); ok {
		shown = Quote(s)
	}
	unit := ""
	switch {
	case k.Kind == KindSeconds:
		unit = " seconds (about 31 years)"
	case k.Max == math.MaxUint32:
		unit = " (a 32-bit count)"
	}
	return fmt.Errorf("invalid value %v: the largest accepted is %d%s", shown, k.Max, unit)
}

// Quote shows a value given by the user in a message: quoted, so that control
// characters cannot reach the terminal, and cut to 60 characters.
func Quote(s string) string {
	if r := []rune(s); len(r) > 60 {
		return strconv.Quote(string(r[:60])) + "…"
	}
	return strconv.Quote(s)
}

// splitLines splits the text of a list of shell commands, one per line
// (CRLF read as LF); blank lines are dropped, so that a block of lines in a
// CI file may end with a newline or hold empty lines.
func splitLines(raw string) []string {
	out := []string{}
	for _, line := range strings.Split(strings.ReplaceAll(raw, "\r\n", "\n"), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// ParseShellCommand is one use of the flag of a KindShell key: one command
// (or, holding newlines, one per line). An empty one is refused.
func (k Key) ParseShellCommand(text string) ([]string, error) {
	cmds := splitLines(text)
	if len(cmds) == 0 {
		return nil, fmt.Errorf("an empty command: give the command to run, as a shell would (e.g. %s)", Quote("go test ./..."))
	}
	return cmds, nil
}

func splitCommas(raw string) []string {
	out := []string{}
	for _, part := range strings.Split(raw, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// checkSeverities accepts severity names in any case and returns them in
// ticketflow's spelling.
func checkSeverities(list []string) (any, error) {
	out := make([]string, 0, len(list))
	for _, s := range list {
		i := slices.IndexFunc(tickets.Severities, func(sev string) bool { return strings.EqualFold(sev, strings.TrimSpace(s)) })
		if i < 0 {
			return nil, fmt.Errorf("unknown severity %s: want %s", Quote(s), strings.Join(tickets.Severities, ", "))
		}
		out = append(out, tickets.Severities[i])
	}
	return out, nil
}

func checkEnum(k Key, v string) (any, error) {
	if slices.Contains(k.Enum, v) {
		return v, nil
	}
	return nil, fmt.Errorf("invalid value %s: want one of %s", Quote(v), strings.Join(k.Enum, ", "))
}

// LogLevels are the levels log_level resolves to.
var LogLevels = []string{"debug", "info", "warn", "error", "off"}

// parseLogLevel reads a log level as peal and Peal accept it: a bare level
// (trace, debug, info, warn, error, off, or 0–5 for off…trace, in any case)
// or comma-separated tracing directives such as "peal=trace,warn". Of the
// directives, the most verbose one for target peal (or a peal:: module)
// applies; else the last bare level; a list that names neither leaves peal
// silent ("off"), as it did Peal. trace means debug, the most verbose level
// here. The result is one of LogLevels.
func parseLogLevel(text string) (string, error) {
	var peal, bare string
	seen := false
	for _, d := range strings.Split(text, ",") {
		d = strings.TrimSpace(d)
		if d == "" {
			continue
		}
		seen = true
		target, level, hasLevel := strings.Cut(d, "=")
		if i := strings.LastIndex(d, "]"); i >= 0 {
			// target[span{field=value}]=level: the level follows the span filter.
			target, level, hasLevel = d[:i+1], strings.TrimPrefix(d[i+1:], "="), i+1 < len(d)
		}
		if !hasLevel {
			if l, ok := levelName(d); ok {
				bare = l
				continue
			}
			// A bare target enables everything of that target; another
			// program's target alone is more likely a misspelt level.
			target, level = d, "trace"
		}
		if i := strings.IndexAny(target, "[{"); i >= 0 {
			target = target[:i] // span filters narrow a target; the level is what counts here
		}
		target = strings.TrimSpace(target)
		isPeal := target == "peal" || strings.HasPrefix(target, "peal::")
		l, ok := levelName(strings.TrimSpace(level))
		if !ok || target == "" || !hasLevel && !isPeal {
			return "", fmt.Errorf("invalid log level %s: want debug, info, warn, error or off, or directives like peal=trace,warn", Quote(text))
		}
		if isPeal {
			if peal == "" || slices.Index(LogLevels, l) < slices.Index(LogLevels, peal) {
				peal = l
			}
		}
	}
	switch {
	case !seen:
		return "", fmt.Errorf("invalid log level %s: want debug, info, warn, error or off, or directives like peal=trace,warn", Quote(text))
	case peal != "":
		return peal, nil
	case bare != "":
		return bare, nil
	}
	return "off", nil
}

func levelName(s string) (string, bool) {
	switch strings.ToLower(s) {
	case "trace", "5", "debug", "4":
		return "debug", true
	case "info", "3":
		return "info", true
	case "warn", "2":
		return "warn", true
	case "error", "1":
		return "error", true
	case "off", "0":
		return "off", true
	}
	return "", false
}

// parseTOML converts a value decoded from TOML into the key's parsed type.
func parseTOML(k Key, v any) (any, error) {
	wrongType := func() error {
		return fmt.Errorf("wrong type %s: want %s", tomlTypeName(v), k.TypeName())
	}
	switch k.Kind {
	case KindString, KindPath, KindEnum, KindLogLevel:
		s, ok := v.(string)
		if !ok {
			return nil, wrongType()
		}
		if k.Kind == KindString || k.Kind == KindPath {
			return s, nil
		}
		return parseText(k, s)
	case KindBool:
		b, ok := v.(bool)
		if !ok {
			return nil, wrongType()
		}
		return b, nil
	case KindU32, KindU64, KindSeconds:
		n, ok := v.(int64)
		if !ok {
			return nil, wrongType()
		}
		if n < 0 {
			return nil, fmt.Errorf("invalid value %d: want a non-negative whole number", n)
		}
		return checkMax(k, uint64(n), n)
	case KindF64:
		var x float64
		switch n := v.(type) {
		case float64:
			x = n
		case int64:
			x = float64(n)
		default:
			return nil, wrongType()
		}
		if x < 0 || math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, fmt.Errorf("invalid value %v: want a non-negative number", v)
		}
		return x, nil
	case KindCommands, KindArgs, KindSeverities, KindList, KindShell:
		list, ok := v.([]any)
		if !ok {
			return nil, wrongType()
		}
		out := make([]string, 0, len(list))
		for _, item := range list {
			s, ok := item.(string)
			if !ok {
				return nil, fmt.Errorf("wrong type: every entry must be a string")
			}
			out = append(out, s)
		}
		switch k.Kind {
		case KindSeverities:
			return checkSeverities(out)
		case KindShell:
			for i, c := range out {
				if out[i] = strings.TrimSpace(c); out[i] == "" {
					return nil, fmt.Errorf("entry %d is an empty command: remove it or give the command to run", i+1)
				}
			}
		}
		return out, nil
	case KindPatterns:
		return parsePatterns(v, wrongType)
	}
	return nil, fmt.Errorf("unsupported key kind")
}

func parsePatterns(v any, wrongType func() error) (any, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, wrongType()
	}
	out := make([]DismissPattern, 0, len(list))
	for i, item := range list {
		table, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("wrong type: entry %d must be a table {pattern, reason}", i+1)
		}
		var p DismissPattern
		for field, fv := range table {
			s, ok := fv.(string)
			switch {
			case field != "pattern" && field != "reason":
				return nil, fmt.Errorf("entry %d: unknown field %s (want pattern and reason)", i+1, Quote(field))
			case !ok:
				return nil, fmt.Errorf("entry %d: %s must be a string", i+1, field)
			case field == "pattern":
				p.Pattern = s
			default:
				p.Reason = s
			}
		}
		if p.Pattern == "" {
			return nil, fmt.Errorf("entry %d: pattern is missing or empty", i+1)
		}
		if !slices.Contains(DismissReasons, p.Reason) {
			return nil, fmt.Errorf("entry %d: invalid dismiss reason %s: want one of %s", i+1, Quote(p.Reason), strings.Join(DismissReasons, ", "))
		}
		out = append(out, p)
	}
	return out, nil
}

func tomlTypeName(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case int64:
		return "integer"
	case float64:
		return "float"
	case []any:
		return "array"
	case map[string]any:
		return "table"
	}
	return fmt.Sprintf("%T", v)
}
