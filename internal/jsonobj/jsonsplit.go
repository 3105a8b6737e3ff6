package jsonobj

import "encoding/json"

// The splitters below take JSON text that json.Valid accepted apart into
// its members or items, each kept as its original text, without decoding
// anything but the keys. json.Decoder gives the same parts, at the price of
// an allocation for every value it reads (it builds an error at the end of
// each one, then drops it): reading and rewriting a retry state, which
// happens twice per task, spent most of its time there.

// splitObject splits valid JSON text into the members of its object;
// ErrNotObject when the value is not an object.
func splitObject(data []byte) (*Object, error) {
	o := &Object{}
	ok, err := splitParts(data, '{', '}', func(i int) (int, error) {
		end := stringEnd(data, i)
		key, err := jsonKey(data[i:end])
		if err != nil {
			return 0, err
		}
		i = skipSpace(data, skipSpace(data, end)+1) // past the colon
		end = valueEnd(data, i)
		o.members = append(o.members, member{key, json.RawMessage(data[i:end:end])})
		return end, nil
	})
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, ErrNotObject
	}
	return o, nil
}

// splitArray splits valid JSON text into the items of its array; false
// when the value is not an array.
func splitArray(data []byte) ([]json.RawMessage, bool) {
	items := []json.RawMessage{}
	ok, _ := splitParts(data, '[', ']', func(i int) (int, error) {
		end := valueEnd(data, i)
		items = append(items, json.RawMessage(data[i:end:end]))
		return end, nil
	})
	if !ok {
		return nil, false
	}
	return items, true
}

// splitParts walks the parts (members or items) of the valid JSON value in
// data, which must open with open (false otherwise) and close with close:
// part reads the part that starts at its index and returns where it ends.
func splitParts(data []byte, open, close byte, part func(i int) (int, error)) (bool, error) {
	i := skipSpace(data, 0)
	if data[i] != open {
		return false, nil
	}
	i = skipSpace(data, i+1)
	if data[i] == close {
		return true, nil
	}
	for {
		end, err := part(i)
		if err != nil {
			return true, err
		}
		i = skipSpace(data, end)
		if data[i] == close {
			return true, nil
		}
		i = skipSpace(data, i+1) // past the comma
	}
}

// jsonKey is the string a quoted key stands for. Plain ASCII is taken as
// it is; anything with an escape or another byte is decoded by
// encoding/json, which reads it exactly as its decoder would.
func jsonKey(quoted []byte) (string, error) {
	plain := true
	for _, c := range quoted[1 : len(quoted)-1] {
		if c == '\\' || c >= 0x80 {
			plain = false
			break
		}
	}
	if plain {
		return string(quoted[1 : len(quoted)-1]), nil
	}
	var key string
	err := json.Unmarshal(quoted, &key)
	return key, err
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// stringEnd is the index just past the string that starts at data[i].
func stringEnd(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// valueEnd is the index just past the value that starts at data[i].
func valueEnd(data []byte, i int) int {
	switch data[i] {
	case '"':
		return stringEnd(data, i)
	case '{', '[':
		depth := 0
		for ; i < len(data); i++ {
			switch data[i] {
			case '"':
				i = stringEnd(data, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	// A number, true, false or null runs to the next delimiter.
	for ; i < len(data); i++ {
		switch data[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}
