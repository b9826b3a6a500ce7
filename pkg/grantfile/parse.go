package grantfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sharedos/sharedos/internal/jscompat"
	"github.com/sharedos/sharedos/internal/par"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// MaxFileSize is the largest grant file Parse and Load accept (64 MiB).
const MaxFileSize = 64 << 20

// DefaultWorld is the namespaceId a grant gets when neither it nor its file's
// context.world names one.
const DefaultWorld = "default"

// EpochIssuedAt is the issuedAt a grant without one gets: the Unix epoch, i.e. issued
// before anything.
const EpochIssuedAt = "1970-01-01T00:00:00.000Z"

// Context is a grant file's optional context block: defaults for the access context of
// a command (each is overridden by the corresponding flag). Empty or nil means unset.
type Context struct {
	World     string
	Actor     *kernel.Address
	Owner     *kernel.Address
	Authority *kernel.Address
	Purpose   string
}

// File is one validated grant file.
type File struct {
	// Path is the name the file was parsed or loaded under.
	Path string
	// Context is the file's context block (zero when absent).
	Context Context
	// Grants are the file's grants in document order, each accepted by the kernel's
	// strict decoder after the loader filled namespaceId, constraints and issuedAt.
	Grants []kernel.CapabilityGrant
	// Derived holds the ids of grants that had no issuedAt but have a parentGrantId: the
	// epoch default makes them issued before their parent, which Lint reports as an error.
	// It is never nil.
	Derived map[string]bool
}

// parsed is a File together with the trees it was read from, for line look-ups.
type parsed struct {
	file       *File
	root       *node
	grantNodes []*node // parallel to file.Grants (nil when read by the direct path)
	idLines    []int32 // the direct path's: the line of each grant's id
	ctxLines   map[string]int
}

// idLine returns the line of grant i's id.
func (p *parsed) idLine(i int) int {
	if p.grantNodes == nil {
		return int(p.idLines[i])
	}
	return lineOf(p.grantNodes[i], "id")
}

// Load reads and parses the grant file at path (at most MaxFileSize bytes). Errors are
// *Error values naming path.
func Load(path string) (*File, error) {
	data, err := readFileString(path)
	if err != nil {
		return nil, err
	}
	p, _, err := parseDirect(path, data)
	if err != nil {
		return nil, err
	}
	return p.file, nil
}

// Parse parses one grant file held in memory; name is used for error messages, as
// File.Path, and to choose the format (.json ⇒ JSON, .yaml/.yml ⇒ YAML, otherwise JSON
// when the first non-space byte is '{', else YAML). It does no I/O. An invalid file is
// refused as a whole: the result is either a valid *File or (nil, *Error).
func Parse(name string, data []byte) (*File, error) {
	p, _, err := parseDirect(name, string(data))
	if err != nil {
		return nil, err
	}
	return p.file, nil
}

func readFile(path string) ([]byte, *Error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Message: "cannot read grant file: " + unwrapPathError(err), cause: err}
	}
	defer f.Close()
	// Read into one buffer of the file's size (plus one byte to notice growth), so a large
	// file is neither copied while growing nor read past the limit.
	size := int64(512)
	if info, err := f.Stat(); err == nil && info.Mode().IsRegular() {
		size = min(info.Size(), MaxFileSize) + 1
	}
	buf := make([]byte, 0, size)
	for {
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > MaxFileSize || errors.Is(err, io.EOF) {
			// Too large a file is refused by parse (a grant-level refusal, not an I/O one).
			return buf, nil
		}
		if err != nil {
			return nil, &Error{File: path, Message: "cannot read grant file: " + unwrapPathError(err), cause: err}
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
}

// readFileString is readFile into a string: the file's bytes are copied once, from a
// small buffer into the string's own (the direct path keeps substrings of it), where
// readFile and a conversion would hold them twice.
func readFileString(path string) (string, *Error) {
	f, err := os.Open(path)
	if err != nil {
		return "", &Error{File: path, Message: "cannot read grant file: " + unwrapPathError(err), cause: err}
	}
	defer f.Close()
	var b strings.Builder
	if info, err := f.Stat(); err == nil && info.Mode().IsRegular() {
		b.Grow(int(min(info.Size(), MaxFileSize) + 1))
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		b.Write(buf[:n])
		if b.Len() > MaxFileSize || errors.Is(err, io.EOF) {
			// Too large a file is refused by parse (a grant-level refusal, not an I/O one).
			return b.String(), nil
		}
		if err != nil {
			return "", &Error{File: path, Message: "cannot read grant file: " + unwrapPathError(err), cause: err}
		}
	}
}

func unwrapPathError(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func loadParsed(path string) (*parsed, *Error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return parse(path, data)
}

// isJSON chooses the format of a file.
func isJSON[T string | []byte](name string, data T) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		return true
	case ".yaml", ".yml":
		return false
	}
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return data[i] == '{'
	}
	return false
}

func parse(name string, data []byte) (*parsed, *Error) {
	p, _, err := parseWithContext(name, string(data))
	return p, err
}

// fileContext is a context block that parsed cleanly, with the line of each field.
type fileContext struct {
	ctx   Context
	lines map[string]int
}

// parseWithContext is parse that, when the file is refused, still returns its context
// block if that block was read completely and is valid (nil otherwise): the same parse
// that refused the file, never a second, more lenient reader.
func parseWithContext(name string, data string) (*parsed, *fileContext, *Error) {
	if len(data) > MaxFileSize {
		return nil, nil, &Error{File: name, Message: fmt.Sprintf("grant file is larger than %d MiB", MaxFileSize>>20)}
	}
	data = strings.TrimPrefix(data, "\xef\xbb\xbf")
	if !utf8.ValidString(data) {
		line := 1 + strings.Count(data[:firstInvalidUTF8(data)], "\n")
		return nil, nil, &Error{File: name, Line: line, Message: "grant file is not valid UTF-8"}
	}
	var root *node
	var terr *treeError
	if isJSON(name, data) {
		root, terr = jsonText(data)
	} else {
		root, terr = yamlTreeText(data, fastYAMLEnabled)
	}
	if terr != nil {
		e := &Error{File: name, Line: terr.line, Message: terr.msg, cause: terr.cause}
		e.Grant, e.Field = splitGrantPath(root, terr.path)
		var fc *fileContext
		if len(terr.path) == 0 || terr.path[0] != "context" {
			// The tree is partial, but a context member it holds was read completely.
			fc = cleanContext(name, root)
		}
		return nil, fc, e
	}
	p, err := build(name, root)
	if err != nil {
		return nil, cleanContext(name, root), err
	}
	return p, &fileContext{ctx: p.file.Context, lines: p.ctxLines}, nil
}

// cleanContext reads the context block of a (possibly partial) tree, or returns nil when
// there is none or it is invalid.
func cleanContext(name string, root *node) *fileContext {
	c, cline := root.get("context")
	if c == nil {
		return nil
	}
	b := &builder{name: name, root: root}
	fc := &fileContext{lines: map[string]int{}}
	if err := b.context(c, cline, &fc.ctx, fc.lines); err != nil {
		return nil
	}
	return fc
}

func firstInvalidUTF8(b string) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRuneInString(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// splitGrantPath turns an absolute path into (grant id, field inside the grant) when it
// points inside a grant whose id is known, else ("", dotted absolute path).
func splitGrantPath(root *node, path []string) (string, string) {
	if len(path) >= 2 && path[0] == "grants" {
		if i, err := strconv.Atoi(path[1]); err == nil {
			if label := grantLabel(root, i); label != "" {
				return label, strings.Join(path[2:], ".")
			}
		}
	}
	return "", strings.Join(path, ".")
}

// grantLabel returns the trimmed id of grant i in a (possibly partial) tree, or "".
func grantLabel(root *node, i int) string {
	gs, _ := root.get("grants")
	if gs == nil || gs.kind != kArr || i < 0 || i >= len(gs.kids) {
		return ""
	}
	return nodeLabel(gs.kids[i])
}

func nodeLabel(g *node) string {
	id, _ := g.get("id")
	if id == nil || id.kind != kStr {
		return ""
	}
	return jscompat.JSTrim(id.s)
}

type builder struct {
	name  string
	root  *node
	alloc grantAlloc
}

// errAt reports a problem at an absolute dotted path of the document.
func (b *builder) errAt(path string, line int, format string, args ...any) *Error {
	return &Error{File: b.name, Field: path, Line: line, Message: fmt.Sprintf(format, args...)}
}

// grantErr reports a problem at field inside grant i (node g).
func (b *builder) grantErr(i int, g *node, field string, cause error, format string, args ...any) *Error {
	e := &Error{File: b.name, Line: lineOf(g, field), Message: fmt.Sprintf(format, args...), cause: cause}
	if label := nodeLabel(g); label != "" {
		e.Grant, e.Field = label, field
	} else {
		e.Field = "grants." + strconv.Itoa(i)
		if field != "" {
			e.Field += "." + field
		}
	}
	return e
}

func build(name string, root *node) (*parsed, *Error) { return buildWith(name, root, parallelBuildMin) }

// buildWith is build with the count of grants from which it uses two builders.
func buildWith(name string, root *node, parallelMin int) (*parsed, *Error) {
	b := &builder{name: name, root: root}
	if root.kind != kObj {
		return nil, b.errAt("", root.line, "a grant file must be a mapping with version: 1 and grants, not %s", root.kind)
	}
	for i, k := range root.keys {
		switch k {
		case "version", "context", "grants":
		default:
			return nil, b.errAt(k, root.keyLineAt(i), "unknown key %q (a grant file has version, context and grants)", k)
		}
	}
	v, vline := root.get("version")
	if v == nil {
		return nil, b.errAt("version", root.line, "is required (version: 1)")
	}
	if v.kind != kNum {
		return nil, b.errAt("version", vline, "must be the number 1, not %s", v.kind)
	}
	if n, err := json.Number(v.s).Int64(); err != nil || n != 1 || !plainInt(v.s) {
		return nil, b.errAt("version", vline, "unsupported version %s (this sharedos reads version 1)", v.s)
	}
	p := &parsed{root: root, ctxLines: map[string]int{}}
	f := &File{Path: name, Derived: map[string]bool{}}
	p.file = f
	if c, cline := root.get("context"); c != nil {
		if err := b.context(c, cline, &f.Context, p.ctxLines); err != nil {
			return nil, err
		}
	}
	gs, gline := root.get("grants")
	if gs == nil {
		return nil, b.errAt("grants", root.line, "is required (it may be [])")
	}
	if gs.kind != kArr {
		return nil, b.errAt("grants", gline, "must be a list of grants, not %s", gs.kind)
	}
	world := f.Context.World
	if world == "" {
		world = DefaultWorld
	}
	f.Grants = make([]kernel.CapabilityGrant, len(gs.kids))
	p.grantNodes = gs.kids
	// The grants are built in order, from parallelBuildMin on in two halves at once (a
	// builder each); then the ids are checked in order. The error reported is the one of
	// the first grant that fails either way, as in one pass.
	var failed int
	var ferr *Error
	if len(gs.kids) < max(parallelMin, 2) {
		failed, ferr = b.grants(gs.kids, 0, len(gs.kids), world, f.Grants, f.Derived)
	} else {
		mid := len(gs.kids) / 2
		b2 := &builder{name: b.name, root: b.root}
		derived2 := map[string]bool{}
		failed2, ferr2 := len(gs.kids), (*Error)(nil)
		second := par.Go(func() { failed2, ferr2 = b2.grants(gs.kids, mid, len(gs.kids), world, f.Grants, derived2) })
		failed, ferr = b.grants(gs.kids, 0, mid, world, f.Grants, f.Derived)
		second.Wait()
		if ferr == nil {
			failed, ferr = failed2, ferr2
		}
		maps.Copy(f.Derived, derived2)
	}
	seen := make(map[string]int, len(gs.kids))
	for i, gn := range gs.kids {
		if i == failed {
			return nil, ferr
		}
		id := f.Grants[i].ID
		if first, dup := seen[id]; dup {
			return nil, b.grantErr(i, gn, "id", nil, "duplicate grant id %q (first at line %d)", id, lineOf(gs.kids[first], "id"))
		}
		seen[id] = i
	}
	return p, nil
}

// parallelBuildMin is how many grants build shares with a second builder.
const parallelBuildMin = 512

// grants builds the grants of nodes[from:to] into out, stopping at the first that fails:
// its index and error (to, nil when none does).
func (b *builder) grants(nodes []*node, from, to int, world string, out []kernel.CapabilityGrant, derived map[string]bool) (int, *Error) {
	for i := from; i < to; i++ {
		if err := b.grant(i, nodes[i], world, &out[i], derived); err != nil {
			return i, err
		}
	}
	return to, nil
}

var contextKeys = []string{"world", "actor", "owner", "authority", "purpose"}

func (b *builder) context(c *node, cline int, out *Context, lines map[string]int) *Error {
	if c.kind != kObj {
		return b.errAt("context", cline, "must be a mapping of world, actor, owner, authority and purpose, not %s", c.kind)
	}
	for i, k := range c.keys {
		field := "context." + k
		line := c.keyLineAt(i)
		lines[k] = line
		v := c.kids[i]
		switch k {
		case "world", "purpose":
			if v.kind != kStr {
				return b.errAt(field, line, "must be a string, not %s", v.kind)
			}
			t := jscompat.JSTrim(v.s)
			max := 256
			if k == "purpose" {
				max = 512
			}
			if n := jscompat.UTF16Len(t); n < 1 || n > max {
				return b.errAt(field, line, "must be 1 to %d characters after trimming", max)
			}
			if k == "world" {
				out.World = t
			} else {
				out.Purpose = t
			}
		case "actor", "owner", "authority":
			a, err := nodeAddress(v)
			if err != nil {
				return &Error{File: b.name, Field: field, Line: line, Message: contractMessage(err), cause: err}
			}
			switch k {
			case "actor":
				out.Actor = &a
			case "owner":
				out.Owner = &a
			default:
				out.Authority = &a
			}
		default:
			return b.errAt(field, line, "unknown key %q (context has %s)", k, strings.Join(contextKeys, ", "))
		}
	}
	return nil
}

// plainInt reports whether s is a decimal integer literal: -?(0|[1-9][0-9]*).
func plainInt(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// nodeAddress reads an address written as kind:id shorthand or as the object form.
func nodeAddress(v *node) (kernel.Address, error) {
	switch v.kind {
	case kStr:
		return kernel.ParseAddress(v.s)
	case kObj:
		var a kernel.Address
		err := json.Unmarshal(appendJSON(nil, v), &a)
		return a, err
	}
	return kernel.Address{}, fmt.Errorf("must be an address (kind:id or {kind, …}), not %s", v.kind)
}

// contractMessage is the message of a contract error without its field prefix.
func contractMessage(err error) string {
	var ce *kernel.ContractError
	if errors.As(err, &ce) {
		if ce.Field != "" && !strings.Contains(ce.Message, ce.Field) && ce.Field != "kind" {
			return ce.Field + ": " + ce.Message
		}
		return ce.Message
	}
	return err.Error()
}

// addressIDKey is the member that carries the id for each address kind.
func addressIDKey(k kernel.AddressKind) string {
	switch k {
	case kernel.KindHuman:
		return "userId"
	case kernel.KindAgent:
		return "agentId"
	case kernel.KindGroup:
		return "conversationId"
	case kernel.KindService:
		return "serviceId"
	}
	return ""
}

// addressNode is the object form of a, on line.
func addressNode(a kernel.Address, line int) *node {
	kind, id := strNode(string(a.Kind), line), strNode(a.ID, line)
	kind.keyLine, id.keyLine = int32(line), int32(line)
	return &node{kind: kObj, line: line, keys: []string{"kind", addressIDKey(a.Kind)}, kids: []*node{kind, id}}
}

// grant fills the defaults of grant i, expands address shorthands and decodes it under
// the kernel's strict contract.
func (b *builder) grant(i int, gn *node, world string, out *kernel.CapabilityGrant, derived map[string]bool) *Error {
	// The common case, without the generic value: decoded directly, then held to the
	// kernel's contract (Validate). Anything else takes the decoder's path below.
	if g, noIssuedAt, ok := fastGrant(gn, world, &b.alloc); ok && g.Validate() == nil {
		*out = g
		if noIssuedAt && g.ParentGrantID != "" {
			derived[g.ID] = true
		}
		return nil
	}
	return b.decodeGrant(i, gn, world, out, derived)
}

// decodeGrant is grant through the kernel's strict decoder of generic values, which
// words every refusal.
func (b *builder) decodeGrant(i int, gn *node, world string, out *kernel.CapabilityGrant, derived map[string]bool) *Error {
	if gn.kind != kObj {
		return b.grantErr(i, gn, "", nil, "a grant must be a mapping, not %s", gn.kind)
	}
	if v, _ := gn.get("namespaceId"); v == nil {
		gn.put("namespaceId", strNode(world, 0))
	}
	if v, _ := gn.get("constraints"); v == nil {
		gn.put("constraints", &node{kind: kObj})
	}
	noIssuedAt := false
	if v, _ := gn.get("issuedAt"); v == nil {
		noIssuedAt = true
		gn.put("issuedAt", strNode(EpochIssuedAt, 0))
	}
	for _, k := range []string{"subject", "issuer"} {
		if err := b.expand(i, gn, gn, k, k); err != nil {
			return err
		}
	}
	if caps, _ := gn.get("capabilities"); caps != nil && caps.kind == kArr {
		for j, c := range caps.kids {
			if r, _ := c.get("resource"); r != nil {
				if err := b.expand(i, gn, r, "owner", "capabilities."+strconv.Itoa(j)+".resource.owner"); err != nil {
					return err
				}
			}
		}
	}
	// A quoted number for maxUses or delegationDepth is refused here already, with the
	// node kind in the message (the kernel would refuse it too), and so is any form but
	// a plain decimal integer (1.0 and 1e3 are integers to the kernel, not to a reader).
	if c, _ := gn.get("constraints"); c != nil && c.kind == kObj {
		for _, k := range []string{"maxUses", "delegationDepth"} {
			if v, _ := c.get(k); v != nil && v.kind != kNum {
				return b.grantErr(i, gn, "constraints."+k, nil, "must be an integer, not %s", v.kind)
			} else if v != nil && !plainInt(v.s) {
				return b.grantErr(i, gn, "constraints."+k, nil, "must be a plain decimal integer, not %s", v.s)
			}
		}
	}
	g, err := kernel.DecodeGrantValue(nodeValue(gn))
	if err != nil {
		var ce *kernel.ContractError
		if errors.As(err, &ce) {
			return b.grantErr(i, gn, ce.Field, err, "%s", ce.Message)
		}
		return b.grantErr(i, gn, "", err, "%s", err.Error())
	}
	*out = g
	if noIssuedAt && out.ParentGrantID != "" {
		derived[out.ID] = true
	}
	return nil
}

// expand replaces the kind:id shorthand at parent[key] by the object form.
func (b *builder) expand(i int, gn, parent *node, key, field string) *Error {
	v, line := parent.get(key)
	if v == nil || v.kind != kStr {
		return nil
	}
	a, err := kernel.ParseAddress(v.s)
	if err != nil {
		return b.grantErr(i, gn, field, err, "%s", contractMessage(err))
	}
	parent.put(key, addressNode(a, max(v.line, line)))
	return nil
}
