package host

import (
	"encoding/json"
	"errors"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sharedos/sharedos/pkg/grantfile"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// isContextConflict reports whether LoadSet refused the files because their context
// blocks disagree.
func isContextConflict(err error) bool {
	var ge *grantfile.Error
	return errors.As(err, &ge) && strings.HasPrefix(ge.Field, "context.") && strings.Contains(ge.Message, "conflicts with")
}

// refusedContext reads only the context blocks of grant files that were refused as a
// whole, so the run still knows its actor and owner. A context confers no authority.
func refusedContext(_ error, paths []string) grantfile.Context {
	var out grantfile.Context
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil || len(data) > grantfile.MaxFileSize {
			continue
		}
		var doc struct {
			Context map[string]any `yaml:"context"`
		}
		if yaml.Unmarshal(data, &doc) != nil {
			continue
		}
		str := func(k string) string { s, _ := doc.Context[k].(string); return s }
		addr := func(k string) *kernel.Address {
			v, ok := doc.Context[k]
			if !ok {
				return nil
			}
			var text string
			switch x := v.(type) {
			case string:
				text = x
			default:
				b, err := json.Marshal(x)
				if err != nil {
					return nil
				}
				text = string(b)
			}
			a, err := kernel.ParseAddress(text)
			if err != nil {
				return nil
			}
			return &a
		}
		if out.World == "" {
			out.World = str("world")
		}
		if out.Purpose == "" {
			out.Purpose = str("purpose")
		}
		if out.Actor == nil {
			out.Actor = addr("actor")
		}
		if out.Owner == nil {
			out.Owner = addr("owner")
		}
		if out.Authority == nil {
			out.Authority = addr("authority")
		}
	}
	return out
}
