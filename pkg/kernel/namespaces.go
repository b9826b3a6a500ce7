package kernel

import (
	"encoding/json"
	"strconv"

	"github.com/sharedos/sharedos/internal/jscompat"
)

// ParseToolNamespaceUpdate decodes and validates a strict namespace patch: only "enable"
// and "disable", each a list of at most 256 unique identifiers, at least one non-empty,
// and no namespace in both. Every failure is a *ContractError that also matches
// ErrInvalidUpdate.
func ParseToolNamespaceUpdate(data []byte) (ToolNamespaceUpdate, error) {
	o, err := parseObject(data, "enable", "disable")
	if err != nil {
		return ToolNamespaceUpdate{}, invalidUpdate(err)
	}
	var u ToolNamespaceUpdate
	if u.Enable, _, err = o.strs("enable"); err != nil {
		return ToolNamespaceUpdate{}, invalidUpdate(err)
	}
	if u.Disable, _, err = o.strs("disable"); err != nil {
		return ToolNamespaceUpdate{}, invalidUpdate(err)
	}
	if err := u.Validate(); err != nil {
		return ToolNamespaceUpdate{}, err
	}
	return u, nil
}

// UnmarshalJSON decodes a strict patch (see ParseToolNamespaceUpdate).
func (u *ToolNamespaceUpdate) UnmarshalJSON(data []byte) error {
	v, err := ParseToolNamespaceUpdate(data)
	if err != nil {
		return err
	}
	*u = v
	return nil
}

type updateError struct{ *ContractError }

func (e updateError) Is(target error) bool {
	return target == ErrInvalidUpdate || target == ErrContract
}
func (e updateError) Unwrap() error { return e.ContractError }

func invalidUpdate(err error) error {
	if ce, ok := err.(*ContractError); ok {
		return updateError{ce}
	}
	return updateError{&ContractError{Message: err.Error()}}
}

// Validate checks the patch rules; the lists are trimmed in place.
func (u *ToolNamespaceUpdate) Validate() error {
	check := func(name string, list []string) error {
		if len(list) > 256 {
			return invalidUpdate(contractErr(name, "lists more than 256 namespaces"))
		}
		seen := make(map[string]bool, len(list))
		for i, n := range list {
			t, err := identifier(name+"."+strconv.Itoa(i), n)
			if err != nil {
				return invalidUpdate(err)
			}
			if seen[t] {
				return invalidUpdate(contractErr(name, "lists %q twice", t))
			}
			seen[t] = true
			list[i] = t
		}
		return nil
	}
	if err := check("enable", u.Enable); err != nil {
		return err
	}
	if err := check("disable", u.Disable); err != nil {
		return err
	}
	if len(u.Enable) == 0 && len(u.Disable) == 0 {
		return invalidUpdate(contractErr("", "must enable or disable at least one namespace"))
	}
	for _, e := range u.Enable {
		for _, d := range u.Disable {
			if e == d {
				return invalidUpdate(contractErr("", "namespace %q is both enabled and disabled", e))
			}
		}
	}
	return nil
}

// ApplyToolNamespaceUpdate is the standard patch semantics for settings stores:
// (current ∪ enable) − disable, sorted. Re-enabling or re-disabling is a no-op. It fails,
// changing nothing, when current or update is invalid.
func ApplyToolNamespaceUpdate(current []string, update ToolNamespaceUpdate) ([]string, error) {
	cur, err := ValidateEnabledToolNamespaces(current)
	if err != nil {
		return nil, prefixErr("current", err)
	}
	u := ToolNamespaceUpdate{Enable: append([]string(nil), update.Enable...), Disable: append([]string(nil), update.Disable...)}
	if err := u.Validate(); err != nil {
		return nil, err
	}
	set := make(map[string]bool, len(cur)+len(u.Enable))
	for _, n := range cur {
		set[n] = true
	}
	for _, n := range u.Enable {
		set[n] = true
	}
	for _, n := range u.Disable {
		delete(set, n)
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	jscompat.SortLocale(out)
	if len(out) > 256 {
		return nil, invalidUpdate(contractErr("enable", "the selection would exceed 256 namespaces"))
	}
	return out, nil
}

// StrictFields decodes raw as a JSON object whose keys must all be in allowed (exact
// match). Tool argument parsers use it to reject unknown keys.
func StrictFields(raw json.RawMessage, allowed ...string) (map[string]json.RawMessage, error) {
	o, err := parseObject(raw, allowed...)
	if err != nil {
		return nil, err
	}
	return o.fields, nil
}
