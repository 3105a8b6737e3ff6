package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"

	"peal/internal/safefs"
)

// tfSettingsPath is where a ticketflow project keeps its settings, relative
// to the repository.
const tfSettingsPath = ".tf/config/settings.json"

// tfSettings is the part of ticketflow's settings.json that peal reads.
type tfSettings struct {
	Workflow struct {
		Escalation struct {
			Enabled    *bool `json:"enabled"`
			MaxRetries *int  `json:"maxRetries"`
			Models     struct {
				Fixer                 *string `json:"fixer"`
				ReviewerSecondOpinion *string `json:"reviewerSecondOpinion"`
				Worker                *string `json:"worker"`
			} `json:"models"`
		} `json:"escalation"`
		FailOn *[]string `json:"failOn"`
	} `json:"workflow"`
}

// tfSettingsLayer reads the escalation settings and failOn of a ticketflow
// project, a layer below peal's own file, so that a project's settings apply
// unless peal is told otherwise. A settings file that cannot be used is a
// warning, never a failure.
func tfSettingsLayer(repo string) (layer, []string) {
	l := layer{source: SourceTFSettings, values: map[string]any{}}
	if repo == "" {
		return l, nil
	}
	path := filepath.Join(repo, tfSettingsPath)
	data, err := safefs.ReadFile(path, maxConfigFile)
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return l, []string{fmt.Sprintf("ignoring ticketflow settings %s: %v", path, safefs.Reason(err))}
	}
	var s tfSettings
	if err := json.Unmarshal(data, &s); err != nil {
		return l, []string{fmt.Sprintf("ignoring ticketflow settings %s: %v", path, err)}
	}
	var warnings []string
	esc := s.Workflow.Escalation
	if esc.Enabled != nil {
		l.values["escalation.enabled"] = *esc.Enabled
	}
	if n := esc.MaxRetries; n != nil {
		if *n < 0 || int64(*n) > math.MaxUint32 {
			warnings = append(warnings, fmt.Sprintf("ignoring workflow.escalation.maxRetries %d in %s: it must be a count from 0 to %d", *n, path, uint32(math.MaxUint32)))
		} else {
			l.values["escalation.max_retries"] = uint64(*n)
		}
	}
	// A null model means "the base model", as in ticketflow: no value here.
	for name, model := range map[string]*string{
		"escalation.fixer":                   esc.Models.Fixer,
		"escalation.reviewer_second_opinion": esc.Models.ReviewerSecondOpinion,
		"escalation.worker":                  esc.Models.Worker,
	} {
		if model != nil && *model != "" {
			l.values[name] = *model
		}
	}
	if s.Workflow.FailOn != nil {
		v, err := checkSeverities(*s.Workflow.FailOn)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("ignoring %s: workflow.failOn: %v", path, err))
		} else {
			l.values["fail_on"] = v
		}
	}
	return l, warnings
}
