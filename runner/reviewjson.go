package runner

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// A review can hold thousands of findings and is parsed after every review
// call, so its JSON is read by this small single-pass reader instead of
// reflection: substrings of the input are used as they are, and values of no
// interest are skipped without being built.

// maxJSONDepth bounds nesting, as encoding/json does, so that hostile input
// cannot exhaust the stack.
const maxJSONDepth = 10000

type jsonReader struct {
	s     string
	i     int
	depth int
}

func (r *jsonReader) ws() {
	for r.i < len(r.s) {
		switch r.s[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// next skips whitespace and returns the next byte (0 at the end).
func (r *jsonReader) next() byte {
	r.ws()
	if r.i < len(r.s) {
		return r.s[r.i]
	}
	return 0
}

func (r *jsonReader) eat(c byte) bool {
	if r.next() == c {
		r.i++
		return true
	}
	return false
}

// str reads a string token.
func (r *jsonReader) str() (string, bool) {
	if !r.eat('"') {
		return "", false
	}
	start := r.i
	for r.i < len(r.s) {
		c := r.s[r.i]
		switch {
		case c == '"':
			out := r.s[start:r.i]
			r.i++
			return out, true
		case c == '\\':
			return r.escaped(start)
		case c < 0x20:
			return "", false
		}
		r.i++
	}
	return "", false
}

// escaped finishes a string that contains escapes.
func (r *jsonReader) escaped(start int) (string, bool) {
	var b strings.Builder
	b.WriteString(r.s[start:r.i])
	for r.i < len(r.s) {
		c := r.s[r.i]
		switch {
		case c == '"':
			r.i++
			return b.String(), true
		case c < 0x20:
			return "", false
		case c != '\\':
			b.WriteByte(c)
			r.i++
			continue
		}
		if r.i+1 >= len(r.s) {
			return "", false
		}
		esc := r.s[r.i+1]
		r.i += 2
		switch esc {
		case '"', '\\', '/':
			b.WriteByte(esc)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			ru, ok := r.hex4()
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(ru) {
				// A surrogate pair is two escapes; a lone half becomes U+FFFD.
				save := r.i
				if r.i+1 < len(r.s) && r.s[r.i] == '\\' && r.s[r.i+1] == 'u' {
					r.i += 2
					if lo, ok := r.hex4(); ok && utf16.DecodeRune(ru, lo) != utf8.RuneError {
						ru = utf16.DecodeRune(ru, lo)
					} else {
						r.i, ru = save, utf8.RuneError
					}
				} else {
					ru = utf8.RuneError
				}
			}
			b.WriteRune(ru)
		default:
			return "", false
		}
	}
	return "", false
}

func (r *jsonReader) hex4() (rune, bool) {
	if r.i+4 > len(r.s) {
		return 0, false
	}
	n, err := strconv.ParseUint(r.s[r.i:r.i+4], 16, 32)
	if err != nil {
		return 0, false
	}
	r.i += 4
	return rune(n), true
}

// number reads a number token with JSON's grammar.
func (r *jsonReader) number() (float64, bool) {
	r.ws()
	start := r.i
	if r.i < len(r.s) && r.s[r.i] == '-' {
		r.i++
	}
	digits := func() int {
		n := 0
		for r.i < len(r.s) && r.s[r.i] >= '0' && r.s[r.i] <= '9' {
			r.i++
			n++
		}
		return n
	}
	if r.i < len(r.s) && r.s[r.i] == '0' {
		r.i++
	} else if digits() == 0 {
		return 0, false
	}
	if r.i < len(r.s) && r.s[r.i] == '.' {
		r.i++
		if digits() == 0 {
			return 0, false
		}
	}
	if r.i < len(r.s) && (r.s[r.i] == 'e' || r.s[r.i] == 'E') {
		r.i++
		if r.i < len(r.s) && (r.s[r.i] == '+' || r.s[r.i] == '-') {
			r.i++
		}
		if digits() == 0 {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(r.s[start:r.i], 64)
	if err != nil && !isRangeErr(err) {
		return 0, false
	}
	return f, true
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func (r *jsonReader) literal(word string) bool {
	r.ws()
	if strings.HasPrefix(r.s[r.i:], word) {
		r.i += len(word)
		return true
	}
	return false
}

// skip reads and discards any value.
func (r *jsonReader) skip() bool {
	switch r.next() {
	case '"':
		_, ok := r.str()
		return ok
	case '{':
		return r.object(func(string) bool { return r.skip() })
	case '[':
		return r.array(func() bool { return r.skip() })
	case 't':
		return r.literal("true")
	case 'f':
		return r.literal("false")
	case 'n':
		return r.literal("null")
	}
	_, ok := r.number()
	return ok
}

// object reads an object, handing each key to field, which must read the value.
func (r *jsonReader) object(field func(key string) bool) bool {
	if !r.eat('{') || !r.enter() {
		return false
	}
	defer r.leave()
	if r.eat('}') {
		return true
	}
	for {
		key, ok := r.str()
		if !ok || !r.eat(':') || !field(key) {
			return false
		}
		if r.eat('}') {
			return true
		}
		if !r.eat(',') {
			return false
		}
	}
}

// array reads an array, calling item for each element, which must read it.
func (r *jsonReader) array(item func() bool) bool {
	if !r.eat('[') || !r.enter() {
		return false
	}
	defer r.leave()
	if r.eat(']') {
		return true
	}
	for {
		if !item() {
			return false
		}
		if r.eat(']') {
			return true
		}
		if !r.eat(',') {
			return false
		}
	}
}

func (r *jsonReader) enter() bool {
	r.depth++
	return r.depth <= maxJSONDepth
}

func (r *jsonReader) leave() { r.depth-- }

// findingList reads a findings array. typed reports whether every element
// was an object whose known fields had their types (null counts as unset).
func (r *jsonReader) findingList() (list []Finding, n int, typed, ok bool) {
	typed = true
	ok = r.array(func() bool {
		n++
		if r.next() != '{' {
			typed = false
			return r.skip()
		}
		var f Finding
		good := true
		if !r.object(func(key string) bool { return r.findingField(&f, key, &good) }) {
			return false
		}
		typed = typed && good
		list = append(list, f)
		return true
	})
	return list, n, typed, ok
}

// findingField reads one field of a finding into f; a known field with an
// unexpected type clears good.
func (r *jsonReader) findingField(f *Finding, key string, good *bool) bool {
	var target *string
	switch key {
	case "id":
		target = &f.ID
	case "file":
		target = &f.File
	case "path":
		target = &f.Path
	case "severity":
		target = &f.Severity
	case "category":
		target = &f.Category
	case "message":
		target = &f.Message
	case "suggestion":
		target = &f.Suggestion
	case "line", "confidence":
		c := r.next()
		if c == 'n' {
			return r.literal("null")
		}
		if c != '-' && (c < '0' || c > '9') {
			*good = false
			return r.skip()
		}
		n, ok := r.number()
		if key == "line" {
			f.Line = int(n)
		} else {
			f.Confidence = n
		}
		return ok
	default:
		return r.skip()
	}
	switch r.next() {
	case '"':
		s, ok := r.str()
		*target = s
		return ok
	case 'n':
		return r.literal("null")
	}
	*good = false
	return r.skip()
}

// parseReviewJSON reads a review's JSON: {"findings": [...], "issues": [...],
// "count": n} or a top-level array. ok is false when text is not JSON.
func parseReviewJSON(text string) (parsedJSON, bool) {
	r := &jsonReader{s: text}
	var p parsedJSON
	var ok bool
	switch r.next() {
	case '[':
		var typed bool
		var n int
		p.findings, n, typed, ok = r.findingList()
		p.present = n > 0
		p.structured = typed
	case '{':
		var lists [2][]Finding
		var seen [2]bool
		elements := 0
		typed := true
		count := 0.0
		ok = r.object(func(key string) bool {
			slot := -1
			switch key {
			case "findings":
				slot = 0
			case "issues":
				slot = 1
			case "count":
				if c := r.next(); c == '-' || (c >= '0' && c <= '9') {
					n, ok := r.number()
					count = n
					return ok
				}
				return r.skip()
			}
			if slot < 0 || r.next() != '[' {
				return r.skip()
			}
			list, n, listTyped, ok := r.findingList()
			lists[slot], seen[slot] = list, true
			elements += n
			typed = typed && listTyped
			return ok
		})
		p.findings = append(lists[0], lists[1]...)
		p.present = elements > 0 || count > 0
		p.structured = (seen[0] || seen[1]) && typed
	default:
		if !r.skip() {
			return parsedJSON{}, false
		}
		ok = true
	}
	if r.ws(); !ok || r.i != len(r.s) {
		return parsedJSON{}, false
	}
	if !p.structured {
		p.findings = nil
	}
	return p, true
}
