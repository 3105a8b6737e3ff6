package config

import (
	"fmt"
	"reflect"
	"strings"

	"peal/agent"
)

// Kind says how a key's raw value is parsed, whichever layer it comes from.
type Kind int

const (
	KindString     Kind = iota
	KindPath            // a file-system path; same parsing as KindString
	KindEnum            // a string restricted to Key.Enum
	KindBool            // true/false
	KindU32             // non-negative integer below 2^32
	KindU64             // non-negative integer
	KindSeconds         // non-negative integer of seconds, at most MaxSeconds
	KindCommands        // list of command strings; env/flag text splits on commas
	KindArgs            // list of arguments; env/flag text splits on commas and whitespace
	KindPatterns        // list of {pattern, reason}; env text is "pattern|reason,..."
	KindSeverities      // list of review severities; env/flag text splits on commas
	KindList            // list of strings; env/flag text splits on commas
	KindLogLevel        // a level, or tracing-style directives such as "peal=trace,warn"
	KindF64             // non-negative decimal number
	KindShell           // list of shell commands; env text has one per line, a flag one per use
)

// MaxSeconds is the largest value of a seconds key (about 31 years): far
// beyond any real timeout or delay, and small enough that the duration, a
// doubled delay or a timeout plus the kill grace never overflows.
const MaxSeconds = 1_000_000_000

// kindNames are the names of the `kind` tag, for kinds the Go type alone does
// not tell.
var kindNames = map[string]Kind{
	"path": KindPath, "seconds": KindSeconds, "commands": KindCommands, "args": KindArgs,
	"severities": KindSeverities, "loglevel": KindLogLevel, "shell": KindShell,
}

// enumLists are the enums declared by a list that an `enum:"@name"` tag
// names: the settings' own (enums.go), and the agent kinds, those registered
// in package agent, so a new kind is accepted by agent_kind and
// fallback_agent_kind, and listed in their help and documentation, without a
// change here.
var enumLists = map[string]func() []string{
	"agent.Names":             agent.Names,
	"parallel_isolation":      valueNames(IsolationModes),
	"parallel_conflict":       valueNames(ConflictActions),
	"on_findings_remaining":   valueNames(FindingsActions),
	"on_stet_fail":            valueNames(StetFailActions),
	"log_format":              valueNames(LogFormats),
	"report_step_summary":     valueNames(StepSummaries),
	"agent_session":           valueNames(SessionModes),
	"confine":                 valueNames(ConfineModes),
	"confine_git_credentials": valueNames(GitCredentialsActions),
	"confine_tcp":             valueNames(TCPRules),
	"confine_key_proxy":       valueNames(KeyProxies),
}

// Key describes one configuration key: its names in every layer, its type,
// its default and its help. Keys are derived from the fields of Config.
type Key struct {
	Name string // TOML key (dotted inside a table)
	Flag string // flag name without dashes; "" when the key has no flag
	// OldFlag is an old name of the flag, without dashes, still taken
	// with a warning; "" for none.
	OldFlag  string
	Field    string       // name of the Config field holding the value
	GoType   reflect.Type // type of that field
	Kind     Kind
	Enum     []string
	Max      uint64 // largest number accepted
	Default  any    // nil means unset; otherwise a value as Config.Value returns it
	Required bool   // `peal run` stops when it is unset
	Help     string
	// DefaultDoc shows the default in help and docs where the value itself
	// would not say it well ("{state_dir}/run_summary.json", a long list).
	DefaultDoc  string
	placeholder string
}

// Keys is every configuration key, in the order of the Config fields. Config
// loading, validation, the flags, help and the documentation check all read it.
var Keys = deriveKeys()

// KeyByName returns the key named name.
func KeyByName(name string) (Key, bool) {
	for _, k := range Keys {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}

// Env returns the environment variable that sets the key.
func (k Key) Env() string {
	return "PEAL_" + strings.ToUpper(strings.ReplaceAll(k.Name, ".", "_"))
}

// FlagName returns "--flag" or "" when the key cannot be set by a flag.
func (k Key) FlagName() string {
	if k.Flag == "" {
		return ""
	}
	return "--" + k.Flag
}

// kindInfo is what a kind shows in the documentation and in help, and the
// Go type of a field that holds it (nil: a string; numbers are checked apart).
var kindInfo = map[Kind]struct {
	typeName, placeholder string
	goType                reflect.Type
}{
	KindString:     {"string", "TEXT", nil},
	KindPath:       {"path", "PATH", nil},
	KindBool:       {"bool", "", reflect.TypeFor[bool]()},
	KindU32:        {"u32", "N", nil},
	KindU64:        {"u64", "N", nil},
	KindSeconds:    {"seconds", "SEC", nil},
	KindCommands:   {"list of command strings", "CMDS", reflect.TypeFor[[]string]()},
	KindArgs:       {"list", "ARGS", reflect.TypeFor[[]string]()},
	KindList:       {"list of strings", "TEXTS", reflect.TypeFor[[]string]()},
	KindSeverities: {"list of severities", "SEVERITIES", reflect.TypeFor[[]string]()},
	KindPatterns:   {"list of {pattern, reason}", "", reflect.TypeFor[[]DismissPattern]()},
	KindLogLevel:   {"level or directives", "LEVEL", nil},
	KindF64:        {"number", "N", nil},
	KindShell:      {"list of shell commands", "CMD", reflect.TypeFor[[]string]()},
	KindEnum:       {"", "", nil}, // its values
}

// TypeName is the key's type as the documentation writes it.
func (k Key) TypeName() string {
	if k.Kind == KindEnum {
		return strings.Join(k.Enum, "|")
	}
	return kindInfo[k.Kind].typeName
}

// Placeholder is the word standing for the value in help, e.g. SEC or fail|warn.
func (k Key) Placeholder() string {
	if k.placeholder != "" {
		return k.placeholder
	}
	if k.Kind == KindEnum {
		return strings.Join(k.Enum, "|")
	}
	return kindInfo[k.Kind].placeholder
}

// DefaultText is the default as a variable would spell it, for help; "unset"
// when there is none.
func (k Key) DefaultText() string {
	if k.DefaultDoc != "" {
		return k.DefaultDoc
	}
	switch d := k.Default.(type) {
	case nil:
		return "unset"
	case []string:
		if len(d) == 0 {
			return "none"
		}
		return strings.Join(d, ",")
	case []DismissPattern:
		return "none"
	}
	return fmt.Sprint(k.Default)
}

// deriveKeys reads the declaration of every key from the tags of Config's
// fields; a declaration that does not hold together is a programming error
// and stops the program at start-up.
func deriveKeys() []Key {
	t := reflect.TypeFor[Config]()
	var keys []Key
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := f.Tag.Get("key")
		if name == "" {
			continue
		}
		k, err := keyOf(f, name)
		if err != nil {
			panic(fmt.Sprintf("config: field %s: %v", f.Name, err))
		}
		keys = append(keys, k)
	}
	return keys
}

func keyOf(f reflect.StructField, name string) (Key, error) {
	tag := f.Tag
	k := Key{Name: name, Field: f.Name, GoType: f.Type, Help: tag.Get("help"), DefaultDoc: tag.Get("defaultdoc"),
		placeholder: tag.Get("placeholder")}
	_, k.Required = tag.Lookup("required")
	k.OldFlag = tag.Get("wasflag")
	switch flag, ok := tag.Lookup("flag"); {
	case flag == "-":
	case ok:
		k.Flag = flag
	default:
		k.Flag = strings.NewReplacer("_", "-", ".", "-").Replace(name)
	}
	base := f.Type
	if base.Kind() == reflect.Pointer {
		base = base.Elem()
	}
	switch {
	case strings.HasPrefix(tag.Get("enum"), "@"):
		values, ok := enumLists[tag.Get("enum")[1:]]
		if !ok {
			return k, fmt.Errorf("unknown enum list %q", tag.Get("enum"))
		}
		k.Kind, k.Enum = KindEnum, values()
	case tag.Get("enum") != "":
		k.Kind, k.Enum = KindEnum, strings.Split(tag.Get("enum"), ",")
	case tag.Get("kind") != "":
		kind, ok := kindNames[tag.Get("kind")]
		if !ok {
			return k, fmt.Errorf("unknown kind %q", tag.Get("kind"))
		}
		k.Kind = kind
	case base.Kind() == reflect.Bool:
		k.Kind = KindBool
	case (base.Kind() == reflect.Uint32 || base.Kind() == reflect.Uint64) && strings.HasSuffix(name, "_sec"):
		k.Kind = KindSeconds
	case base.Kind() == reflect.Float64:
		k.Kind = KindF64
	case base.Kind() == reflect.Uint32:
		k.Kind = KindU32
	case base.Kind() == reflect.Uint64:
		k.Kind = KindU64
	case base == reflect.TypeFor[[]DismissPattern]():
		k.Kind = KindPatterns
	case base == reflect.TypeFor[[]string]():
		k.Kind = KindList
	case base.Kind() == reflect.String:
		k.Kind = KindString
	default:
		return k, fmt.Errorf("unsupported type %s", f.Type)
	}
	k.Max = maxOf(k.Kind, base)
	if !goTypeFits(k.Kind, f.Type) {
		return k, fmt.Errorf("a %s key cannot be held in a %s", k.TypeName(), f.Type)
	}
	if d, ok := tag.Lookup("default"); ok {
		v, err := parseText(k, d)
		if err != nil {
			return k, fmt.Errorf("default: %v", err)
		}
		k.Default = v
	} else if isList(k.Kind) {
		k.Default = reflect.MakeSlice(base, 0, 0).Interface()
	}
	return k, nil
}

// maxOf is the largest number a key of this kind and type can hold.
func maxOf(kind Kind, t reflect.Type) uint64 {
	switch {
	case kind == KindSeconds:
		return MaxSeconds
	case t.Kind() == reflect.Uint32:
		return 1<<32 - 1
	}
	return 1<<64 - 1
}

func goTypeFits(kind Kind, t reflect.Type) bool {
	switch kind {
	case KindU32, KindU64, KindSeconds:
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		return t.Kind() == reflect.Uint32 || t.Kind() == reflect.Uint64
	case KindF64:
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		return t.Kind() == reflect.Float64
	}
	if want := kindInfo[kind].goType; want != nil {
		return t == want
	}
	return t.Kind() == reflect.String
}

func isList(k Kind) bool {
	t := kindInfo[k].goType
	return t != nil && t.Kind() == reflect.Slice
}

// DismissReasons are the reasons stet accepts for `stet dismiss`.
var DismissReasons = []string{"false_positive", "already_correct", "wrong_suggestion", "out_of_scope"}
