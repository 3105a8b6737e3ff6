package main

import (
	"fmt"
	"strings"

	"peal/config"
	"peal/policy"
)

// ConfigCmd is `peal config`: the resolved configuration and where each value
// came from.
type ConfigCmd struct {
	configFlags
	JSON bool `name:"json" help:"Print {\"key\": {\"value\": …, \"source\": …}} instead of a table."`
}

// keyReport is one key of `peal config --json`.
type keyReport struct {
	Value  any           `json:"value"`
	Source config.Source `json:"source"`
	// Required marks the keys `peal run` cannot do without.
	Required bool `json:"required,omitempty"`
}

// Run prints every key with its value and source. A value that does not
// parse exits 1 exactly as `peal run` would; anything else is printed, and an
// unset key that a run requires is marked.
func (c *ConfigCmd) Run(e *env) error {
	cfg, err := c.load(e)
	if err != nil {
		return failf("%v", err)
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintf(e.stderr, "peal: warning: %s\n", w)
	}
	if c.JSON {
		out := make(map[string]keyReport, len(config.Keys))
		for _, k := range config.Keys {
			out[k.Name] = keyReport{Value: cfg.Value(k.Name), Source: cfg.Sources[k.Name], Required: k.Required}
		}
		return printJSON(e.stdout, out)
	}
	width := 0
	for _, k := range config.Keys {
		width = max(width, len(k.Name))
	}
	for _, k := range config.Keys {
		mark := ""
		if k.Required && cfg.Value(k.Name) == nil {
			mark = "  <- required by peal run"
		}
		fmt.Fprintf(e.stdout, "%-*s = %-40s (%s)%s\n", width, k.Name, tomlText(cfg.Value(k.Name)), cfg.Sources[k.Name], mark)
	}
	// The values are shown as they were set; the confinement is described
	// with the paths a run makes of them.
	resolved := *cfg
	var desc policy.Description
	if err = resolved.ResolvePaths(); err == nil {
		desc, err = policy.Describe(&resolved)
	}
	lines := desc.Lines("  ")
	if err != nil {
		lines = []string{err.Error()}
	}
	fmt.Fprintln(e.stdout, "\nconfinement on this machine:")
	for _, l := range lines {
		fmt.Fprintln(e.stdout, "  "+l)
	}
	return nil
}

// tomlText shows a value as it would be written in the TOML file.
func tomlText(v any) string {
	switch x := v.(type) {
	case nil:
		return "(unset)"
	case string:
		return fmt.Sprintf("%q", x)
	case []string:
		quoted := make([]string, len(x))
		for i, s := range x {
			quoted[i] = fmt.Sprintf("%q", s)
		}
		return "[" + strings.Join(quoted, ", ") + "]"
	case []config.DismissPattern:
		parts := make([]string, len(x))
		for i, p := range x {
			parts[i] = fmt.Sprintf("{pattern = %q, reason = %q}", p.Pattern, p.Reason)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v)
}
