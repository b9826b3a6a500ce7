// Package grantfile loads the operator's grant files (spec 40 §3) — JSON or YAML
// documents of the form {version: 1, context?, grants: [...]} — into kernel grants, and
// serves them to the kernel as its GrantSource and DelegationChainResolver. The format
// is documented for users in docs/grant-files.md.
//
// Both formats are read into one node tree by this package (its own JSON scanner, and
// the YAML library's node API), which keeps every value's line. The loader fills the
// defaults, expands address shorthands and hands each grant, as a generic JSON value,
// to the kernel's strict decoder (kernel.DecodeGrantValue), so the JSON and YAML paths
// share one contract. YAML is converted scalar by scalar according to its resolved tag,
// so a timestamp stays the literal text and a number never silently becomes a string (or
// the reverse); numbers must have JSON's form. Anchors, aliases, merge keys, duplicate
// keys, custom tags and multi-document streams are refused.
//
// A YAML file of the common layout is read by the direct path instead (direct.go): the
// package's fast reader converts each grant as it reads it, and the tree of the grants is
// never built. It takes a file only when the tree path would accept it with the same
// result, and hands every other file to the tree path from the start, so every refusal
// (and the line it names) is the tree path's.
//
// The package never widens authority: an invalid file is refused as a whole (no partial
// File is ever returned beside an error), a grant's namespaceId defaults to the file's
// own context.world (never a command-line flag), and a set of files with conflicting
// contexts or a duplicate grant id is refused. It does no I/O except reading the named
// files, InsertGrant's rewrite of one grant file and, when asked, an authenticated
// snapshot cache (a directory and a key file, which, like the grant files, must lie
// outside the files plane's root).
package grantfile
