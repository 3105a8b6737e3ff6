package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// object is a JSON object kept as it was written: its members in order, each
// value as its original text. Rewriting a file through it changes only the
// members peal sets: a number written 1.0, a null, a member peal does not
// know all stay as they were.
type object struct {
	members []member
}

type member struct {
	key   string
	value json.RawMessage
}

// errNotObject: the text is JSON, but not an object.
var errNotObject = errors.New("not a JSON object")

// parseObject reads one JSON object and nothing after it. Text that is
// valid JSON is split where its members begin and end (splitObject); other
// text goes through encoding/json's decoder, which says where and why it
// is not JSON.
func parseObject(data []byte) (*object, error) {
	if json.Valid(data) {
		return splitObject(data)
	}
	return decodeObject(data)
}

// decodeObject is parseObject through json.Decoder.
func decodeObject(data []byte) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		if err := skipRest(dec); err != nil {
			return nil, err
		}
		return nil, errNotObject
	}
	o := &object{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var m member
		m.key = tok.(string) // inside an object the decoder only hands out keys here
		if err := dec.Decode(&m.value); err != nil {
			return nil, err
		}
		o.members = append(o.members, m)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			return nil, errors.New("there is more after the JSON value")
		}
		return nil, err
	}
	return o, nil
}

// skipRest reads a value that started with a non-object token, so that a
// syntax error further on is reported as such.
func skipRest(dec *json.Decoder) error {
	for dec.More() {
		if _, err := dec.Token(); err != nil {
			return err
		}
	}
	return nil
}

// get returns the value of key: the last one when the key is repeated, as
// Python's json module and Go's both read it.
func (o *object) get(key string) (json.RawMessage, bool) {
	for i := len(o.members) - 1; i >= 0; i-- {
		if o.members[i].key == key {
			return o.members[i].value, true
		}
	}
	return nil, false
}

func (o *object) has(key string) bool {
	_, ok := o.get(key)
	return ok
}

// set gives key the JSON form of v: in the place of its last occurrence
// (earlier repetitions go), or as a new last member.
func (o *object) set(key string, v any) {
	raw, err := marshal(v)
	if err != nil {
		// Only peal's own values are set, all of which marshal.
		panic(fmt.Sprintf("state: marshaling %s: %v", key, err))
	}
	o.setRaw(key, raw)
}

func (o *object) setRaw(key string, raw json.RawMessage) {
	last := -1
	for i, m := range o.members {
		if m.key == key {
			last = i
		}
	}
	if last < 0 {
		o.members = append(o.members, member{key, raw})
		return
	}
	o.members[last].value = raw
	for i := last - 1; i >= 0; i-- {
		if o.members[i].key == key {
			o.members = append(o.members[:i], o.members[i+1:]...)
		}
	}
}

func (o *object) delete(key string) {
	out := o.members[:0]
	for _, m := range o.members {
		if m.key != key {
			out = append(out, m)
		}
	}
	o.members = out
}

func (o *object) clone() *object {
	return &object{members: append([]member(nil), o.members...)}
}

// compact is the object's JSON text, values as written.
func (o *object) compact() []byte {
	n := 2
	for _, m := range o.members {
		n += len(m.key) + len(m.value) + 4
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, m := range o.members {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendKey(b, m.key)
		b = append(b, ':')
		b = append(b, m.value...)
	}
	return append(b, '}')
}

// appendKey appends key as a JSON string: as it is between quotes when it
// is printable ASCII without a quote or a backslash, as marshal writes it
// otherwise.
func appendKey(b []byte, key string) []byte {
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			k, _ := marshal(key)
			return append(b, k...)
		}
	}
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"')
}

// file is the object as a file's text: indented by two spaces, as both
// ticketflow and Peal write their files, and ending in a newline. Only the
// layout changes: json.Indent keeps every number and string as written.
func (o *object) file() []byte {
	compact := o.compact()
	var b bytes.Buffer
	b.Grow(2*len(compact) + 64)
	if err := json.Indent(&b, compact, "", "  "); err != nil {
		panic(fmt.Sprintf("state: indenting a document: %v", err)) // every value was valid JSON
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// array is the JSON text of raw values.
func array(items []json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(it)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// marshal is json.Marshal without HTML escaping, so that a model name such
// as "a<b>" is written as it is.
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// The readers below interpret one raw value. kind says what it was, so that
// a caller can tell a missing or null member (often fine) from one of the
// wrong type.
type kind int

const (
	kindMissing kind = iota
	kindNull
	kindOK
	kindWrong
)

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// memberOf reads member key with read, which tells whether the value is of
// the type the member must hold.
func memberOf[T any](o *object, key string, read func(json.RawMessage) (T, bool)) (T, kind) {
	var zero T
	raw, ok := o.get(key)
	switch {
	case !ok:
		return zero, kindMissing
	case isNull(raw):
		return zero, kindNull
	}
	v, ok := read(raw)
	if !ok {
		return zero, kindWrong
	}
	return v, kindOK
}

// decoded is a read of memberOf for the types encoding/json decodes as such.
func decoded[T any](raw json.RawMessage) (T, bool) {
	var v T
	return v, json.Unmarshal(raw, &v) == nil
}

// stringOf reads a string member.
func stringOf(o *object, key string) (string, kind) { return memberOf(o, key, decoded[string]) }

// intOf reads a member that must hold a whole number: 3 and 3.0 alike, as
// Python compares them.
func intOf(o *object, key string) (int, kind) { return memberOf(o, key, wholeNumber) }

// wholeNumber reads a JSON number with an integer value that fits an int.
func wholeNumber(raw json.RawMessage) (int, bool) {
	raw = bytes.TrimSpace(raw)
	var num json.Number
	// json.Number would also take a string holding a number.
	if len(raw) == 0 || raw[0] == '"' || json.Unmarshal(raw, &num) != nil {
		return 0, false
	}
	if n, err := strconv.ParseInt(num.String(), 10, 0); err == nil {
		return int(n), true
	}
	f, err := strconv.ParseFloat(num.String(), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int(f), true
}

// objectOf reads a member that holds an object.
func objectOf(o *object, key string) (*object, kind) {
	return memberOf(o, key, func(raw json.RawMessage) (*object, bool) {
		sub, err := parseObject(raw)
		return sub, err == nil
	})
}

// arrayOf reads a member that holds an array, as its raw items.
func arrayOf(o *object, key string) ([]json.RawMessage, kind) {
	return memberOf(o, key, func(raw json.RawMessage) ([]json.RawMessage, bool) {
		if json.Valid(raw) {
			return splitArray(raw)
		}
		return decoded[[]json.RawMessage](raw)
	})
}

// jsonProblem says in plain words why data is not the JSON it should be,
// without Go's type names.
func jsonProblem(data []byte, err error) string {
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		line, col := position(data, syn.Offset)
		return fmt.Sprintf("it is not valid JSON (line %d, column %d)", line, col)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		if len(bytes.TrimSpace(data)) == 0 {
			return "it is empty"
		}
		return "it ends in the middle of its JSON"
	case errors.Is(err, errNotObject):
		return "it is JSON, but not an object"
	}
	return "it is not valid JSON"
}

// position is the 1-based line and column of a byte offset.
func position(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	before := data[:max(offset-1, 0)]
	line = bytes.Count(before, []byte("\n")) + 1
	col = len(before) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// quote shows a value read from a file in a message: quoted, with control
// characters escaped and cut to 60 characters, so that a planted value can
// neither forge lines nor flood the terminal.
func quote(s string) string {
	if r := []rune(s); len(r) > 60 {
		s = string(r[:60]) + "…"
	}
	return strconv.QuoteToGraphic(s)
}
