// Package jsonobj holds the JSON objects of the files peal rewrites but does
// not own alone (state.json, the retry-state store shared with ticketflow,
// the sessions and notes): an object read keeps its members in order and
// each value as written, so that a rewrite changes only what peal sets, and
// typed readers of one member tell a missing or null member from one of the
// wrong type. Problem and Quote put what is wrong with a file into a plain,
// bounded line. It imports nothing of peal.
package jsonobj

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// Object is a JSON object kept as it was written: its members in order, each
// value as its original text. Rewriting a file through it changes only the
// members peal sets: a number written 1.0, a null, a member peal does not
// know all stay as they were.
type Object struct {
	members []member
}

type member struct {
	key   string
	value json.RawMessage
}

// ErrNotObject: the text is JSON, but not an object.
var ErrNotObject = errors.New("not a JSON object")

// Parse reads one JSON object and nothing after it. Text that is
// valid JSON is split where its members begin and end (splitObject); other
// text goes through encoding/json's decoder, which says where and why it
// is not JSON.
func Parse(data []byte) (*Object, error) {
	if json.Valid(data) {
		return splitObject(data)
	}
	return Decode(data)
}

// Decode is Parse through json.Decoder.
func Decode(data []byte) (*Object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		if err := skipRest(dec); err != nil {
			return nil, err
		}
		return nil, ErrNotObject
	}
	o := &Object{}
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

// Get returns the value of key: the last one when the key is repeated, as
// Python's json module and Go's both read it.
func (o *Object) Get(key string) (json.RawMessage, bool) {
	for i := len(o.members) - 1; i >= 0; i-- {
		if o.members[i].key == key {
			return o.members[i].value, true
		}
	}
	return nil, false
}

// Has reports whether the object has member key.
func (o *Object) Has(key string) bool {
	_, ok := o.Get(key)
	return ok
}

// Set gives key the JSON form of v: in the place of its last occurrence
// (earlier repetitions go), or as a new last member.
func (o *Object) Set(key string, v any) {
	raw, err := Marshal(v)
	if err != nil {
		// Only peal's own values are set, all of which marshal.
		panic(fmt.Sprintf("jsonobj: marshaling %s: %v", key, err))
	}
	o.SetRaw(key, raw)
}

// SetRaw is Set with a value that is already JSON text.
func (o *Object) SetRaw(key string, raw json.RawMessage) {
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

// Delete removes every member named key.
func (o *Object) Delete(key string) {
	out := o.members[:0]
	for _, m := range o.members {
		if m.key != key {
			out = append(out, m)
		}
	}
	o.members = out
}

// Clone is a copy of the object whose members can be changed apart.
func (o *Object) Clone() *Object {
	return &Object{members: append([]member(nil), o.members...)}
}

// Compact is the object's JSON text, values as written.
func (o *Object) Compact() []byte {
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
// is printable ASCII without a quote or a backslash, as Marshal writes it
// otherwise.
func appendKey(b []byte, key string) []byte {
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			k, _ := Marshal(key)
			return append(b, k...)
		}
	}
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"')
}

// File is the object as a file's text: indented by two spaces, as both
// ticketflow and Peal write their files, and ending in a newline. Only the
// layout changes: json.Indent keeps every number and string as written.
func (o *Object) File() []byte {
	compact := o.Compact()
	var b bytes.Buffer
	b.Grow(2*len(compact) + 64)
	if err := json.Indent(&b, compact, "", "  "); err != nil {
		panic(fmt.Sprintf("jsonobj: indenting a document: %v", err)) // every value was valid JSON
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// Array is the JSON text of raw values.
func Array(items []json.RawMessage) json.RawMessage {
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

// Marshal is json.Marshal without HTML escaping, so that a model name such
// as "a<b>" is written as it is.
func Marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// The readers below interpret one raw value. Kind says what it was, so that
// a caller can tell a missing or null member (often fine) from one of the
// wrong type.
type Kind int

const (
	Missing Kind = iota
	Null
	OK
	Wrong
)

func IsNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// memberOf reads member key with read, which tells whether the value is of
// the type the member must hold.
func memberOf[T any](o *Object, key string, read func(json.RawMessage) (T, bool)) (T, Kind) {
	var zero T
	raw, ok := o.Get(key)
	switch {
	case !ok:
		return zero, Missing
	case IsNull(raw):
		return zero, Null
	}
	v, ok := read(raw)
	if !ok {
		return zero, Wrong
	}
	return v, OK
}

// Decoded is a read of memberOf for the types encoding/json decodes as such.
func Decoded[T any](raw json.RawMessage) (T, bool) {
	var v T
	return v, json.Unmarshal(raw, &v) == nil
}

// StringOf reads a string member.
func StringOf(o *Object, key string) (string, Kind) { return memberOf(o, key, Decoded[string]) }

// IntOf reads a member that must hold a whole number: 3 and 3.0 alike, as
// Python compares them.
func IntOf(o *Object, key string) (int, Kind) { return memberOf(o, key, WholeNumber) }

// WholeNumber reads a JSON number with an integer value that fits an int.
func WholeNumber(raw json.RawMessage) (int, bool) {
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

// ObjectOf reads a member that holds an object.
func ObjectOf(o *Object, key string) (*Object, Kind) {
	return memberOf(o, key, func(raw json.RawMessage) (*Object, bool) {
		sub, err := Parse(raw)
		return sub, err == nil
	})
}

// ArrayOf reads a member that holds an array, as its raw items.
func ArrayOf(o *Object, key string) ([]json.RawMessage, Kind) {
	return memberOf(o, key, func(raw json.RawMessage) ([]json.RawMessage, bool) {
		if json.Valid(raw) {
			return splitArray(raw)
		}
		return Decoded[[]json.RawMessage](raw)
	})
}

// Problem says in plain words why data is not the JSON it should be,
// without Go's type names.
func Problem(data []byte, err error) string {
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		line, col := Position(data, syn.Offset)
		return fmt.Sprintf("it is not valid JSON (line %d, column %d)", line, col)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		if len(bytes.TrimSpace(data)) == 0 {
			return "it is empty"
		}
		return "it ends in the middle of its JSON"
	case errors.Is(err, ErrNotObject):
		return "it is JSON, but not an object"
	}
	return "it is not valid JSON"
}

// Position is the 1-based line and column of a byte offset.
func Position(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	before := data[:max(offset-1, 0)]
	line = bytes.Count(before, []byte("\n")) + 1
	col = len(before) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// Quote shows a value read from a file in a message: quoted, with control
// characters escaped and cut to 60 characters, so that a planted value can
// neither forge lines nor flood the terminal.
func Quote(s string) string {
	if r := []rune(s); len(r) > 60 {
		s = string(r[:60]) + "…"
	}
	return strconv.QuoteToGraphic(s)
}
