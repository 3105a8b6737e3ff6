package main

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/alecthomas/kong"

	"peal/config"
)

// configFlags are the flags of every command that resolves the
// configuration: --config and one flag per configuration key. The key flags
// are not written out here: keyFlags builds them from config.Keys.
type configFlags struct {
	Config string `help:"TOML config file (no file is read without it)." placeholder:"PATH" type:"path"`
	kong.Plugins
}

// The keys each command reads. A command accepts the flag of every key, so
// that the command line of a run works unchanged, but its help lists only
// those it reads.
var (
	statusKeys = []string{"plan_path", "repo_path", "state_dir", "run_summary_path", "normalize_plan",
		"knowledge_dir", "ticket_id", "ticket_prefix", "escalation.enabled", "escalation.max_retries"}
	storeKeys = []string{"repo_path", "state_dir", "knowledge_dir"}
	showKeys  = append(slices.Clone(storeKeys), "escalation.enabled", "escalation.max_retries",
		"escalation.fixer", "escalation.reviewer_second_opinion", "escalation.worker")
	detectKeys = []string{"fail_on"}
	cleanKeys  = []string{"repo_path", "state_dir"}
	doctorKeys = []string{"repo_path", "state_dir", "agent_kind", "agent_cmd", "fallback_agent_kind", "fallback_agent_cmd", "stet_path"}

	// needsPlan notes the keys that run and status cannot do without.
	needsPlan = requiredNotes()
	// storeNotes: the retry-state commands take the working folder for an
	// unset repo (config.Inputs.DefaultRepo).
	storeNotes = map[string]string{"repo_path": "unset: the working folder"}
)

func requiredNotes() map[string]string {
	notes := map[string]string{}
	for _, k := range config.Keys {
		if k.Required {
			notes[k.Name] = "required"
		}
	}
	return notes
}

// keyFlags builds the flags of the configuration keys, for kong: a struct
// with one field per key that has a flag, of the Go type of its Config field,
// parsed by keyMapper. Keys not in shown are hidden from help (nil shows all);
// notes add what a key means to this command to its help.
func keyFlags(shown []string, notes map[string]string) kong.Plugins {
	var fields []reflect.StructField
	for _, k := range config.Keys {
		if k.Flag == "" {
			continue
		}
		tag := fmt.Sprintf(`name:%q key:%q type:"configkey"`, k.Flag, k.Name)
		if k.Kind == config.KindBool {
			tag += ` negatable:""`
		}
		if note := notes[k.Name]; note != "" {
			tag += fmt.Sprintf(` note:%q`, note)
		}
		if shown != nil && !slices.Contains(shown, k.Name) {
			tag += ` hidden:""`
		}
		fields = append(fields, reflect.StructField{Name: k.Field, Type: k.GoType, Tag: reflect.StructTag(tag)})
		if k.OldFlag != "" {
			// The old name sets the same key, hidden from help.
			old := fmt.Sprintf(`name:%q key:%q was:"" type:"configkey" hidden:""`, k.OldFlag, k.Name)
			if k.Kind == config.KindBool {
				old += ` negatable:""`
			}
			fields = append(fields, reflect.StructField{Name: k.Field + "Was", Type: k.GoType, Tag: reflect.StructTag(old)})
		}
	}
	return kong.Plugins{reflect.New(reflect.StructOf(fields)).Interface()}
}

// keyMapper parses a key's flag with the parser of its variable and its TOML
// value (config.Key.ParseText), so that a value means the same in every layer
// and a bad one is a usage error naming the flag. A boolean flag stands alone
// (--parallel), negated (--no-parallel) or with a value (--parallel=false,
// --parallel false).
type keyMapper struct{}

func (keyMapper) Decode(ctx *kong.DecodeContext, target reflect.Value) error {
	k := flagKey(ctx.Value)
	var text string
	if target.Kind() == reflect.Bool {
		switch tok := ctx.Scan.Peek(); {
		case tok.Type == kong.FlagValueToken: // --x=v, or the value kong gives --no-x
			text = fmt.Sprint(ctx.Scan.Pop().Value)
		case tok.InferredType() == kong.UntypedToken && boolWord(fmt.Sprint(tok.Value)):
			text = fmt.Sprint(ctx.Scan.Pop().Value)
		default:
			text = "true"
		}
	} else if tok := ctx.Scan.Peek(); numeric(k.Kind) && negativeNumber(tok) {
		// A negative number reads as a short flag to the parser, whose
		// message would then suggest --flag="-1", refused just the same:
		// the key's own parser says what it wants instead.
		text = fmt.Sprint(ctx.Scan.Pop().Value)
	} else {
		tok, err := ctx.Scan.PopValue(k.Placeholder())
		if err != nil && k.Kind == config.KindArgs && !tok.IsEOL() {
			err = nil // extra arguments start with dashes: --stet-run-args "--verify --context 256k"
		}
		if err != nil {
			return err
		}
		text = fmt.Sprint(tok.Value)
	}
	if k.Kind == config.KindShell {
		// One command per use of the flag, each added to those before it,
		// so that a command keeps its spaces and commas.
		cmds, err := k.ParseShellCommand(text)
		if err != nil {
			return err
		}
		target.Set(reflect.AppendSlice(target, reflect.ValueOf(cmds)))
		return nil
	}
	v, err := k.ParseText(text)
	if err != nil {
		return err
	}
	target.Set(reflect.ValueOf(v))
	return nil
}

// numeric reports whether a key of kind k holds a number.
func numeric(k config.Kind) bool {
	return k == config.KindU32 || k == config.KindU64 || k == config.KindSeconds || k == config.KindF64
}

// negativeNumber reports whether tok is an argument such as -1 or -0.5.
func negativeNumber(tok kong.Token) bool {
	v, ok := tok.Value.(string)
	if !ok || tok.Type != kong.UntypedToken || !strings.HasPrefix(v, "-") {
		return false
	}
	_, err := strconv.ParseFloat(v, 64)
	return err == nil
}

// boolWord reports whether a word after a boolean flag is meant as its value:
// true or false, or a word of another convention (yes, 0, …) that the parser
// then refuses with a message naming the flag.
func boolWord(s string) bool {
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "1", "0", "y", "n", "t", "f":
		return true
	}
	return false
}

// IsBoolFromValue makes the flags of boolean keys take no value by default.
func (keyMapper) IsBoolFromValue(target reflect.Value) bool { return target.Kind() == reflect.Bool }

// PlaceHolder is the key's placeholder, e.g. SEC or fail|warn|defer.
func (keyMapper) PlaceHolder(f *kong.Flag) string { return flagKey(f.Value).Placeholder() }

func flagKey(v *kong.Value) config.Key {
	k, ok := config.KeyByName(v.Tag.Get("key"))
	if !ok {
		panic("flag --" + v.Name + " has no configuration key")
	}
	return k
}

// flagValues collects the configuration flags actually given on the command
// line, keyed by configuration key, as the key's Go type, and the old names
// of flags among them (a key's flag given under both names takes the new
// one's value).
func flagValues(kctx *kong.Context) (map[string]any, []string) {
	out := map[string]any{}
	var old []string
	for _, f := range kctx.Flags() {
		key := f.Tag.Get("key")
		if key == "" || !f.Set {
			continue
		}
		if f.Tag.Has("was") {
			old = append(old, f.Name)
			if _, set := out[key]; set {
				continue
			}
		}
		out[key] = f.Target.Interface()
	}
	return out, old
}

// inputs are the layers of the configuration a command was given.
func (f *configFlags) inputs(e *env) config.Inputs {
	flags, old := flagValues(e.kctx)
	return config.Inputs{Flags: flags, OldFlags: old, Env: e.environ, ConfigPath: f.Config}
}

// load resolves the configuration from the flags, the environment and the
// --config file. It validates nothing beyond the values themselves: each
// command checks what it needs.
func (f *configFlags) load(e *env) (*config.Config, error) {
	return config.Load(f.inputs(e))
}

// helpValue writes each configuration flag's help from its key, with the
// variable that also sets it and its default.
func helpValue(v *kong.Value) string {
	if v.Tag == nil || v.Tag.Get("key") == "" {
		return v.Help
	}
	k := flagKey(v)
	help := k.Help
	if note := v.Tag.Get("note"); note != "" {
		help += " (" + note + ")"
	}
	return fmt.Sprintf("%s [%s; default: %s]", help, k.Env(), k.DefaultText())
}

// suggestFlag adds to the parser's error for an unknown flag that it made no
// guess for the flag of the key the person most likely meant: the key's
// own name written as a flag (--plan-path for --plan), or a key misspelt
// further than the parser guesses.
func suggestFlag(msg string) string {
	name, ok := strings.CutPrefix(msg, "unknown flag --")
	if !ok || strings.ContainsAny(name, " ,") {
		return msg
	}
	names := make([]string, len(config.Keys))
	for i, k := range config.Keys {
		names[i] = k.Name
	}
	base, negated := strings.CutPrefix(name, "no-")
	k, ok := config.KeyByName(config.Nearest(base, names))
	switch {
	case !ok:
		return msg
	case k.Flag == "":
		return fmt.Sprintf("%s: %s has no flag; set %s or %s in the config file", msg, k.Name, k.Env(), k.Name)
	case negated && k.Kind == config.KindBool:
		return fmt.Sprintf("%s, did you mean %q?", msg, "--no-"+k.Flag)
	}
	return fmt.Sprintf("%s, did you mean %q?", msg, k.FlagName())
}
