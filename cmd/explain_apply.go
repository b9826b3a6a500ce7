package cmd

import (
	"path/filepath"
	"slices"

	"github.com/sharedos/sharedos/pkg/grantfile"
)

// applyOutput is what `explain --apply` prints.
type applyOutput struct {
	Applied bool   `json:"applied"`
	File    string `json:"file"`
	GrantID string `json:"grantId,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// applyFix inserts the explanation's add_grant fix into file (explain --apply). The file
// must be one of the run's grant files (grants) — so it passed the trust boundary and the grant
// takes effect on the next run. An allowed call needs nothing (exit 0, nothing written);
// a refusal no grant can fix (the namespace is off, the ceiling, invalid arguments) adds
// nothing and exits 3, like explain.
func applyFix(p *printer, grants []string, file string, out explanation) error {
	abs, err := filepath.Abs(file)
	if err != nil {
		return usageError("", "--apply %s: %v", file, err)
	}
	if !slices.Contains(grants, abs) {
		return usageError("name one of the run's grant files (--grants, SHAREDOS_GRANTS or the config file's grants)",
			"--apply %s is not one of this run's grant files", file)
	}
	res := applyOutput{File: abs}
	var add *fix
	for i := range out.Fixes {
		if out.Fixes[i].Kind == FixAddGrant {
			add = &out.Fixes[i]
		}
	}
	switch {
	case out.Allowed:
		res.Reason = "the call is already allowed; nothing was added"
	case add == nil:
		res.Reason = "no grant would make this call allowed: " + string(out.Refusal.Code)
		if len(out.Fixes) > 0 && out.Fixes[0].Kind == FixEnableNamespace {
			res.Reason = "enable the tool namespace " + out.Fixes[0].Namespace + " first; no grant was added"
		}
	default:
		if err := grantfile.InsertGrant(abs, *add.Grant); err != nil {
			return usageError("fix the grant file, or add the grant by hand ('sharedos explain … --print-grant')",
				"--apply: %v", err)
		}
		res.Applied, res.GrantID = true, add.Grant.ID
	}
	if p.format != FormatTable {
		if err := p.data(res); err != nil {
			return err
		}
	} else if res.Applied {
		p.line("added grant %s to %s", res.GrantID, res.File)
	} else {
		p.line("%s", res.Reason)
	}
	if !res.Applied && !out.Allowed {
		return &resultExit{code: ExitDenied}
	}
	return nil
}
