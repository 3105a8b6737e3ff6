package policy

import (
	"slices"
	"strings"

	"peal/confine"
	"peal/phase"
)

// Refusal is what the confinement refused a call that ended: the line that
// explains its failure by the confinement ("" when nothing points at it),
// whether the call's output bore it out (a denial in it, or the refused host
// named), and what the run's proxy refused it (at most 16 named, Count in
// all).
type Refusal struct {
	Line    string
	Borne   bool
	Refused []string
	Count   int
}

// Refused is what the run's confinement refused a call (call its
// confinement, dir its folder) that ended with res, which the proxy then
// forgets. explain asks for the line that explains a failure; lastResort
// gives, when the output names nothing, the likeliest cause of a failure
// that names none (a side request's refusal is no cause): never for a
// failure that says its own cause.
func (c *Rules) Refused(call *confine.Call, dir string, res phase.Result, explain, lastResort bool) Refusal {
	if c == nil || call == nil || res.CallID == "" {
		return Refusal{}
	}
	refused, count := c.proxy.Refusals(res.CallID)
	c.proxy.Forget(res.CallID)
	out := Refusal{Count: count}
	if explain {
		out.Line = confine.Explain(&call.Access, dir, strings.Split(res.Stdout+"\n"+res.Stderr, "\n"), refused)
		out.Borne = out.Line != ""
	}
	if out.Line == "" && lastResort {
		out.Line = confine.LastRefusal(refused)
	}
	for _, ref := range refused {
		what := ref.Host
		if ref.Request != "" {
			// A request the model endpoint refused: what it asked.
			what = ref.Request + " (" + ref.Host + ")"
		}
		if len(out.Refused) < 16 && !slices.Contains(out.Refused, what) {
			out.Refused = append(out.Refused, what)
		}
	}
	return out
}
