package jsonobj

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzSplitMatchesDecoder: for any valid JSON text, the splitters give the
// parts json.Decoder and json.Unmarshal give: the same keys in the same
// order, each value and item byte for byte; and the same refusal of a value
// of another kind.
func FuzzSplitMatchesDecoder(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { } `, `[]`, `[ ]`, `{"a":1}`, "{\n \"a\" : [1, {\"b\": \"}]\\\"\"}] ,\"a\":null}\n",
		`{"k\u00e9y":"v","\"q\"":true,"é":-1.5e3,"":{}}`, `["x", [ ], {"y": [1,2]}, "\\", false]`,
		`"text"`, `12`, `null`, `{"a":"\ud800"}`, "{\"\xff\":1}", `{"a":{"b":{"c":[[[]]]}}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		if !json.Valid([]byte(data)) {
			return
		}
		got, gerr := splitObject([]byte(data))
		want, werr := Decode([]byte(data))
		if (gerr == nil) != (werr == nil) || (gerr != nil && !errors.Is(gerr, ErrNotObject)) {
			t.Fatalf("split: %v, decoder: %v", gerr, werr)
		}
		if gerr == nil && !reflect.DeepEqual(got.members, want.members) {
			t.Fatalf("split %q\ndecoder %q", got.members, want.members)
		}
		items, ok := splitArray([]byte(data))
		var wantItems []json.RawMessage
		wantOK := json.Unmarshal([]byte(data), &wantItems) == nil && !IsNull([]byte(data))
		if ok != wantOK || (ok && !reflect.DeepEqual(items, wantItems)) {
			t.Fatalf("split %v %q\nunmarshal %v %q", ok, items, wantOK, wantItems)
		}
	})
}

// FuzzAppendKey: a key is written as Marshal writes it.
func FuzzAppendKey(f *testing.F) {
	for _, s := range []string{"", "attempts", "a<b>&c", "quote\"d", `back\slash`, "tab\t", "\x7f", "é", "\u2028", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		want, err := Marshal(key)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendKey([]byte("x"), key); string(got) != "x"+string(want) {
			t.Fatalf("appendKey(%q) = %s, Marshal: %s", key, got[1:], want)
		}
	})
}
