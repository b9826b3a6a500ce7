// Package grantfile loads the operator's grant files (spec 40 §3) — JSON or YAML
// documents of the form {version: 1, context?, grants: [...]} — into kernel grants, and
// serves them to the kernel as its GrantSource and DelegationChainResolver.
//
// Every grant goes through the kernel's strict decoder (json.Unmarshal into
// kernel.CapabilityGrant), so the JSON and YAML paths share one contract. YAML is read
// as a node tree and converted to JSON by this package, scalar by scalar according to its
// resolved tag, so a timestamp stays the literal text and a number never silently
// becomes a string (or the reverse). Anchors, aliases, merge keys, duplicate keys,
// custom tags and multi-document streams are refused.
//
// The package never widens authority: an invalid file is refused as a whole (no partial
// File is ever returned beside an error), a grant's namespaceId defaults to the file's
// own context.world (never a command-line flag), and a set of files with conflicting
// contexts or a duplicate grant id is refused. It does no I/O except reading the named
// files and, when asked, a snapshot cache directory (which, like the grant files, must
// lie outside the files plane's root: whoever can write it can define authority).
package grantfile
