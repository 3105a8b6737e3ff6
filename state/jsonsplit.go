package state

import "encoding/json"

// The splitters below take JSON text that json.Valid accepted apart into
// its members or items, each kept as its original text, without decoding
// anything but the keys. json.Decoder gives the same parts, at the price of
// an allocation for every value it reads (it builds an error at the end of
// each one, then drops it): reading and rewriting a retry state, which
// happens twice per task, spent most of its time there.

// splitObject splits valid JSON text into the members of its object;
// errNotObject when the value is not an object.
func splitObject(data []byte) (*object, error) {
	i := skipSpace(data, 0)
	if data[i] != '{' {
		return nil, errNotObject
	}
	o := &object{}
	i = skipSpace(data, i+1)
	if data[i] == '}' {
		return o, nil
	}
	for {
		end := stringEnd(data, i)
		key, err := jsonKey(data[i:end])
		if err != nil {
			return nil, err
		}
		i = skipSpace(data, skipSpace(data, end)+1) // past the colon
		end = valueEnd(data, i)
		o.members = append(o.members, member{key, json.RawMessage(data[i:end:end])})
		i = skipSpace(data, end)
		if data[i] == '}' {
			return o, nil
		}
		i = skipSpace(data, i+1) // past the comma
	}
}

// splitArray splits valid JSON text into the items of its array; false
// when the value is not an array.
func splitArray(data []byte) ([]json.RawMessage, bool) {
	i := skipSpace(data, 0)
	if data[i] != '[' {
		return nil, false
	}
	items := []json.RawMessage{}
	i = skipSpace(data, i+1)
	if data[i] == ']' {
		return items, true
	}
	for {
		end := valueEnd(data, i)
		items = append(items, json.RawMessage(data[i:end:end]))
		i = skipSpace(data, end)
		if data[i] == ']' {
			return items, true
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
