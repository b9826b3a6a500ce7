package cmd

import (
	"github.com/sharedos/sharedos/pkg/grantfile"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/tokens"
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

// contextFromGrantFiles completes e's context from the context of the token's grant
// files (as every command takes its context): each field no flag gave is the files'
// (files that disagree on a field are a usage error naming both). An actor is required
// from one or the other.
func contextFromGrantFiles(e *tokens.NewEntry, grants []string, getwd func() (string, error)) error {
	var loaded []*grantfile.File
	for _, gf := range grants {
		abs, err := absPath(gf, getwd)
		if err != nil {
			return usageError("", "--grants %s: %v", gf, err)
		}
		gfile, err := grantfile.Load(abs)
		if err != nil {
			return usageError("'sharedos grants lint FILE' lists every problem", "--grants: %v", err)
		}
		loaded = append(loaded, gfile)
	}
	fc, err := grantFilesContext(loaded)
	if err != nil {
		return err
	}
	c := &e.Context
	if c.World == "" {
		c.World = fc.World
	}
	if c.Purpose == "" {
		c.Purpose = fc.Purpose
	}
	if c.Actor == (kernel.Address{}) && fc.Actor != nil {
		c.Actor = *fc.Actor
	}
	if c.Actor == (kernel.Address{}) {
		return usageError("pass --as kind:id (e.g. --as agent:helper), or --grants FILE whose context names the actor",
			"tokens create needs an actor: no --as, and no grant file's context names one")
	}
	if c.Owner == nil {
		c.Owner = fc.Owner
	}
	if c.Authority == nil {
		c.Authority = fc.Authority
	}
	return nil
}
