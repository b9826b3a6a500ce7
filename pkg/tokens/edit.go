package tokens

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
)

// NewEntry is what Append writes: grants are written as given (a relative path is
// relative to the tokens file's folder).
type NewEntry struct {
	ID        string
	SHA256    string
	Context   Context
	Grants    []string
	ExpiresAt time.Time
	// Role is written only when it is RoleOperator ("" and RoleAgent: the default).
	Role string
}

// Append adds e at the end of the tokens list of the file at path, creating the file
// (mode 0600) when it does not exist. Every byte of the existing file is kept, comments
// included: the entry goes after the list's last item (indented like it), or replaces an
// empty `tokens:` / `tokens: []`, or a `tokens:` key is added at the end. A flow list
// with items (`tokens: [{…}]`) is refused rather than rewritten. The result is parsed
// before it is written and must be exactly the old entries followed by e; the file is
// replaced atomically (temporary file, fsync, rename), keeps its permission bits, and is
// not replaced when it changed meanwhile. A duplicate id is refused (ErrDuplicate).
func Append(path string, e NewEntry) error {
	if !ValidID(e.ID) {
		return &Error{File: path, Message: fmt.Sprintf("invalid token id %q: use 1 to 128 letters, digits, '.', '_' and '-', starting with a letter or digit", e.ID)}
	}
	if !hexPattern().MatchString(e.SHA256) {
		return &Error{File: path, Token: e.ID, Message: "sha256 must be 64 lowercase hex digits"}
	}
	old, perm, err := readExisting(path)
	if err != nil {
		return err
	}
	text := formatEntry(e)
	var out []byte
	if old == nil {
		out = []byte("# sharedos tokens file: each entry maps the SHA-256 of a bearer token to a context.\n" +
			"# Edit with 'sharedos tokens create|list|revoke'; the tokens themselves are never stored.\n" +
			"version: 1\ntokens:\n" + indent(text, "  "))
	} else {
		f, p, perr := parse(path, old)
		if perr != nil {
			return perr
		}
		if f.Get(e.ID) != nil {
			return &Error{File: path, Line: f.Get(e.ID).Line, Token: e.ID, Message: "a token with this id already exists; revoke it first or choose another id", cause: ErrDuplicate}
		}
		for _, x := range f.Entries {
			if x.SHA256 == e.SHA256 {
				return &Error{File: path, Line: x.Line, Token: e.ID, Message: fmt.Sprintf("the token %q has the same sha256", x.ID)}
			}
		}
		out, err = insert(path, old, p, text)
		if err != nil {
			return err
		}
		nf, _, perr := parse(path, out)
		if perr != nil {
			return &Error{File: path, Token: e.ID, Message: "the edited file would not parse (" + perr.Message + "); nothing was written"}
		}
		if len(nf.Entries) != len(f.Entries)+1 || nf.Entries[len(nf.Entries)-1].ID != e.ID ||
			!sameEntries(nf.Entries[:len(f.Entries)], f.Entries) {
			return &Error{File: path, Token: e.ID, Message: "the edited file would not be the old tokens followed by the new one; nothing was written"}
		}
	}
	nf, perr := Parse(path, out)
	if perr != nil || nf.Get(e.ID) == nil || !sameEntries([]Entry{*nf.Get(e.ID)}, []Entry{e.resolved(path)}) {
		return &Error{File: path, Token: e.ID, Message: "the new entry would not read back as written; nothing was written"}
	}
	return replace(path, old, out, perm)
}

// Remove deletes the entry with id from the file at path: the lines from its `-` to the
// next item (or the end of the list), comments on them included; every other byte is
// kept. ErrNotFound (wrapped) when the file holds no such id. The write is atomic as for
// Append.
func Remove(path, id string) error {
	old, perm, err := readExisting(path)
	if err != nil {
		return err
	}
	if old == nil {
		return &Error{File: path, Message: "tokens file does not exist", cause: fs.ErrNotExist}
	}
	f, p, perr := parse(path, old)
	if perr != nil {
		return perr
	}
	idx := slices.IndexFunc(f.Entries, func(e Entry) bool { return e.ID == id })
	if idx < 0 {
		return &Error{File: path, Token: id, Message: "no token with this id (see 'sharedos tokens list')", cause: ErrNotFound}
	}
	if p.tokVal.Style&yaml.FlowStyle != 0 {
		return &Error{File: path, Line: p.tokVal.Line, Message: "tokens is a flow list ([…]); write it as a block list (one '- id: …' per token) to edit it with 'sharedos tokens'"}
	}
	lines := splitLines(old)
	start := p.tokVal.Content[idx].Line - 1
	end := endOfItem(p, idx, len(lines))
	var b bytes.Buffer
	for i, l := range lines {
		if i < start || i >= end {
			b.WriteString(l)
		}
	}
	// Removing the last token leaves `tokens:` alone: an empty list.
	out := b.Bytes()
	nf, _, perr := parse(path, out)
	if perr != nil {
		return &Error{File: path, Token: id, Message: "the edited file would not parse (" + perr.Message + "); nothing was written"}
	}
	want := slices.Delete(slices.Clone(f.Entries), idx, idx+1)
	if !sameEntries(nf.Entries, want) {
		return &Error{File: path, Token: id, Message: "the edited file would not be the old tokens without this one; nothing was written"}
	}
	return replace(path, old, out, perm)
}

// resolved is the Entry a parse of e in the file at path yields.
func (e NewEntry) resolved(path string) Entry {
	out := Entry{ID: e.ID, SHA256: e.SHA256, Context: e.Context, Role: RoleAgent}
	if e.Role != "" {
		out.Role = e.Role
	}
	if !e.ExpiresAt.IsZero() {
		out.ExpiresAt = e.ExpiresAt.UTC().Truncate(time.Second)
	}
	for _, g := range e.Grants {
		if !filepath.IsAbs(g) {
			g = filepath.Join(filepath.Dir(absOr(path)), g)
		}
		out.Grants = append(out.Grants, filepath.Clean(g))
	}
	return out
}

// sameEntries compares entries but their lines.
func sameEntries(a, b []Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		x.Line, y.Line = 0, 0
		if x.ID != y.ID || x.SHA256 != y.SHA256 || x.Role != y.Role || !x.ExpiresAt.Equal(y.ExpiresAt) || !slices.Equal(x.Grants, y.Grants) ||
			fmt.Sprint(x.Context.Actor, x.Context.Owner, x.Context.Authority, x.Context.World, x.Context.Purpose) !=
				fmt.Sprint(y.Context.Actor, y.Context.Owner, y.Context.Authority, y.Context.World, y.Context.Purpose) {
			return false
		}
	}
	return true
}

// oddBreaks reports line breaks YAML counts but the line index of Append and Remove does
// not (a lone CR, NEL, LS, PS): such a file is refused rather than edited at the wrong
// line.
func oddBreaks(data []byte) bool {
	for i, c := range data {
		if c == '\r' && (i+1 >= len(data) || data[i+1] != '\n') {
			return true
		}
	}
	return bytes.Contains(data, []byte("\u0085")) || bytes.Contains(data, []byte("\u2028")) || bytes.Contains(data, []byte("\u2029"))
}

// readExisting reads the file, or returns nil data when it does not exist.
func readExisting(path string) ([]byte, os.FileMode, error) {
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0o600, nil
	}
	if err != nil {
		return nil, 0, &Error{File: path, Message: "cannot read tokens file: " + pathErr(err), cause: err}
	}
	if !info.Mode().IsRegular() {
		return nil, 0, &Error{File: path, Message: "not a regular file"}
	}
	data, err := readFile(path)
	if err != nil {
		return nil, 0, err
	}
	if oddBreaks(data) {
		return nil, 0, &Error{File: path, Message: "the file has line breaks other than LF and CRLF (a lone CR, NEL, LS or PS); fix them to edit it with 'sharedos tokens'"}
	}
	return data, info.Mode().Perm(), nil
}

// splitLines splits data into lines that keep their line break.
func splitLines(data []byte) []string {
	var out []string
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			out = append(out, string(data))
			break
		}
		out = append(out, string(data[:i+1]))
		data = data[i+1:]
	}
	return out
}

// endOfItem is the 0-based line after item idx of the tokens list: the next item's line,
// else the next top-level key's, else the end of the file.
func endOfItem(p *parsed, idx, nlines int) int {
	if idx+1 < len(p.tokVal.Content) {
		return p.tokVal.Content[idx+1].Line - 1
	}
	return nextTopLevel(p, nlines)
}

// nextTopLevel is the 0-based line of the top-level key after tokens, else nlines.
func nextTopLevel(p *parsed, nlines int) int {
	for i := 0; i+1 < len(p.doc.Content); i += 2 {
		if p.doc.Content[i] == p.tokKey && i+2 < len(p.doc.Content) {
			return p.doc.Content[i+2].Line - 1
		}
	}
	return nlines
}

// insert places the entry text in the file.
func insert(path string, old []byte, p *parsed, text string) ([]byte, error) {
	nl := "\n"
	if bytes.Contains(old, []byte("\r\n")) {
		nl = "\r\n"
	}
	text = strings.ReplaceAll(text, "\n", nl)
	lines := splitLines(old)
	if len(lines) > 0 && !strings.HasSuffix(lines[len(lines)-1], "\n") {
		lines[len(lines)-1] += nl
	}
	join := func(parts ...[]string) []byte {
		var b bytes.Buffer
		for _, ls := range parts {
			for _, l := range ls {
				b.WriteString(l)
			}
		}
		return b.Bytes()
	}
	switch {
	case p.tokKey == nil:
		// no tokens key: add it at the end
		return join(lines, []string{"tokens:" + nl + indent(text, "  ")}), nil
	case p.tokVal.Kind == yaml.SequenceNode && len(p.tokVal.Content) > 0:
		if p.tokVal.Style&yaml.FlowStyle != 0 {
			return nil, &Error{File: path, Line: p.tokVal.Line, Message: "tokens is a flow list ([…]); write it as a block list (one '- id: …' per token) to let 'sharedos tokens create' append to it"}
		}
		first := p.tokVal.Content[0]
		// the dash sits two columns before the item's first key
		pad := strings.Repeat(" ", max(first.Column-3, 0))
		at := nextTopLevel(p, len(lines))
		return join(lines[:at], []string{indent(text, pad)}, lines[at:]), nil
	case isNull(p.tokVal) || p.tokVal.Kind == yaml.SequenceNode:
		// `tokens:`, `tokens: ~`, `tokens: []` (a comment may follow): the key's line
		// becomes `tokens:` and the entry follows it
		kl := p.tokKey.Line - 1
		if p.tokVal.Line != p.tokKey.Line && !isNull(p.tokVal) {
			return nil, &Error{File: path, Line: p.tokVal.Line, Message: "write an empty tokens list as 'tokens: []' on one line to let 'sharedos tokens create' append to it"}
		}
		line := lines[kl]
		col := p.tokKey.Column - 1
		rest := line[col:]
		if !strings.HasPrefix(rest, "tokens:") {
			return nil, &Error{File: path, Line: p.tokKey.Line, Message: "write the key as plain 'tokens:' to let 'sharedos tokens create' append to it"}
		}
		after := strings.TrimRight(rest[len("tokens:"):], "\r\n")
		comment := ""
		if i := strings.Index(after, "#"); i >= 0 {
			comment, after = " "+after[i:], after[:i]
		}
		switch strings.TrimSpace(after) {
		case "", "[]", "~", "null":
		default:
			return nil, &Error{File: path, Line: p.tokKey.Line, Message: "the tokens value is not an empty list; write it as a block list"}
		}
		newLine := line[:col] + "tokens:" + comment + nl
		pad := strings.Repeat(" ", col+2)
		return join(lines[:kl], []string{newLine, indent(text, pad)}, lines[kl+1:]), nil
	}
	return nil, &Error{File: path, Line: p.tokVal.Line, Message: "tokens must be a list"}
}

// plainRE matches the strings formatEntry writes unquoted; anything else is written as a
// JSON string (which YAML reads as a double-quoted scalar).
var plainRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_./@-][A-Za-z0-9_./@:-]*$`) }) // compiled on first use, not at every start

// formatEntry is the YAML of an entry as a list item ("- id: …" and its keys), with
// JSON-quoted strings where YAML would read them otherwise.
func formatEntry(e NewEntry) string {
	var b strings.Builder
	q := func(s string) string {
		if plainRE().MatchString(s) && !strings.Contains(s, ": ") && s != "null" && s != "~" {
			return s
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		return strings.TrimSuffix(buf.String(), "\n")
	}
	fmt.Fprintf(&b, "- id: %s\n", q(e.ID))
	fmt.Fprintf(&b, "  sha256: %s\n", e.SHA256)
	ctx := []string{"actor: " + q(e.Context.Actor.String())}
	if e.Context.Owner != nil {
		ctx = append(ctx, "owner: "+q(e.Context.Owner.String()))
	}
	if e.Context.Authority != nil {
		ctx = append(ctx, "authority: "+q(e.Context.Authority.String()))
	}
	if e.Context.World != "" {
		ctx = append(ctx, "world: "+q(e.Context.World))
	}
	if e.Context.Purpose != "" {
		ctx = append(ctx, "purpose: "+q(e.Context.Purpose))
	}
	b.WriteString("  context:\n")
	for _, c := range ctx {
		b.WriteString("    " + c + "\n")
	}
	if len(e.Grants) > 0 {
		b.WriteString("  grants:\n")
		for _, g := range e.Grants {
			b.WriteString("    - " + q(g) + "\n")
		}
	}
	if !e.ExpiresAt.IsZero() {
		fmt.Fprintf(&b, "  expiresAt: %s\n", e.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if e.Role == RoleOperator {
		b.WriteString("  role: operator\n")
	}
	return b.String()
}

// indent prefixes every line of text.
func indent(text, pad string) string {
	var b strings.Builder
	for _, l := range splitLines([]byte(text)) {
		b.WriteString(pad + l)
	}
	return b.String()
}

// replace writes data over path atomically, unless the file no longer holds old.
func replace(path string, old, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	if old == nil {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return &Error{File: path, Message: "cannot create the tokens file's folder: " + pathErr(err), cause: err}
		}
	}
	fail := func(err error) error {
		return &Error{File: path, Message: "cannot write tokens file: " + pathErr(err), cause: err}
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fail(err)
	}
	defer func() {
		if err != nil {
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err == nil {
		if err = tmp.Chmod(perm); err == nil {
			err = tmp.Sync()
		}
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(err)
	}
	now, rerr := os.ReadFile(path)
	switch {
	case old == nil && rerr == nil:
		err = errors.New("the tokens file was created meanwhile")
	case old != nil && (rerr != nil || !bytes.Equal(now, old)):
		err = errors.New("the tokens file changed meanwhile")
	}
	if err != nil {
		return &Error{File: path, Message: err.Error() + "; nothing was written, try again"}
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fail(err)
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
