// Package scenario reads and runs `sharedos test` files: declarative authorization tests
// that call tools, list the catalogue, explain calls, toggle namespaces, escalate and read
// the audit trail of an embedded sharedos host, and assert the outcome, the reason code,
// the gate and cause, the deciding grant, why each other candidate was rejected and the
// audit records (spec 70).
//
// A scenario file is YAML (or JSON), read strictly: an unknown key, a bad address, a bad
// instant or a value of the wrong type is an *Error naming file:line. Every test runs on
// a fresh copy of its root and a fresh state database in a temporary directory, on the
// one host assembly every surface uses (pkg/host): the runner translates, it never
// authorizes, filters or audits on its own, and it never touches the user's state.
//
// Where spec 70 is silent, the runner decides as follows:
//
//   - The kernel's wall clock is the step's instant (the pinned `now`), so a scenario
//     gives the same answer at any date; with no `now` anywhere the clock is read once
//     per test. A step's `now` reaches the kernel, not the planes' own clocks.
//   - A test without `namespaces` starts with every namespace of the host's tools
//     enabled (files, repo, sharedos), stored as that (world, owner)'s default.
//   - A step's context overrides change only the fields they name (overriding the owner
//     does not move the authority).
//   - `grant` is the grant of the call's last allowed authorization record (the
//     execution's); `rejected` lists the candidates of the plan's explanation, taken in
//     the same turn just before the call (the grant source offers an actor only its own
//     grants, so a foreign subject's grant is never a candidate); a listed grant must
//     have that reason, and `rejected: {}` asserts there was none.
//   - `output.contains` holds when some string of the output, or its compact JSON text,
//     contains the text (a list: each one); `output.excludes` when none occurs in the
//     output or in a refusal's message (a secret that must not leak); `jsonpath` takes
//     $, .key, ['key'] and [N] only.
//   - `audit` and `contains` match partial records, each against a distinct record.
//   - `escalate` and a `call` of sharedos.escalate act as `tools call` does: an offered
//     escalation is recorded (status escalated, exit 5), not executed; the CLI keeps no
//     latch, so later steps run as later processes would.
//   - An invalid file is reported beside the others (they still run), counts as one
//     failure in the closing line, and makes the exit 2. A test that cannot run (no
//     actor, an unreadable fixture) is an error: it counts as failed (exit 1).
//   - Anchors, aliases, custom tags, several documents and raw control characters are
//     refused: a scenario is data.
//   - `{git: true}` makes a repository with one commit of everything below it, by a
//     fixed author at the test's instant.
//
// The same files run from `go test`:
//
//	func TestGrants(t *testing.T) { scenario.TestFiles(t, "sharedos-tests") }
package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/sharedos/sharedos/pkg/grantfile"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// MaxFileSize bounds a scenario file (a larger one is refused).
const MaxFileSize = 8 << 20

// Error is an invalid scenario file: the file, the line (0 when unknown) and a one-line
// message.
type Error struct {
	File    string
	Line    int
	Message string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Message)
}

// File is one parsed scenario file.
type File struct {
	// Path is the file as it was named (its display name in reports).
	Path string
	// Dir is the absolute folder of the file (relative paths are relative to it).
	Dir  string
	Name string
	// Root is the absolute fixture directory copied into every test ("" for none).
	Root string
	// Files are the inline files written into every test's root, after Root is copied.
	Files []InlineFile
	// GrantFiles are the absolute grant files named by `grants:`.
	GrantFiles []string
	// InlineGrants is the grant file made of the inline `grants:` entries (nil when none),
	// already checked by the strict grant-file parser.
	InlineGrants []byte
	// InlineGrantLines maps an inline grant's id to its line in the scenario file.
	InlineGrantLines map[string]int
	Context          Context
	// Namespaces is the enabled selection at the start of every test (nil: the product
	// default, every namespace of the host's tools).
	Namespaces []string
	Ceiling    Ceiling
	// Agents are the messaging recipients (the config's agents:, each mode wait): nil,
	// messaging is not configured.
	Agents []string
	Tests  []Test

	data []byte // the file's bytes (for --update)
}

// Ceiling is the host ceiling of a scenario (the config file's `ceiling:` section).
type Ceiling struct {
	Namespaces    []string
	FrozenPaths   []string
	FrozenActions []string
}

// InlineFile is one entry of `files:`: a file with its content, or a directory
// (optionally a git repository with one commit of everything below it).
type InlineFile struct {
	Path    string // slash-separated, relative to the root
	Dir     bool
	Git     bool
	Content string
	Line    int
}

// Context holds the context fields of a file, a test or a step; "" leaves a field to
// the enclosing level.
type Context struct {
	As, Owner, Authority, World, Purpose, Now string
}

func (c Context) over(base Context) Context {
	pick := func(v, b string) string {
		if v != "" {
			return v
		}
		return b
	}
	return Context{As: pick(c.As, base.As), Owner: pick(c.Owner, base.Owner), Authority: pick(c.Authority, base.Authority),
		World: pick(c.World, base.World), Purpose: pick(c.Purpose, base.Purpose), Now: pick(c.Now, base.Now)}
}

// Test is one test of a file.
type Test struct {
	Name    string
	Line    int
	Context Context
	// Namespaces overrides the file's starting selection (nil: the file's).
	Namespaces []string
	Skip, Todo string
	Steps      []Step
}

// Step kinds.
const (
	KindCall       = "call"
	KindList       = "list"
	KindExplain    = "explain"
	KindNamespaces = "namespaces"
	KindEscalate   = "escalate"
	KindAudit      = "audit"
	KindSend       = "send"  // send a message (messages send)
	KindReply      = "reply" // answer the step actor's newest pending message (messages reply)
)

// Step is one step of a test.
type Step struct {
	Kind    string
	Line    int
	Tool    string          // call, explain
	Args    json.RawMessage // call, explain (an object; {} when absent)
	Reason  string          // escalate
	To      string          // send: the recipient
	Payload json.RawMessage // send, reply
	Patch   kernel.ToolNamespaceUpdate
	Context Context
	Expect  *Expect // nil: nothing is checked

	expectNode *yaml.Node // the expect mapping (for --update)
	expectKey  *yaml.Node
}

// Expect is what a step asserts. A nil or empty field is not checked.
type Expect struct {
	Status   *string
	Code     *string
	Gate     *string
	Cause    *string
	Grant    *string
	Rejected map[string]string // nil: not checked; empty: no candidate was rejected
	Output   *OutputExpect
	Audit    []AuditMatch // the records this step wrote (each must match one)
	AuditSet bool
	Exit     *int

	Allowed *bool    // explain
	Fixes   []string // explain: fix kinds
	FixSet  bool

	Includes []string // list
	Excludes []string // list
	Enabled  []string // namespaces: the selection that took effect
	EnSet    bool

	Contains []AuditMatch // audit
	Absent   []AuditMatch // audit: no record may match any of these

	keys []string // the keys written, in order
}

// OutputExpect asserts on a call's output.
type OutputExpect struct {
	// Contains: every string must occur in the output (one string or a list).
	Contains []string
	// Excludes: no string may occur anywhere in the result (its output, or the message
	// of a refusal or failure): a secret that must not leak.
	Excludes  []string
	Equals    any
	EqualsSet bool
	JSONPath  []PathExpect
}

// PathExpect is one `jsonpath:` assertion: the value at Path equals Value.
type PathExpect struct {
	Path  string
	Value any
}

// AuditMatch is a partial audit record: every field set must equal the record's.
type AuditMatch struct {
	Type, Outcome, Code, Tool, Grant, Cause, Action string
	Consumed, FailClosed                            *bool
	Line                                            int
}

// ParseFile reads and parses the scenario file at path.
func ParseFile(path string) (*File, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, &Error{File: path, Message: unwrapPath(err)}
	}
	if fi.IsDir() {
		return nil, &Error{File: path, Message: "is a directory, not a scenario file"}
	}
	if fi.Size() > MaxFileSize {
		return nil, &Error{File: path, Message: fmt.Sprintf("larger than %d bytes", MaxFileSize)}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Message: unwrapPath(err)}
	}
	return Parse(path, data)
}

func unwrapPath(err error) string {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err.Error()
	}
	return err.Error()
}

// Parse parses a scenario file held in memory; name is its path (relative paths in it are
// relative to its folder). It reads the grant files it names (to check them) but writes
// nothing. An invalid file is refused as a whole: (nil, *Error).
func Parse(name string, data []byte) (*File, error) {
	p := &parser{file: name}
	if i := firstInvalidUTF8(data); i >= 0 {
		return nil, &Error{File: name, Line: bytes.Count(data[:i], []byte("\n")) + 1, Message: "invalid UTF-8"}
	}
	if i := firstControl(data); i >= 0 {
		r, _ := utf8.DecodeRune(data[i:])
		return nil, &Error{File: name, Line: bytes.Count(data[:i], []byte("\n")) + 1,
			Message: fmt.Sprintf("control character U+%04X is not allowed; write it as an escape in a double-quoted string", r)}
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, p.syntax(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Error{File: name, Line: extra.Line, Message: "more than one YAML document"}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, &Error{File: name, Line: 1, Message: "empty file: want a mapping with version, tests"}
	}
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, &Error{File: name, Message: err.Error()}
	}
	f := &File{Path: name, Dir: filepath.Dir(abs), data: data}
	if err := p.file1(doc.Content[0], f); err != nil {
		return nil, err
	}
	return f, nil
}

func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return -1
}

// firstControl is the offset of the first character YAML refuses in a stream (C0 but
// tab, line feed and carriage return; DEL; C1), or -1.
func firstControl(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f || r >= 0x80 && r <= 0x9f {
			return i
		}
		i += n
	}
	return -1
}

type parser struct{ file string }

func (p *parser) errf(n *yaml.Node, format string, args ...any) *Error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &Error{File: p.file, Line: line, Message: fmt.Sprintf(format, args...)}
}

// syntax turns a YAML syntax error ("yaml: line 3: …") into file:line.
func (p *parser) syntax(err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.Index(rest, ":"); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				line, msg = n, strings.TrimSpace(rest[i+1:])
			}
		}
	}
	return &Error{File: p.file, Line: line, Message: "invalid YAML: " + msg}
}

// members checks that n is a mapping with string keys drawn from allowed, without
// duplicates, anchors, aliases or merge keys, and returns them in order.
func (p *parser) members(n *yaml.Node, what string, allowed ...string) ([]member, error) {
	if err := p.plain(n); err != nil {
		return nil, err
	}
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n, "%s: want a mapping, got %s", what, describe(n))
	}
	out := make([]member, 0, len(n.Content)/2)
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if err := p.plain(k); err != nil {
			return nil, err
		}
		if err := p.plain(v); err != nil {
			return nil, err
		}
		if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
			return nil, p.errf(k, "%s: keys must be plain strings", what)
		}
		if seen[k.Value] {
			return nil, p.errf(k, "%s: duplicate key %q", what, k.Value)
		}
		seen[k.Value] = true
		if allowed != nil && !slices.Contains(allowed, k.Value) {
			msg := fmt.Sprintf("%s: unknown key %q", what, k.Value)
			if s := nearest(k.Value, allowed); s != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", s)
			}
			return nil, p.errf(k, "%s; allowed: %s", msg, strings.Join(allowed, ", "))
		}
		out = append(out, member{k.Value, k, v})
	}
	return out, nil
}

type member struct {
	key  string
	kn   *yaml.Node
	node *yaml.Node
}

// plain refuses anchors, aliases and custom tags (a scenario is data, not a program).
func (p *parser) plain(n *yaml.Node) error {
	switch {
	case n.Kind == yaml.AliasNode:
		return p.errf(n, "aliases (*%s) are not supported", n.Value)
	case n.Anchor != "":
		return p.errf(n, "anchors (&%s) are not supported", n.Anchor)
	case n.Tag != "" && !strings.HasPrefix(n.Tag, "!!"):
		return p.errf(n, "custom tag %s is not supported", n.Tag)
	}
	return nil
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "null"
		case "!!str":
			return fmt.Sprintf("the string %q", n.Value)
		}
		return fmt.Sprintf("%s %s", strings.TrimPrefix(n.Tag, "!!"), n.Value)
	}
	return "an alias"
}

func (p *parser) str(n *yaml.Node, what string) (string, error) {
	if err := p.plain(n); err != nil {
		return "", err
	}
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" || n.Tag == "!!binary" {
		return "", p.errf(n, "%s: want a string, got %s", what, describe(n))
	}
	// An unquoted timestamp, number or boolean is its text: `now: 2026-06-01T09:00:00Z`.
	return n.Value, nil
}

func (p *parser) nonEmpty(n *yaml.Node, what string) (string, error) {
	s, err := p.str(n, what)
	if err == nil && strings.TrimSpace(s) == "" {
		err = p.errf(n, "%s: must not be empty", what)
	}
	return s, err
}

func (p *parser) strList(n *yaml.Node, what string) ([]string, error) {
	if err := p.plain(n); err != nil {
		return nil, err
	}
	if n.Kind != yaml.SequenceNode {
		return nil, p.errf(n, "%s: want a list of strings, got %s", what, describe(n))
	}
	out := make([]string, 0, len(n.Content))
	for i, c := range n.Content {
		s, err := p.nonEmpty(c, fmt.Sprintf("%s[%d]", what, i))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (p *parser) boolean(n *yaml.Node, what string) (bool, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		return false, p.errf(n, "%s: want true or false, got %s", what, describe(n))
	}
	return n.Value == "true", nil
}

func (p *parser) integer(n *yaml.Node, what string) (int, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		return 0, p.errf(n, "%s: want an integer, got %s", what, describe(n))
	}
	v, err := strconv.Atoi(n.Value)
	if err != nil {
		return 0, p.errf(n, "%s: want an integer, got %s", what, n.Value)
	}
	return v, nil
}

// value converts n to a JSON value (objects, arrays, strings, json.Number, booleans,
// null). Unquoted timestamps stay strings.
func (p *parser) value(n *yaml.Node, what string) (any, error) {
	if err := p.plain(n); err != nil {
		return nil, err
	}
	switch n.Kind {
	case yaml.MappingNode:
		ms, err := p.members(n, what)
		if err != nil {
			return nil, err
		}
		m := make(map[string]any, len(ms))
		for _, mb := range ms {
			v, err := p.value(mb.node, what+"."+mb.key)
			if err != nil {
				return nil, err
			}
			m[mb.key] = v
		}
		return m, nil
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			v, err := p.value(c, fmt.Sprintf("%s[%d]", what, i))
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return nil, nil
		case "!!bool":
			return n.Value == "true", nil
		case "!!int", "!!float":
			f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
			if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				if i, err2 := strconv.ParseInt(n.Value, 0, 64); err2 == nil {
					return json.Number(strconv.FormatInt(i, 10)), nil
				}
				return nil, p.errf(n, "%s: %s is not a JSON number", what, n.Value)
			}
			if isJSONNumber(n.Value) {
				return json.Number(n.Value), nil
			}
			if i, err := strconv.ParseInt(n.Value, 0, 64); err == nil {
				return json.Number(strconv.FormatInt(i, 10)), nil
			}
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
		case "!!binary":
			return nil, p.errf(n, "%s: binary values are not supported", what)
		}
		return n.Value, nil
	}
	return nil, p.errf(n, "%s: unsupported value", what)
}

func isJSONNumber(s string) bool {
	var v json.Number
	return json.Unmarshal([]byte(s), &v) == nil
}

// object converts a mapping to JSON object text.
func (p *parser) object(n *yaml.Node, what string) (json.RawMessage, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n, "%s: want a mapping (the tool's arguments object), got %s", what, describe(n))
	}
	v, err := p.value(n, what)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, p.errf(n, "%s: %v", what, err)
	}
	return b, nil
}

var contextKeys = []string{"as", "owner", "authority", "world", "purpose", "now"}

// contextField parses one context field (m.key is one of contextKeys) into c.
func (p *parser) contextField(m member, what string, c *Context) error {
	s, err := p.nonEmpty(m.node, what+"."+m.key)
	if err != nil {
		return err
	}
	switch m.key {
	case "as", "owner", "authority":
		a, err := kernel.ParseAddress(s)
		if err == nil {
			err = a.Validate()
		}
		if err != nil {
			return p.errf(m.node, "%s.%s: bad address %q: %v (want kind:id with kind human, agent, group or service)", what, m.key, s, err)
		}
	case "now":
		if _, err := kernel.ParseTimestamp(s); err != nil {
			return p.errf(m.node, "%s.now: bad instant %q: want an RFC 3339 date-time with an offset, e.g. 2026-06-01T09:00:00Z", what, s)
		}
	case "world":
		if t := strings.TrimSpace(s); t != s || len(s) > 256 {
			return p.errf(m.node, "%s.world: a world is an identifier of 1 to 256 characters", what)
		}
	case "purpose":
		if t := strings.TrimSpace(s); t != s || len(s) > 512 {
			return p.errf(m.node, "%s.purpose: 1 to 512 characters without surrounding white space", what)
		}
	}
	switch m.key {
	case "as":
		c.As = s
	case "owner":
		c.Owner = s
	case "authority":
		c.Authority = s
	case "world":
		c.World = s
	case "purpose":
		c.Purpose = s
	case "now":
		c.Now = s
	}
	return nil
}

func (p *parser) file1(n *yaml.Node, f *File) error {
	ms, err := p.members(n, "scenario", "version", "name", "root", "files", "grants", "context", "namespaces", "ceiling", "agents", "tests")
	if err != nil {
		return err
	}
	has := map[string]*yaml.Node{}
	for _, m := range ms {
		has[m.key] = m.kn
	}
	if has["version"] == nil {
		return p.errf(n, "scenario: missing version (want version: 1)")
	}
	if has["tests"] == nil {
		return p.errf(n, "scenario: missing tests")
	}
	for _, m := range ms {
		switch m.key {
		case "version":
			v, err := p.integer(m.node, "version")
			if err != nil || v != 1 {
				return p.errf(m.node, "version: want 1, got %s", m.node.Value)
			}
		case "name":
			if f.Name, err = p.nonEmpty(m.node, "name"); err != nil {
				return err
			}
		case "agents":
			if f.Agents, err = p.agents(m.node); err != nil {
				return err
			}
		case "root":
			s, err := p.nonEmpty(m.node, "root")
			if err != nil {
				return err
			}
			f.Root = p.rel(f.Dir, s)
			fi, err := os.Stat(f.Root)
			if err != nil || !fi.IsDir() {
				return p.errf(m.node, "root: %s is not a directory", s)
			}
		case "files":
			if err := p.files(m.node, f); err != nil {
				return err
			}
		case "grants":
			if err := p.grants(m.node, f); err != nil {
				return err
			}
		case "context":
			cms, err := p.members(m.node, "context", contextKeys...)
			if err != nil {
				return err
			}
			for _, cm := range cms {
				if err := p.contextField(cm, "context", &f.Context); err != nil {
					return err
				}
			}
		case "namespaces":
			if f.Namespaces, err = p.namespaceList(m.node, "namespaces"); err != nil {
				return err
			}
		case "ceiling":
			if err := p.ceiling(m.node, f); err != nil {
				return err
			}
		case "tests":
			if err := p.tests(m.node, f); err != nil {
				return err
			}
		}
	}
	if f.InlineGrants != nil {
		if err := p.checkInline(f, has["grants"]); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) rel(dir, s string) string {
	if filepath.IsAbs(s) {
		return filepath.Clean(s)
	}
	return filepath.Join(dir, filepath.FromSlash(s))
}

func (p *parser) namespaceList(n *yaml.Node, what string) ([]string, error) {
	l, err := p.strList(n, what)
	if err != nil {
		return nil, err
	}
	if _, err := kernel.ValidateEnabledToolNamespaces(l); err != nil {
		return nil, p.errf(n, "%s: %v", what, err)
	}
	return l, nil
}

func (p *parser) ceiling(n *yaml.Node, f *File) error {
	ms, err := p.members(n, "ceiling", "namespaces", "frozenPaths", "frozenActions")
	if err != nil {
		return err
	}
	for _, m := range ms {
		l, err := p.strList(m.node, "ceiling."+m.key)
		if err != nil {
			return err
		}
		switch m.key {
		case "namespaces":
			f.Ceiling.Namespaces = l
		case "frozenPaths":
			f.Ceiling.FrozenPaths = l
		case "frozenActions":
			f.Ceiling.FrozenActions = l
		}
	}
	return nil
}

func (p *parser) files(n *yaml.Node, f *File) error {
	ms, err := p.members(n, "files")
	if err != nil {
		return err
	}
	for _, m := range ms {
		what := fmt.Sprintf("files[%q]", m.key)
		dir := strings.HasSuffix(m.key, "/")
		clean := strings.TrimSuffix(m.key, "/")
		segs := strings.Split(clean, "/")
		if clean == "" || kernel.ValidatePath(segs) != nil || slices.Contains(segs, ".git") {
			return p.errf(m.kn, "%s: not a relative slash-separated path of valid segments", what)
		}
		e := InlineFile{Path: clean, Dir: dir, Line: m.kn.Line}
		switch {
		case dir:
			if m.node.Kind == yaml.ScalarNode && m.node.Tag == "!!null" {
				break
			}
			dm, err := p.members(m.node, what, "git")
			if err != nil {
				return err
			}
			for _, d := range dm {
				if e.Git, err = p.boolean(d.node, what+".git"); err != nil {
					return err
				}
			}
		default:
			if e.Content, err = p.str(m.node, what); err != nil {
				return p.errf(m.node, "%s: want the file's content as a string (a directory's key ends with /)", what)
			}
		}
		f.Files = append(f.Files, e)
	}
	return nil
}

func (p *parser) grants(n *yaml.Node, f *File) error {
	if n.Kind != yaml.SequenceNode {
		return p.errf(n, "grants: want a list of grant files and/or grants, got %s", describe(n))
	}
	var inline []any
	f.InlineGrantLines = map[string]int{}
	for i, c := range n.Content {
		what := fmt.Sprintf("grants[%d]", i)
		if c.Kind == yaml.ScalarNode {
			s, err := p.nonEmpty(c, what)
			if err != nil {
				return err
			}
			path := p.rel(f.Dir, s)
			if _, err := grantfile.Load(path); err != nil {
				return p.errf(c, "%s: grant file %s: %v", what, s, err)
			}
			if slices.Contains(f.GrantFiles, path) {
				return p.errf(c, "%s: grant file %s is named twice", what, s)
			}
			f.GrantFiles = append(f.GrantFiles, path)
			continue
		}
		v, err := p.value(c, what)
		if err != nil {
			return err
		}
		m, ok := v.(map[string]any)
		if !ok {
			return p.errf(c, "%s: want a grant file path or a grant mapping, got %s", what, describe(c))
		}
		id, _ := m["id"].(string)
		if id == "" {
			return p.errf(c, "%s: an inline grant needs an id", what)
		}
		if _, dup := f.InlineGrantLines[id]; dup {
			return p.errf(c, "%s: duplicate grant id %q", what, id)
		}
		f.InlineGrantLines[id] = c.Line
		inline = append(inline, m)
	}
	if inline != nil {
		doc := map[string]any{"version": 1, "grants": inline}
		b, err := json.Marshal(doc)
		if err != nil {
			return p.errf(n, "grants: %v", err)
		}
		f.InlineGrants = b
	}
	return nil
}

// checkInline runs the strict grant-file parser over the inline grants, in the file's
// world, and reports a refusal at the line of the grant it names.
func (p *parser) checkInline(f *File, at *yaml.Node) error {
	data := f.InlineGrantsFor(f.Context.World)
	if _, err := grantfile.Parse("inline.json", data); err != nil {
		ge, ok := err.(*grantfile.Error)
		line := at.Line
		msg := err.Error()
		if ok {
			if l, found := f.InlineGrantLines[ge.Grant]; found {
				line = l
			}
			ge.File, ge.Line = "", 0
			msg = ge.Error()
		}
		return &Error{File: p.file, Line: line, Message: "inline grant: " + msg}
	}
	return nil
}

// InlineGrantsFor returns the inline grant file with its context naming world (so that
// its grants belong to the scenario's world, as a hand-written file's do to its own).
func (f *File) InlineGrantsFor(world string) []byte {
	if f.InlineGrants == nil {
		return nil
	}
	if world == "" {
		return f.InlineGrants
	}
	var doc map[string]any
	_ = json.Unmarshal(f.InlineGrants, &doc)
	doc["context"] = map[string]any{"world": world}
	b, _ := json.Marshal(doc)
	return b
}

func (p *parser) tests(n *yaml.Node, f *File) error {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		return p.errf(n, "tests: want a non-empty list of tests, got %s", describe(n))
	}
	names := map[string]bool{}
	for i, c := range n.Content {
		what := fmt.Sprintf("tests[%d]", i)
		ms, err := p.members(c, what, append([]string{"name", "steps", "skip", "todo", "namespaces"}, contextKeys...)...)
		if err != nil {
			return err
		}
		t := Test{Line: c.Line}
		var steps *yaml.Node
		for _, m := range ms {
			switch m.key {
			case "name":
				if t.Name, err = p.nonEmpty(m.node, what+".name"); err != nil {
					return err
				}
				if strings.ContainsAny(t.Name, "\n\r") {
					return p.errf(m.node, "%s.name: must be one line", what)
				}
			case "steps":
				steps = m.node
			case "skip":
				if t.Skip, err = p.nonEmpty(m.node, what+".skip"); err != nil {
					return err
				}
			case "todo":
				if t.Todo, err = p.nonEmpty(m.node, what+".todo"); err != nil {
					return err
				}
			case "namespaces":
				if t.Namespaces, err = p.namespaceList(m.node, what+".namespaces"); err != nil {
					return err
				}
			default:
				if err := p.contextField(m, what, &t.Context); err != nil {
					return err
				}
			}
		}
		if t.Name == "" {
			return p.errf(c, "%s: missing name", what)
		}
		if names[t.Name] {
			return p.errf(c, "%s: duplicate test name %q", what, t.Name)
		}
		names[t.Name] = true
		if steps == nil {
			if t.Skip == "" && t.Todo == "" {
				return p.errf(c, "%s (%s): missing steps", what, t.Name)
			}
		} else if err := p.steps(steps, what, &t); err != nil {
			return err
		}
		f.Tests = append(f.Tests, t)
	}
	return nil
}

var stepKinds = []string{KindCall, KindList, KindExplain, KindNamespaces, KindEscalate, KindAudit, KindSend, KindReply}

func (p *parser) steps(n *yaml.Node, what string, t *Test) error {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		return p.errf(n, "%s.steps: want a non-empty list of steps, got %s", what, describe(n))
	}
	for i, c := range n.Content {
		sw := fmt.Sprintf("%s.steps[%d]", what, i)
		ms, err := p.members(c, sw, append(append([]string{}, stepKinds...), append([]string{"args", "payload", "expect"}, contextKeys...)...)...)
		if err != nil {
			return err
		}
		s := Step{Line: c.Line}
		var args, expect *yaml.Node
		for _, m := range ms {
			switch {
			case slices.Contains(stepKinds, m.key):
				if s.Kind != "" {
					return p.errf(m.kn, "%s: one step is one of %s; %s and %s are both set", sw, strings.Join(stepKinds, ", "), s.Kind, m.key)
				}
				s.Kind = m.key
				if err := p.stepValue(m, sw, &s); err != nil {
					return err
				}
			case m.key == "args":
				args = m.node
			case m.key == "payload":
				if s.Payload, err = p.payload(m.node, sw+".payload"); err != nil {
					return err
				}
			case m.key == "expect":
				expect = m.node
				s.expectKey = m.kn
			default:
				if err := p.contextField(m, sw, &s.Context); err != nil {
					return err
				}
			}
		}
		if s.Kind == "" {
			return p.errf(c, "%s: missing the step kind: one of %s", sw, strings.Join(stepKinds, ", "))
		}
		if (s.Kind == KindSend || s.Kind == KindReply) != (s.Payload != nil) {
			return p.errf(c, "%s: payload belongs to a send or reply step, and each needs one", sw)
		}
		if args != nil {
			if s.Kind != KindCall && s.Kind != KindExplain {
				return p.errf(args, "%s: args belongs to a call or explain step", sw)
			}
			if s.Args, err = p.object(args, sw+".args"); err != nil {
				return err
			}
		} else if s.Kind == KindCall || s.Kind == KindExplain {
			s.Args = json.RawMessage("{}")
		}
		if expect != nil {
			if s.Expect, err = p.expect(expect, sw+".expect", s.Kind); err != nil {
				return err
			}
			s.expectNode = expect
		}
		t.Steps = append(t.Steps, s)
	}
	return nil
}

func (p *parser) stepValue(m member, sw string, s *Step) error {
	var err error
	switch m.key {
	case KindCall, KindExplain:
		if s.Tool, err = p.nonEmpty(m.node, sw+"."+m.key); err != nil {
			return err
		}
	case KindSend:
		if s.To, err = p.nonEmpty(m.node, sw+".send"); err != nil {
			return err
		}
		if _, err := kernel.ParseAddress(s.To); err != nil {
			return p.errf(m.node, "%s.send: want the recipient, kind:id (%v)", sw, err)
		}
	case KindReply:
		if v, err := p.nonEmpty(m.node, sw+".reply"); err != nil || v != "last" {
			return p.errf(m.node, "%s.reply: want last (the step actor's newest pending message)", sw)
		}
	case KindEscalate:
		if s.Reason, err = p.nonEmpty(m.node, sw+".escalate"); err != nil {
			return p.errf(m.node, "%s.escalate: want the reason, a string", sw)
		}
	case KindList, KindAudit:
		if m.node.Kind == yaml.ScalarNode && m.node.Tag == "!!null" {
			return nil
		}
		if _, err := p.members(m.node, sw+"."+m.key, []string{}...); err != nil {
			return err
		}
		if len(m.node.Content) > 0 {
			return p.errf(m.node, "%s.%s: takes no options (write %s: {})", sw, m.key, m.key)
		}
	case KindNamespaces:
		ms, err := p.members(m.node, sw+".namespaces", "enable", "disable")
		if err != nil {
			return err
		}
		if len(ms) == 0 {
			return p.errf(m.node, "%s.namespaces: an empty patch (want enable: and/or disable:)", sw)
		}
		for _, nm := range ms {
			l, err := p.namespaceList(nm.node, sw+".namespaces."+nm.key)
			if err != nil {
				return err
			}
			if nm.key == "enable" {
				s.Patch.Enable = l
			} else {
				s.Patch.Disable = l
			}
		}
		if err := s.Patch.Validate(); err != nil {
			return p.errf(m.node, "%s.namespaces: %v", sw, err)
		}
	}
	return nil
}

// expect keys by step kind.
var expectKeys = map[string][]string{
	KindCall:       {"status", "code", "gate", "cause", "grant", "rejected", "output", "audit", "exit"},
	KindEscalate:   {"status", "code", "gate", "cause", "grant", "audit", "exit"},
	KindExplain:    {"allowed", "status", "code", "gate", "cause", "grant", "rejected", "fixes", "exit"},
	KindList:       {"includes", "excludes", "exit"},
	KindNamespaces: {"enabled", "exit"},
	KindAudit:      {"contains", "excludes"},
	KindSend:       {"status", "code", "audit", "exit"},
	KindReply:      {"status", "code", "audit", "exit"},
}

var (
	statuses = []string{"succeeded", "denied", "failed"}
	gates    = []string{"registration", "request", "grant", "ceiling", "infrastructure"}
	fixKinds = []string{"enable_namespace", "add_grant", "fix_arguments"}
)

func (p *parser) expect(n *yaml.Node, what, kind string) (*Expect, error) {
	ms, err := p.members(n, what, expectKeys[kind]...)
	if err != nil {
		return nil, err
	}
	e := &Expect{}
	oneOf := func(m member, vals []string) (*string, error) {
		s, err := p.nonEmpty(m.node, what+"."+m.key)
		if err != nil {
			return nil, err
		}
		if vals != nil && !slices.Contains(vals, s) {
			return nil, p.errf(m.node, "%s.%s: %q is not one of %s", what, m.key, s, strings.Join(vals, ", "))
		}
		return &s, nil
	}
	for _, m := range ms {
		e.keys = append(e.keys, m.key)
		switch m.key {
		case "status":
			vals := statuses
			if kind == KindEscalate {
				vals = []string{"escalated", "denied"}
			}
			if kind == KindSend || kind == KindReply {
				vals = []string{"accepted", "delivered", "denied", "failed"}
			}
			if e.Status, err = oneOf(m, vals); err != nil {
				return nil, err
			}
		case "code":
			e.Code, err = oneOf(m, nil)
		case "gate":
			e.Gate, err = oneOf(m, gates)
		case "cause":
			e.Cause, err = oneOf(m, nil)
		case "grant":
			e.Grant, err = oneOf(m, nil)
		case "rejected":
			var rm []member
			if rm, err = p.members(m.node, what+".rejected"); err != nil {
				return nil, err
			}
			e.Rejected = map[string]string{}
			for _, r := range rm {
				v, err := p.nonEmpty(r.node, what+".rejected."+r.key)
				if err != nil {
					return nil, err
				}
				e.Rejected[r.key] = v
			}
		case "output":
			e.Output, err = p.outputExpect(m.node, what+".output")
		case "audit":
			e.Audit, err = p.auditList(m.node, what+".audit")
			e.AuditSet = true
		case "exit":
			var v int
			if v, err = p.integer(m.node, what+".exit"); err == nil {
				if v < 0 || v > 5 {
					return nil, p.errf(m.node, "%s.exit: the CLI's exit codes are 0 to 5", what)
				}
				e.Exit = &v
			}
		case "allowed":
			var b bool
			if b, err = p.boolean(m.node, what+".allowed"); err == nil {
				e.Allowed = &b
			}
		case "fixes":
			if e.Fixes, err = p.strList(m.node, what+".fixes"); err == nil {
				for i, k := range e.Fixes {
					if !slices.Contains(fixKinds, k) {
						return nil, p.errf(m.node.Content[i], "%s.fixes: %q is not one of %s", what, k, strings.Join(fixKinds, ", "))
					}
				}
			}
			e.FixSet = true
		case "includes":
			e.Includes, err = p.strList(m.node, what+".includes")
		case "excludes":
			if kind == KindAudit {
				e.Absent, err = p.auditList(m.node, what+".excludes")
			} else {
				e.Excludes, err = p.strList(m.node, what+".excludes")
			}
		case "enabled":
			e.Enabled, err = p.strList(m.node, what+".enabled")
			e.EnSet = true
		case "contains":
			e.Contains, err = p.auditList(m.node, what+".contains")
		}
		if err != nil {
			return nil, err
		}
	}
	return e, nil
}

func (p *parser) outputExpect(n *yaml.Node, what string) (*OutputExpect, error) {
	ms, err := p.members(n, what, "contains", "excludes", "equals", "jsonpath")
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, p.errf(n, "%s: want contains, excludes, equals or jsonpath", what)
	}
	o := &OutputExpect{}
	for _, m := range ms {
		switch m.key {
		case "contains":
			if o.Contains, err = p.strOrList(m.node, what+".contains"); err != nil {
				return nil, err
			}
		case "excludes":
			if o.Excludes, err = p.strOrList(m.node, what+".excludes"); err != nil {
				return nil, err
			}
		case "equals":
			if o.Equals, err = p.value(m.node, what+".equals"); err != nil {
				return nil, err
			}
			o.EqualsSet = true
		case "jsonpath":
			pm, err := p.members(m.node, what+".jsonpath")
			if err != nil {
				return nil, err
			}
			for _, j := range pm {
				if _, err := parseJSONPath(j.key); err != nil {
					return nil, p.errf(j.kn, "%s.jsonpath: %q: %v", what, j.key, err)
				}
				v, err := p.value(j.node, what+".jsonpath."+j.key)
				if err != nil {
					return nil, err
				}
				o.JSONPath = append(o.JSONPath, PathExpect{Path: j.key, Value: v})
			}
		}
	}
	return o, nil
}

func (p *parser) auditList(n *yaml.Node, what string) ([]AuditMatch, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, p.errf(n, "%s: want a list of partial audit records, got %s", what, describe(n))
	}
	var out []AuditMatch
	for i, c := range n.Content {
		w := fmt.Sprintf("%s[%d]", what, i)
		ms, err := p.members(c, w, "type", "outcome", "code", "tool", "grant", "cause", "action", "consumed", "failClosed")
		if err != nil {
			return nil, err
		}
		if len(ms) == 0 {
			return nil, p.errf(c, "%s: an empty record matches anything; name a type, outcome, code, …", w)
		}
		a := AuditMatch{Line: c.Line}
		for _, m := range ms {
			switch m.key {
			case "consumed", "failClosed":
				b, err := p.boolean(m.node, w+"."+m.key)
				if err != nil {
					return nil, err
				}
				if m.key == "consumed" {
					a.Consumed = &b
				} else {
					a.FailClosed = &b
				}
				continue
			}
			s, err := p.nonEmpty(m.node, w+"."+m.key)
			if err != nil {
				return nil, err
			}
			switch m.key {
			case "type":
				a.Type = s
			case "outcome":
				a.Outcome = s
			case "code":
				a.Code = s
			case "tool":
				a.Tool = s
			case "grant":
				a.Grant = s
			case "cause":
				a.Cause = s
			case "action":
				a.Action = s
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// strOrList reads one string, or a list of strings, as a list.
func (p *parser) strOrList(n *yaml.Node, what string) ([]string, error) {
	if n.Kind == yaml.SequenceNode {
		return p.strList(n, what)
	}
	s, err := p.str(n, what)
	if err != nil {
		return nil, err
	}
	return []string{s}, nil
}

// agents reads the scenario's messaging recipients: a list of kind:id addresses.
func (p *parser) agents(n *yaml.Node) ([]string, error) {
	l, err := p.strList(n, "agents")
	if err != nil {
		return nil, err
	}
	for _, a := range l {
		if _, err := kernel.ParseAddress(a); err != nil {
			return nil, p.errf(n, "agents: %q is not an address (kind:id)", a)
		}
	}
	return l, nil
}

// payload reads a message payload: any value.
func (p *parser) payload(n *yaml.Node, what string) (json.RawMessage, error) {
	v, err := p.value(n, what)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
