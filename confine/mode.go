package confine

import "fmt"

// Mode is how strictly a call is confined.
type Mode int

const (
	// Auto enforces what the kernel allows and runs the call either way.
	Auto Mode = iota
	// On refuses to run a call whose file-system access cannot be
	// enforced.
	On
	// Off confines nothing.
	Off
)

// Modes are the modes by name, as the configuration spells them.
var Modes = []string{"auto", "on", "off"}

func (m Mode) String() string {
	if m < 0 || int(m) >= len(Modes) {
		return fmt.Sprintf("Mode(%d)", int(m))
	}
	return Modes[m]
}

// ParseMode reads a mode by name.
func ParseMode(s string) (Mode, error) {
	for i, name := range Modes {
		if s == name {
			return Mode(i), nil
		}
	}
	return Auto, fmt.Errorf("confine: unknown mode %q (want auto, on or off)", s)
}
