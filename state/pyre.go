package state

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// tf detects a blocked ticket with Python regular expressions. Go's regexp
// (RE2) reads the same pattern text differently in a few places, so the
// patterns are kept here in their Python spelling and translated to RE2 by
// pyCompile, which spells out Python's meaning:
//
//   - \s: Python's str patterns match every character str.isspace() accepts,
//     Go's only [\t\n\f\r ]. pySpace lists Python's set.
//   - \d: Python's match any Unicode decimal digit (category Nd), Go's only
//     0-9. pyDigit is \p{Nd}, taken from Go's Unicode tables (15.0, the same
//     as Python 3.12 and 3.13; Python 3.11 lacks the 20 Kawi and Nag Mundari
//     digits).
//   - IGNORECASE: Python compares simple lower-case forms and adds a few
//     equivalences of its own (i and dotless ı, s and long ſ, µ and μ, …),
//     so "i" also matches İ and ı, which Go's (?i) does not. pyCompile never
//     uses (?i): every letter becomes a class of what Python would accept.
//   - $ without MULTILINE: Python also matches before a final newline, Go's
//     only at the very end. The one pattern that uses it has it as (?:\s|$),
//     where \s already takes that newline, so \z is exact.
//   - re.escape: a failOn name is inserted as a literal, each character
//     becoming its case class, which is what re.escape plus IGNORECASE means.

// pySpace is Python's \s for str patterns.
const pySpace = `[\t\n\v\f\r \x{1c}-\x{1f}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]`

// pyDigit is Python's \d for str patterns.
const pyDigit = `\p{Nd}`

// pyCompile translates a Python pattern compiled with re.IGNORECASE (and
// re.MULTILINE when multiline is set) to Go. The pattern may contain
// {literal}, which stands for re.escape(literal). It handles only the syntax
// the detection patterns use and panics on anything else, so a new pattern
// cannot slip through half translated.
func pyCompile(pattern, literal string, multiline bool) *regexp.Regexp {
	var b strings.Builder
	if multiline {
		b.WriteString("(?m)")
	}
	for i := 0; i < len(pattern); {
		c := pattern[i]
		switch {
		case strings.HasPrefix(pattern[i:], "{literal}"):
			b.WriteString(pyLiteral(literal))
			i += len("{literal}")
		case c == '\\':
			switch pattern[i+1] {
			case 's':
				b.WriteString(pySpace)
			case 'd':
				b.WriteString(pyDigit)
			case 'n', '*', '(', ')':
				b.WriteString(pattern[i : i+2])
			default:
				panic(fmt.Sprintf("pyCompile: escape \\%c is not translated", pattern[i+1]))
			}
			i += 2
		case c == '[':
			// Classes are copied as they are: the ones used hold no letters
			// and no escapes, so Python and Go read them alike.
			end := strings.IndexByte(pattern[i+1:], ']')
			class := pattern[i : i+end+2]
			if strings.ContainsAny(class, `\`) || strings.IndexFunc(class, unicode.IsLetter) >= 0 {
				panic(fmt.Sprintf("pyCompile: class %s is not translated", class))
			}
			b.WriteString(class)
			i += len(class)
		case c == '(' && strings.HasPrefix(pattern[i:], "(?") && !strings.HasPrefix(pattern[i:], "(?:"):
			panic(fmt.Sprintf("pyCompile: group %.4s is not translated", pattern[i:]))
		case c == '$' && !multiline:
			b.WriteString(`\z`)
			i++
		case c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z':
			b.WriteString(pyLiteral(string(c)))
			i++
		case c >= 0x80 || c == '{':
			panic(fmt.Sprintf("pyCompile: %q is not translated", pattern[i:]))
		default:
			b.WriteByte(c)
			i++
		}
	}
	return regexp.MustCompile(b.String())
}

// pyLiteral is the RE2 form of s matched literally under Python's IGNORECASE.
func pyLiteral(s string) string {
	var b strings.Builder
	for _, r := range s {
		class := pyCaseClass(r)
		if len(class) == 1 {
			b.WriteString(regexp.QuoteMeta(string(r)))
			continue
		}
		b.WriteByte('[')
		for _, m := range class {
			fmt.Fprintf(&b, `\x{%x}`, m)
		}
		b.WriteByte(']')
	}
	return b.String()
}

// pyCaseClass lists, sorted, the characters Python's IGNORECASE lets match c:
// those whose simple lower-case form is c's, or one of the forms Python
// declares equivalent to it (CPython's re._casefix). They are found among the
// Unicode case-folding orbits of those forms; İ (U+0130) is the one character
// whose lower case (i) does not fold with it, so it is added by hand.
func pyCaseClass(c rune) []rune {
	lower := unicode.ToLower(c)
	targets := append([]rune{lower}, pyCaseExtras[lower]...)
	var class []rune
	add := func(r rune) {
		if slices.Contains(targets, unicode.ToLower(r)) && !slices.Contains(class, r) {
			class = append(class, r)
		}
	}
	for _, t := range targets {
		add(t)
		for r := unicode.SimpleFold(t); r != t; r = unicode.SimpleFold(r) {
			add(r)
		}
		if t == 'i' {
			add('\u0130')
		}
	}
	add(c)
	slices.Sort(class)
	return class
}

// pyCaseExtras is CPython's re._casefix._EXTRA_CASES (3.11): lower-case
// characters that IGNORECASE treats as equal although their lower-case forms
// differ.
var pyCaseExtras = map[rune][]rune{
	0x69: {0x131}, 0x73: {0x17f}, 0xb5: {0x3bc}, 0x131: {0x69}, 0x17f: {0x73},
	0x345: {0x3b9, 0x1fbe}, 0x390: {0x1fd3}, 0x3b0: {0x1fe3}, 0x3b2: {0x3d0},
	0x3b5: {0x3f5}, 0x3b8: {0x3d1}, 0x3b9: {0x345, 0x1fbe}, 0x3ba: {0x3f0},
	0x3bc: {0xb5}, 0x3c0: {0x3d6}, 0x3c1: {0x3f1}, 0x3c2: {0x3c3}, 0x3c3: {0x3c2},
	0x3c6: {0x3d5}, 0x3d0: {0x3b2}, 0x3d1: {0x3b8}, 0x3d5: {0x3c6}, 0x3d6: {0x3c0},
	0x3f0: {0x3ba}, 0x3f1: {0x3c1}, 0x3f5: {0x3b5}, 0x432: {0x1c80}, 0x434: {0x1c81},
	0x43e: {0x1c82}, 0x441: {0x1c83}, 0x442: {0x1c84, 0x1c85}, 0x44a: {0x1c86},
	0x463: {0x1c87}, 0x1c80: {0x432}, 0x1c81: {0x434}, 0x1c82: {0x43e}, 0x1c83: {0x441},
	0x1c84: {0x442, 0x1c85}, 0x1c85: {0x442, 0x1c84}, 0x1c86: {0x44a}, 0x1c87: {0x463},
	0x1c88: {0xa64b}, 0x1e61: {0x1e9b}, 0x1e9b: {0x1e61}, 0x1fbe: {0x345, 0x3b9},
	0x1fd3: {0x390}, 0x1fe3: {0x3b0}, 0xa64b: {0x1c88}, 0xfb05: {0xfb06}, 0xfb06: {0xfb05},
}
