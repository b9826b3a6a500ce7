package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sharedos/sharedos/internal/jsonschema"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// Source is the source of every gateway tool's definition.
const Source = "mcp"

// UnmappedAction is the action of a tool published by unmapped: gate.
const UnmappedAction = "call"

// Tool statuses in a server's listing.
const (
	StatusMapped  = "mapped"  // named in tools:, published with its template
	StatusGated   = "gated"   // unmapped, published at {namespace, [tool]} / call
	StatusHidden  = "hidden"  // unmapped, not published (unmapped: hide)
	StatusSkipped = "skipped" // cannot be published (see its note)
	StatusMissing = "missing" // named in tools: but not offered by the server
)

// Entry is one tool of a server's listing: what the upstream offers and what sharedos
// makes of it.
type Entry struct {
	Upstream  string `json:"upstream"`
	Published string `json:"published,omitempty"`
	Status    string `json:"status"`
	Action    string `json:"action,omitempty"`
	// Resource is the requirement template, "namespace:[elem, …]".
	Resource string `json:"resource,omitempty"`
	Note     string `json:"note,omitempty"`

	def     kernel.ToolDefinition
	mapping *ToolMap
	schema  *lazySchema
}

// lazySchema is an input schema compiled at most once per upstream list: at once for a
// held list and a listing, on the first call for a CLI command (a listing from the cache
// then costs no compilation; a schema that does not compile fails that call
// invalid_tool_arguments).
type lazySchema struct {
	once sync.Once
	doc  map[string]any
	sch  *jsonschema.Schema
	err  error
}

func (l *lazySchema) get() (*jsonschema.Schema, error) {
	l.once.Do(func() { l.sch, l.err = compileSchema(l.doc) })
	return l.sch, l.err
}

// catalog is a server's upstream tool list as sharedos publishes it: built (and every
// input schema compiled) once per upstream list.
type catalog struct {
	entries  []*Entry
	byName   map[string]*Entry // published name → entry
	warnings []string
}

// buildCatalog maps an upstream tool list through the server's configuration. It is
// pure.
func buildCatalog(s *Server, tools []*mcp.Tool, eager bool) *catalog {
	c := &catalog{byName: map[string]*Entry{}}
	offered := map[string]bool{}
	for _, t := range tools {
		if t == nil {
			continue
		}
		offered[t.Name] = true
		e := buildEntry(s, t, eager)
		if e.Status == StatusSkipped {
			c.warnings = append(c.warnings, fmt.Sprintf("server %s: tool %q skipped: %s", s.ID, t.Name, e.Note))
		}
		if e.Status == StatusMapped || e.Status == StatusGated {
			if _, dup := c.byName[e.Published]; dup {
				e.Status, e.Note = StatusSkipped, "the server offers two tools of this name"
				c.warnings = append(c.warnings, fmt.Sprintf("server %s: tool %q skipped: offered twice", s.ID, t.Name))
			} else {
				c.byName[e.Published] = e
			}
		}
		c.entries = append(c.entries, e)
	}
	for _, name := range sortedKeys(s.Tools) {
		if !offered[name] {
			m := s.Tools[name]
			c.entries = append(c.entries, &Entry{Upstream: name, Status: StatusMissing, Action: m.Action, Resource: m.Template(),
				Note: "named in tools: but not offered by the server"})
		}
	}
	sort.SliceStable(c.entries, func(i, j int) bool { return c.entries[i].Upstream < c.entries[j].Upstream })
	return c
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func buildEntry(s *Server, t *mcp.Tool, eager bool) *Entry {
	e := &Entry{Upstream: t.Name}
	m := s.Tools[t.Name]
	switch {
	case m != nil:
		e.Status, e.Action, e.Resource, e.mapping = StatusMapped, m.Action, m.Template(), m
	case s.Unmapped == UnmappedGate:
		e.Status, e.Action = StatusGated, UnmappedAction
		if err := kernel.ValidatePathSegment(t.Name); err != nil {
			e.Status, e.Note = StatusSkipped, "its name is not a canonical path segment, so unmapped: gate cannot name it"
			return e
		}
		e.Resource = s.Namespace + ":[" + t.Name + "]"
		e.mapping = &ToolMap{Name: t.Name, Action: UnmappedAction, Namespace: s.Namespace, Path: []Elem{{Literal: t.Name}}}
	default:
		e.Status = StatusHidden
		return e
	}
	published := s.Namespace + "." + t.Name
	if !kernel.ValidToolName(published) {
		e.Status, e.mapping = StatusSkipped, nil
		e.Note = fmt.Sprintf("%q cannot be a tool name (1 to 128 characters of A-Z a-z 0-9 _ . -)", published)
		return e
	}
	def, err := definition(s, t, e.mapping, published)
	if err != nil {
		e.Status, e.Note, e.mapping = StatusSkipped, err.Error(), nil
		return e
	}
	e.Published = published
	e.def, e.schema = def, &lazySchema{doc: def.InputSchema}
	if eager {
		if _, err := e.schema.get(); err != nil {
			e.Status, e.Note, e.mapping, e.Published = StatusSkipped, "its input schema cannot be compiled: "+err.Error(), nil, ""
		}
	}
	return e
}

// compiled returns the catalogue with every pending schema compiled: a tool whose schema
// does not compile is skipped. c itself is not changed.
func (c *catalog) compiled(s *Server) *catalog {
	out := &catalog{byName: map[string]*Entry{}, warnings: c.warnings}
	for _, e := range c.entries {
		if e.schema != nil {
			if _, err := e.schema.get(); err != nil && e.Status != StatusSkipped {
				cp := *e
				cp.Status, cp.Note, cp.mapping, cp.Published = StatusSkipped, "its input schema cannot be compiled: "+err.Error(), nil, ""
				out.warnings = append(out.warnings, fmt.Sprintf("server %s: tool %q skipped: %s", s.ID, e.Upstream, cp.Note))
				e = &cp
			}
		}
		out.entries = append(out.entries, e)
		if e.Status == StatusMapped || e.Status == StatusGated {
			out.byName[e.Published] = e
		}
	}
	return out
}

// definition builds the kernel definition of an upstream tool: passed through, with a
// conservative class.
func definition(s *Server, t *mcp.Tool, m *ToolMap, name string) (kernel.ToolDefinition, error) {
	d := kernel.ToolDefinition{Name: name, Namespace: s.Namespace, Source: Source, ReadWrite: kernel.ClassWrite,
		RequiredCapability: kernel.CapabilityRequirement{Resource: kernel.ResourceRef{Namespace: m.Namespace, Path: []string{}}, Action: m.Action}}
	// The declared ceiling is the resource namespace's root: every requirement the
	// template can resolve lies inside it.
	d.Description = strings.TrimSpace(t.Description)
	if d.Description == "" {
		d.Description = fmt.Sprintf("Tool %s of the MCP server %s.", t.Name, s.ID)
	}
	d.Description = cutRunes(d.Description, 8000)
	in, err := schemaMap(t.InputSchema)
	if err != nil || in == nil {
		return d, fmt.Errorf("its input schema is not a JSON object")
	}
	if ty, ok := in["type"]; ok && ty != "object" {
		return d, fmt.Errorf("its input schema is not an object schema")
	}
	d.InputSchema = in
	if t.OutputSchema != nil {
		out, err := schemaMap(t.OutputSchema)
		if err == nil && out != nil && out["type"] == "object" {
			d.OutputSchema = out
		}
	}
	meta := map[string]any{"server": s.ID, "upstreamName": t.Name, "requirement": m.Action + " on " + m.Template()}
	if len(t.Meta) > 0 {
		meta["upstream"] = map[string]any(t.Meta)
	}
	d.Metadata = meta
	if a := t.Annotations; a != nil {
		ann := &kernel.ToolAnnotations{}
		destructive := a.DestructiveHint != nil && *a.DestructiveHint
		if a.ReadOnlyHint && !destructive {
			d.ReadWrite = kernel.ClassRead
			ann.ReadOnly = kernel.BoolPtr(true)
		}
		if a.DestructiveHint != nil && d.ReadWrite == kernel.ClassWrite {
			ann.Destructive = kernel.BoolPtr(*a.DestructiveHint)
		}
		if a.IdempotentHint {
			ann.Idempotent = kernel.BoolPtr(true)
		}
		if ann.ReadOnly != nil || ann.Destructive != nil || ann.Idempotent != nil {
			d.Annotations = ann
		}
		if a.Title != "" {
			meta["title"] = a.Title
		}
	}
	if err := d.Validate(); err != nil {
		return d, fmt.Errorf("its definition cannot be published: %v", err)
	}
	return d, nil
}

func cutRunes(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max])
}

// schemaMap turns a schema as the SDK hands it (a map, or raw JSON) into a map.
func schemaMap(v any) (map[string]any, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// compileSchema compiles an input schema with no loader: a $ref to anything outside
// the schema itself (a file, a URL) is refused, never fetched.
func compileSchema(m map[string]any) (*jsonschema.Schema, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{})
	if err := c.AddResource("urn:sharedos:gateway:input", doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile("urn:sharedos:gateway:input")
	if err != nil {
		return nil, firstLine(err)
	}
	return sch, nil
}

func firstLine(err error) error {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return fmt.Errorf("%s", s)
}

// parsedCall is what a gateway tool's ParseArguments hands the kernel: the arguments
// to forward (re-encoded from the value the template read, never the caller's bytes)
// and the resolved resource path.
type parsedCall struct {
	raw  json.RawMessage
	path []string
}

// parse decodes a call's arguments once (DecodeArguments), validates that value against
// the upstream's input schema, resolves the template on it, and re-encodes it for the
// upstream, so that the resource authorized is the one the upstream reads. Any error is
// invalid_tool_arguments, before authorization.
func (e *Entry) parse(raw json.RawMessage) (any, error) {
	args, err := DecodeArguments(raw)
	if err != nil {
		return nil, err
	}
	sch, err := e.schema.get()
	if err != nil {
		return nil, fmt.Errorf("the tool's input schema cannot be compiled: %v", err)
	}
	if err := sch.Validate(args); err != nil {
		return nil, fmt.Errorf("the arguments do not match the tool's input schema: %s", schemaMessage(err))
	}
	path, err := e.mapping.Resolve(args)
	if err != nil {
		return nil, err
	}
	fwd, err := EncodeArguments(args)
	if err != nil {
		return nil, err
	}
	return &parsedCall{raw: fwd, path: path}, nil
}

// schemaMessage is a validation error in one line, at most 512 bytes.
func schemaMessage(err error) string {
	s := err.Error()
	if ve, ok := err.(*jsonschema.ValidationError); ok {
		// the leaf causes say what is wrong; the root says only "validation failed"
		var leaves []string
		var walk func(v *jsonschema.ValidationError)
		walk = func(v *jsonschema.ValidationError) {
			if len(v.Causes) == 0 {
				loc := "/" + strings.Join(v.InstanceLocation, "/")
				leaves = append(leaves, fmt.Sprintf("at %s: %s", loc, v.ErrorKind.LocalizedString(englishPrinter)))
				return
			}
			for _, c := range v.Causes {
				walk(c)
			}
		}
		walk(ve)
		if len(leaves) > 0 {
			s = strings.Join(leaves, "; ")
		}
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 512 {
		s = s[:509] + "..."
	}
	return s
}

var englishPrinter = message.NewPrinter(language.English)
