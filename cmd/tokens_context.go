package cmd

import (
	"github.com/sharedos/sharedos/pkg/grantfile"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// grantFilesContext is the context the grant files named by `tokens create --grants`
// declare, as every other command takes it: a field set by several files must agree
// (else a usage error naming both files). The command's flags win over it.
func grantFilesContext(files []*grantfile.File) (grantfile.Context, error) {
	var out grantfile.Context
	from := map[string]string{}
	addr := func(name string, dst **kernel.Address, v *kernel.Address, file string) error {
		if v == nil {
			return nil
		}
		if *dst != nil && **dst != *v {
			return usageError("pass --"+name+" to choose, or make the grant files agree",
				"the grant files disagree on the context's %s: %s in %s, %s in %s", name, **dst, from[name], *v, file)
		}
		*dst, from[name] = v, file
		return nil
	}
	str := func(name string, dst *string, v, file string) error {
		if v == "" {
			return nil
		}
		if *dst != "" && *dst != v {
			return usageError("pass --"+name+" to choose, or make the grant files agree",
				"the grant files disagree on the context's %s: %q in %s, %q in %s", name, *dst, from[name], v, file)
		}
		*dst, from[name] = v, file
		return nil
	}
	for _, f := range files {
		c := f.Context
		for _, err := range []error{addr("as", &out.Actor, c.Actor, f.Path), addr("owner", &out.Owner, c.Owner, f.Path),
			addr("authority", &out.Authority, c.Authority, f.Path), str("world", &out.World, c.World, f.Path),
			str("purpose", &out.Purpose, c.Purpose, f.Path)} {
			if err != nil {
				return grantfile.Context{}, err
			}
		}
	}
	return out, nil
}

// tokenAddress is the value of one context flag of tokens create: the flag's when
// given, else the grant files' (nil/"" when neither).
func tokenAddress(flagName, flagValue string, fromFiles *kernel.Address) (*kernel.Address, error) {
	if flagValue == "" {
		return fromFiles, nil
	}
	a, err := parseAddressFlag(flagName, flagValue)
	if err != nil {
		return nil, err
	}
	return &a, nil
}
