package report

import (
	"encoding/json"
	"io"
)

// JSON writes the report as an indented JSON document (see docs/behaviour.md
// for its fields).
func JSON(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
