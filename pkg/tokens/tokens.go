// Package tokens is the tokens file of `sharedos mcp --listen` (spec 50 §3): the bearer
// tokens an HTTP client may present, each mapped to the access context and grant files it
// runs under. The file never holds a token, only its SHA-256; a token is shown once, when
// it is created.
//
//	version: 1
//	tokens:
//	  - id: alice-laptop                 # shown in logs and audit, never the token
//	    sha256: 9f2c…                    # hex SHA-256 of the token
//	    context: {actor: agent:helper, owner: human:alice, world: default, purpose: triage}
//	    grants: [grants/alice.yaml]      # relative to the tokens file
//	    expiresAt: 2027-01-01T00:00:00Z  # optional
//	    role: operator                   # optional: agent (default) or operator
//
// Parsing is strict (unknown keys, duplicate keys and ids, bad values are refused with
// file:line), and a file is accepted or refused as a whole. The package authenticates
// (token → entry, constant-time on the hash) and edits the file (Append, Remove) without
// touching a byte of the other entries. It never authorizes: an entry only names the
// context and the grant files the kernel then decides under.
package tokens

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// MaxFileSize is the largest tokens file accepted (1 MiB).
const MaxFileSize = 1 << 20

// Prefix starts every token New mints, so that secret scanners and people recognise one.
const Prefix = "sharedos_"

// Context is an entry's access context. Actor is required; a field left unset is
// resolved as the CLI resolves a missing flag: from the token's grant files' context,
// else the default (owner: the actor; authority: the owner; world "default"; purpose
// "cli").
type Context struct {
	Actor     kernel.Address
	Owner     *kernel.Address
	Authority *kernel.Address
	World     string
	Purpose   string
}

// Entry is one token of the file.
type Entry struct {
	ID string
	// SHA256 is the lowercase hex SHA-256 of the token.
	SHA256  string
	Context Context
	// Grants are the entry's grant files, absolute (relative ones resolved against the
	// tokens file's folder).
	Grants []string
	// ExpiresAt is when the token stops being accepted; zero: never.
	ExpiresAt time.Time
	// Role is RoleAgent (the default) or RoleOperator: an operator token may also use
	// the operator routes of `serve` (/v1/admin/…); it never widens what the kernel lets
	// the token's context do.
	Role string
	// Line is the line of the entry in the file.
	Line int
}

// Expired reports whether the entry's token is no longer accepted at now.
func (e *Entry) Expired(now time.Time) bool {
	return !e.ExpiresAt.IsZero() && !now.Before(e.ExpiresAt)
}

// Roles of a token.
const (
	RoleAgent    = "agent"
	RoleOperator = "operator"
)

// File is a parsed tokens file.
type File struct {
	Path    string
	Entries []Entry
}

// Error reports why a tokens file (or an edit of one) was refused, as one line:
// "tokens.yaml:7: token "alice": sha256: must be 64 lowercase hex digits".
type Error struct {
	File    string
	Line    int
	Token   string
	Message string
	cause   error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Token != "" {
		b.WriteString("token " + strconv.Quote(e.Token) + ": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// Unwrap returns the I/O error that caused the refusal, if any.
func (e *Error) Unwrap() error { return e.cause }

// ErrNotFound is returned (wrapped) by Remove for an id the file does not hold.
var ErrNotFound = errors.New("no such token")

// ErrDuplicate is returned (wrapped) by Append for an id the file already holds.
var ErrDuplicate = errors.New("duplicate token id")

var idPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`) }) // compiled on first use, not at every start
var hexPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{64}$`) })                    // compiled on first use, not at every start

// ValidID reports whether id is a token id: 1–128 characters of [A-Za-z0-9._-], starting
// with a letter or digit (it goes to logs and audit records as is).
func ValidID(id string) bool { return idPattern().MatchString(id) }

// New mints a token: Prefix and 256 bits from crypto/rand, base64url without padding.
func New() (string, error) {
	var b [32]byte
	if _, err := io.ReadFull(rand.Reader, b[:]); err != nil {
		return "", fmt.Errorf("read random bytes: %w", err)
	}
	return Prefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Hash is the lowercase hex SHA-256 of a token, as the file stores it.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Lookup returns the entry whose hash is the token's, or nil. The comparison is
// constant-time on the hashes and visits every entry, so its duration does not depend on
// which entry (if any) matched. Expiry is not checked (see Entry.Expired).
func (f *File) Lookup(token string) *Entry {
	if f == nil {
		return nil
	}
	sum := sha256.Sum256([]byte(token))
	var found *Entry
	for i := range f.Entries {
		want, err := hex.DecodeString(f.Entries[i].SHA256)
		if err != nil || len(want) != len(sum) {
			continue
		}
		if subtle.ConstantTimeCompare(want, sum[:]) == 1 && found == nil {
			found = &f.Entries[i]
		}
	}
	return found
}

// Get returns the entry with id, or nil.
func (f *File) Get(id string) *Entry {
	for i := range f.Entries {
		if f.Entries[i].ID == id {
			return &f.Entries[i]
		}
	}
	return nil
}

// Load reads and parses the tokens file at path.
func Load(path string) (*File, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Message: "cannot read tokens file: " + pathErr(err), cause: err}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, &Error{File: path, Message: "cannot read tokens file: " + pathErr(err), cause: err}
	}
	return data, nil
}

func pathErr(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// Parse parses a tokens file held in memory; path names it in errors and is the folder
// relative grant files are resolved against. The result is a valid *File or (nil, *Error).
func Parse(path string, data []byte) (*File, error) {
	f, _, err := parse(path, data)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// parsed is a file with the nodes it was read from (for Append and Remove).
type parsed struct {
	doc    *yaml.Node // the root mapping
	tokKey *yaml.Node // the "tokens" key, nil when absent
	tokVal *yaml.Node // its value
}

func parse(path string, data []byte) (*File, *parsed, *Error) {
	fail := func(line int, format string, args ...any) (*File, *parsed, *Error) {
		return nil, nil, &Error{File: path, Line: line, Message: fmt.Sprintf(format, args...)}
	}
	if len(data) > MaxFileSize {
		return fail(0, "tokens file is larger than %d MiB", MaxFileSize>>20)
	}
	if !utf8.Valid(data) {
		i := 0
		for i < len(data) {
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return fail(1+bytes.Count(data[:i], []byte{'\n'}), "tokens file is not valid UTF-8")
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return fail(1, "tokens file is empty; it must start with 'version: 1'")
		}
		return fail(yamlLine(err), "%s", yamlMessage(err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return fail(extra.Line, "a tokens file holds one YAML document")
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fail(root.Line, "a tokens file is a mapping with version and tokens")
	}
	p := &parsed{doc: root}
	f := &File{Path: path}
	seen := map[string]int{}
	version := false
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if first, dup := seen[k.Value]; dup {
			return fail(k.Line, "key %q is given twice (first at line %d)", k.Value, first)
		}
		seen[k.Value] = k.Line
		switch k.Value {
		case "version":
			if v.Kind != yaml.ScalarNode || v.Value != "1" || v.Tag != "!!int" {
				return fail(v.Line, "version must be 1")
			}
			version = true
		case "tokens":
			p.tokKey, p.tokVal = k, v
		default:
			return fail(k.Line, "unknown key %q (a tokens file has version and tokens)", k.Value)
		}
	}
	if !version {
		return fail(root.Line, "version is missing; a tokens file starts with 'version: 1'")
	}
	if p.tokVal != nil && !isNull(p.tokVal) {
		if p.tokVal.Kind != yaml.SequenceNode {
			return fail(p.tokVal.Line, "tokens must be a list")
		}
		ids, hashes := map[string]int{}, map[string]int{}
		for _, n := range p.tokVal.Content {
			e, err := entry(path, n)
			if err != nil {
				return nil, nil, err
			}
			if first, dup := ids[e.ID]; dup {
				return nil, nil, &Error{File: path, Line: e.Line, Token: e.ID, Message: fmt.Sprintf("id is given twice (first at line %d)", first)}
			}
			if first, dup := hashes[e.SHA256]; dup {
				return nil, nil, &Error{File: path, Line: e.Line, Token: e.ID, Message: fmt.Sprintf("sha256 is the same as the token's at line %d", first)}
			}
			ids[e.ID], hashes[e.SHA256] = e.Line, e.Line
			f.Entries = append(f.Entries, e)
		}
	}
	return f, p, nil
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

var yamlLineRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`line (\d+)`) }) // compiled on first use, not at every start

func yamlLine(err error) int {
	if m := yamlLineRE().FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

func yamlMessage(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = yamlLineRE().ReplaceAllString(msg, "")
	msg = strings.TrimPrefix(strings.TrimSpace(msg), ": ")
	return "invalid YAML: " + strings.ReplaceAll(msg, "\n", " ")
}

// entry parses one item of the tokens list.
func entry(path string, n *yaml.Node) (Entry, *Error) {
	e := Entry{Line: n.Line, Role: RoleAgent}
	fail := func(line int, format string, args ...any) (Entry, *Error) {
		return Entry{}, &Error{File: path, Line: line, Token: e.ID, Message: fmt.Sprintf(format, args...)}
	}
	if n.Kind != yaml.MappingNode {
		return fail(n.Line, "a token is a mapping with id, sha256, context, grants and expiresAt")
	}
	seen := map[string]int{}
	// the id first, so that every later error names the token
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k, v := n.Content[i], n.Content[i+1]; k.Value == "id" {
			if v.Kind != yaml.ScalarNode || isNull(v) || !ValidID(v.Value) {
				return fail(v.Line, "id must be 1 to 128 characters of letters, digits, '.', '_' and '-', starting with a letter or digit")
			}
			e.ID = v.Value
		}
	}
	hasCtx := false
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if first, dup := seen[k.Value]; dup {
			return fail(k.Line, "key %q is given twice (first at line %d)", k.Value, first)
		}
		seen[k.Value] = k.Line
		str := func() (string, bool) {
			return v.Value, v.Kind == yaml.ScalarNode && !isNull(v)
		}
		switch k.Value {
		case "id":
		case "sha256":
			s, ok := str()
			if !ok || !hexPattern().MatchString(s) {
				return fail(v.Line, "sha256 must be 64 lowercase hex digits (the SHA-256 of the token; 'sharedos tokens create' writes it)")
			}
			e.SHA256 = s
		case "context":
			c, err := context(path, e.ID, v)
			if err != nil {
				return Entry{}, err
			}
			e.Context, hasCtx = c, true
		case "grants":
			var list []*yaml.Node
			switch {
			case isNull(v):
			case v.Kind == yaml.SequenceNode:
				list = v.Content
			default:
				return fail(v.Line, "grants must be a list of grant file paths")
			}
			for _, g := range list {
				if g.Kind != yaml.ScalarNode || isNull(g) || strings.TrimSpace(g.Value) == "" {
					return fail(g.Line, "grants must be a list of grant file paths")
				}
				p := g.Value
				if !filepath.IsAbs(p) {
					p = filepath.Join(filepath.Dir(absOr(path)), p)
				}
				e.Grants = append(e.Grants, filepath.Clean(p))
			}
		case "expiresAt":
			s, ok := str()
			if !ok {
				return fail(v.Line, "expiresAt must be an RFC 3339 date-time with an offset, e.g. 2027-01-01T00:00:00Z")
			}
			ms, err := kernel.ParseTimestamp(s)
			if err != nil {
				return fail(v.Line, "expiresAt must be an RFC 3339 date-time with an offset, e.g. 2027-01-01T00:00:00Z")
			}
			e.ExpiresAt = time.UnixMilli(ms).UTC()
		case "role":
			s, ok := str()
			if !ok || (s != RoleAgent && s != RoleOperator) {
				return fail(v.Line, "role must be agent or operator")
			}
			e.Role = s
		default:
			return fail(k.Line, "unknown key %q (a token has id, sha256, context, grants, expiresAt and role)", k.Value)
		}
	}
	switch {
	case e.ID == "":
		return fail(n.Line, "id is missing")
	case e.SHA256 == "":
		return fail(n.Line, "sha256 is missing")
	case !hasCtx:
		return fail(n.Line, "context is missing (it names at least the actor)")
	}
	return e, nil
}

func absOr(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// context parses an entry's context mapping.
func context(path, id string, n *yaml.Node) (Context, *Error) {
	var c Context
	fail := func(line int, format string, args ...any) (Context, *Error) {
		return Context{}, &Error{File: path, Line: line, Token: id, Message: fmt.Sprintf(format, args...)}
	}
	if n.Kind != yaml.MappingNode {
		return fail(n.Line, "context must be a mapping of actor, owner, authority, world and purpose")
	}
	seen := map[string]int{}
	hasActor := false
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if first, dup := seen[k.Value]; dup {
			return fail(k.Line, "context.%s is given twice (first at line %d)", k.Value, first)
		}
		seen[k.Value] = k.Line
		if v.Kind != yaml.ScalarNode || isNull(v) {
			return fail(v.Line, "context.%s must be a string", k.Value)
		}
		addr := func() (kernel.Address, *Error) {
			a, err := kernel.ParseAddress(v.Value)
			if err == nil {
				err = a.Validate()
			}
			if err != nil {
				_, e := fail(v.Line, "context.%s: %q is not an address kind:id (kind human, agent, group or service)", k.Value, v.Value)
				return a, e
			}
			return a, nil
		}
		switch k.Value {
		case "actor":
			a, err := addr()
			if err != nil {
				return Context{}, err
			}
			c.Actor, hasActor = a, true
		case "owner", "authority":
			a, err := addr()
			if err != nil {
				return Context{}, err
			}
			if k.Value == "owner" {
				c.Owner = &a
			} else {
				c.Authority = &a
			}
		case "world":
			if t := strings.TrimSpace(v.Value); t != v.Value || t == "" || len(t) > 256 {
				return fail(v.Line, "context.world must be 1 to 256 characters without surrounding white space")
			}
			c.World = v.Value
		case "purpose":
			if t := strings.TrimSpace(v.Value); t != v.Value || t == "" || utf8.RuneCountInString(t) > 512 {
				return fail(v.Line, "context.purpose must be 1 to 512 characters without surrounding white space")
			}
			c.Purpose = v.Value
		default:
			return fail(k.Line, "unknown key context.%s (a context has actor, owner, authority, world and purpose)", k.Value)
		}
	}
	if !hasActor {
		return fail(n.Line, "context.actor is missing")
	}
	return c, nil
}
