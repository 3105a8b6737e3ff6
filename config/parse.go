package config

import (
	"fmt"
	"math"
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

// parseText parses the text form of a value, as given by an environment
// variable or a flag. where names the variable or flag for error messages.
func parseText(k Key, raw, where string) (any, error) {
	switch k.Kind {
	case KindString, KindPath:
		return raw, nil
	case KindEnum:
		return checkEnum(k, strings.TrimSpace(raw), where)
	case KindBool:
		switch strings.TrimSpace(raw) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, fmt.Errorf("%s: invalid value %q: want true or false", where, raw)
	case KindU32, KindU64:
		n, err := strconv.ParseUint(strings.TrimSpace(raw), 10, 64)
		if err != nil || (k.Kind == KindU32 && n > math.MaxUint32) {
			return nil, fmt.Errorf("%s: invalid value %q: want a non-negative whole number%s", where, raw, u32Hint(k))
		}
		return n, nil
	case KindF64:
		x, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
		if err != nil || x < 0 || math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, fmt.Errorf("%s: invalid value %q: want a non-negative number such as 2.5", where, raw)
		}
		return x, nil
	case KindCommands, KindList:
		return splitCommas(raw), nil
	case KindArgs:
		return strings.FieldsFunc(raw, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }), nil
	case KindSeverities:
		return checkSeverities(splitCommas(raw), where)
	case KindPatterns:
		// Malformed pairs are skipped, as documented for PEAL_STET_DISMISS_PATTERNS.
		var out []DismissPattern
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
	return nil, fmt.Errorf("%s: unsupported key kind", where)
}

func u32Hint(k Key) string {
	if k.Kind == KindU32 {
		return " below 4294967296"
	}
	return ""
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
func checkSeverities(list []string, where string) (any, error) {
	out := make([]string, 0, len(list))
	for _, s := range list {
		i := slices.IndexFunc(Severities, func(sev string) bool { return strings.EqualFold(sev, strings.TrimSpace(s)) })
		if i < 0 {
			return nil, fmt.Errorf("%s: unknown severity %q: want %s", where, s, strings.Join(Severities, ", "))
		}
		out = append(out, Severities[i])
	}
	return out, nil
}

func checkEnum(k Key, v, where string) (any, error) {
	if slices.Contains(k.Enum, v) {
		return v, nil
	}
	return nil, fmt.Errorf("%s: invalid value %q: want one of %s", where, v, strings.Join(k.Enum, ", "))
}

// parseTOML converts a value decoded from TOML into the key's parsed type.
func parseTOML(k Key, v any, where string) (any, error) {
	wrongType := func() error {
		return fmt.Errorf("%s: wrong type %s: want %s", where, tomlTypeName(v), k.Type)
	}
	switch k.Kind {
	case KindString, KindPath:
		s, ok := v.(string)
		if !ok {
			return nil, wrongType()
		}
		return s, nil
	case KindEnum:
		s, ok := v.(string)
		if !ok {
			return nil, wrongType()
		}
		return checkEnum(k, s, where)
	case KindBool:
		b, ok := v.(bool)
		if !ok {
			return nil, wrongType()
		}
		return b, nil
	case KindU32, KindU64:
		n, ok := v.(int64)
		if !ok {
			return nil, wrongType()
		}
		if n < 0 || (k.Kind == KindU32 && n > math.MaxUint32) {
			return nil, fmt.Errorf("%s: invalid value %d: want a non-negative whole number%s", where, n, u32Hint(k))
		}
		return uint64(n), nil
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
			return nil, fmt.Errorf("%s: invalid value %v: want a non-negative number", where, v)
		}
		return x, nil
	case KindCommands, KindArgs, KindSeverities, KindList:
		list, ok := v.([]any)
		if !ok {
			return nil, wrongType()
		}
		out := make([]string, 0, len(list))
		for _, item := range list {
			s, ok := item.(string)
			if !ok {
				return nil, fmt.Errorf("%s: wrong type: every entry must be a string", where)
			}
			out = append(out, s)
		}
		if k.Kind == KindSeverities {
			return checkSeverities(out, where)
		}
		return out, nil
	case KindPatterns:
		list, ok := v.([]any)
		if !ok {
			return nil, wrongType()
		}
		out := make([]DismissPattern, 0, len(list))
		for i, item := range list {
			table, ok := item.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: wrong type: entry %d must be a table {pattern, reason}", where, i+1)
			}
			var p DismissPattern
			for field, fv := range table {
				s, ok := fv.(string)
				switch {
				case field != "pattern" && field != "reason":
					return nil, fmt.Errorf("%s: entry %d: unknown field %q (want pattern and reason)", where, i+1, field)
				case !ok:
					return nil, fmt.Errorf("%s: entry %d: %s must be a string", where, i+1, field)
				case field == "pattern":
					p.Pattern = s
				default:
					p.Reason = s
				}
			}
			if p.Pattern == "" {
				return nil, fmt.Errorf("%s: entry %d: pattern is missing or empty", where, i+1)
			}
			if !slices.Contains(DismissReasons, p.Reason) {
				return nil, fmt.Errorf("%s: entry %d: invalid dismiss reason %q: want one of %s", where, i+1, p.Reason, strings.Join(DismissReasons, ", "))
			}
			out = append(out, p)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: unsupported key kind", where)
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

// ParseSeverities parses a comma-separated list of severities the way
// fail_on is read from a variable or flag ("" is the empty list).
func ParseSeverities(text string) ([]string, error) {
	v, err := checkSeverities(splitCommas(text), "--fail-on")
	if err != nil {
		return nil, err
	}
	return v.([]string), nil
}
