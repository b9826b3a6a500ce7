package repoplane

import (
	"bytes"
	"errors"
	"io/fs"
	"strconv"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
)

// This file reads git's attributes (.gitattributes in each directory and
// .git/info/attributes) for the attributes sharedos applies itself, as data, or
// declines: see attributeTable (doc.go) for every attribute git knows.
// core.attributesFile and the global attributes file are never opened.

const maxAttrFileBytes = 1 << 20

// attrState is the state of one attribute for a path.
type attrState struct {
	set   bool   // the attribute is specified (set, unset or a value)
	unset bool   // "-attr"
	value string // "attr=value"; "" when set without a value
}

func (s attrState) isTrue() bool { return s.set && !s.unset && s.value == "" }

// attrLine is one pattern line of an attributes file.
type attrLine struct {
	pat    ignorePattern
	states []attrAssign
}

type attrAssign struct {
	name  string
	state attrState // set=false: "!attr" (back to unspecified)
}

type attrFile struct {
	lines []attrLine
}

// attrCache holds the attributes files of one operation, read on first use (only
// files that have to be hashed or diffed need their attributes).
type attrCache struct {
	r      *repo
	mu     sync.Mutex
	dirs   map[string]*attrFile // by directory ("" = top); nil file: none
	info   *attrFile
	macros map[string][]attrAssign
	loaded bool
	gone   map[string]bool // attributes files being removed from the index
}

func (r *repo) attributes() *attrCache {
	r.attrOnce.Do(func() { r.attrs = &attrCache{r: r, dirs: map[string]*attrFile{}} })
	return r.attrs
}

// fileAttrs are the attributes sharedos acts on.
type fileAttrs struct {
	text, eol, crlf, diff attrState
	filter, ident         attrState
	wtEncoding            attrState // working-tree-encoding
}

// lookup returns the attributes of path (repository-relative, a file).
func (c *attrCache) lookup(path string) fileAttrs {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loadBase()
	// sources by precedence: info/attributes, then the deepest .gitattributes up to
	// the top one; within a file the last matching line wins
	files := []*attrFile{c.info}
	dir := path
	for {
		i := strings.LastIndexByte(dir, '/')
		if i < 0 {
			dir = ""
		} else {
			dir = dir[:i]
		}
		files = append(files, c.dirFile(dir))
		if dir == "" {
			break
		}
	}
	got := map[string]attrState{}
	decided := map[string]bool{}
	var fill func(states []attrAssign, depth int)
	fill = func(states []attrAssign, depth int) {
		for i := len(states) - 1; i >= 0; i-- {
			a := states[i]
			if decided[a.name] {
				continue
			}
			decided[a.name] = true
			got[a.name] = a.state
			if m, ok := c.macros[a.name]; ok && a.state.isTrue() && depth < 8 {
				fill(m, depth+1)
			}
		}
	}
	for _, f := range files {
		if f == nil {
			continue
		}
		for i := len(f.lines) - 1; i >= 0; i-- {
			l := &f.lines[i]
			if l.pat.matches(path, false) {
				fill(l.states, 0)
			}
		}
	}
	return fileAttrs{text: got["text"], eol: got["eol"], crlf: got["crlf"], diff: got["diff"],
		filter: got["filter"], ident: got["ident"], wtEncoding: got["working-tree-encoding"]}
}

// loadBase reads info/attributes and the macros (built-in binary, and [attr] lines of
// the top .gitattributes and info/attributes).
func (c *attrCache) loadBase() {
	if c.loaded {
		return
	}
	c.loaded = true
	c.macros = map[string][]attrAssign{"binary": {
		{name: "diff", state: attrState{set: true, unset: true}},
		{name: "merge", state: attrState{set: true, unset: true}},
		{name: "text", state: attrState{set: true, unset: true}},
	}}
	if data, err := readFileLimited(c.r.git, "info/attributes", maxAttrFileBytes); err == nil {
		c.info = c.parse(data, "", true)
	}
}

func (c *attrCache) dirFile(dir string) *attrFile {
	if f, ok := c.dirs[dir]; ok {
		return f
	}
	name := ".gitattributes"
	if dir != "" {
		name = dir + "/.gitattributes"
	}
	var f *attrFile
	if data, ok := c.read(name); ok {
		f = c.parse(data, dir, dir == "")
	}
	c.dirs[dir] = f
	return f
}

// forget makes the index copy of the attributes file name unavailable (it is being
// removed from the index).
func (c *attrCache) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone == nil {
		c.gone = map[string]bool{}
	}
	c.gone[name] = true
	dir := ""
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		dir = name[:i]
	}
	delete(c.dirs, dir) // read again, without the index copy
}

// read returns an attributes file from the working tree or, when the working tree has
// none, from the index (git's order when adding).
func (c *attrCache) read(name string) ([]byte, bool) {
	data, err := readFileLimited(c.r.wt, name, maxAttrFileBytes)
	if err == nil {
		return data, true
	}
	if !errors.Is(err, fs.ErrNotExist) && !isNotDir(err) {
		return nil, false
	}
	e := c.r.indexEntry(name)
	if e == nil || e.mode != modeRegular && e.mode != modeExecutable || c.gone[name] {
		return nil, false
	}
	data, err = c.r.readBlobLimited(plumbing.Hash(e.hash), maxAttrFileBytes)
	return data, err == nil
}

// parse reads an attributes file found in dir; macros are only honoured at the top.
func (c *attrCache) parse(data []byte, dir string, macros bool) *attrFile {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	base := ""
	if dir != "" {
		base = dir + "/"
	}
	f := &attrFile{}
	for _, raw := range strings.Split(string(data), "\n") {
		line := strings.TrimLeft(raw, " \t\r\n")
		if line == "" || line[0] == '#' {
			continue
		}
		var pat string
		if line[0] == '"' {
			q, rest, ok := cutQuoted(line)
			if !ok {
				continue
			}
			pat, line = q, rest
		} else {
			i := strings.IndexAny(line, " \t\r\n")
			if i < 0 {
				i = len(line)
			}
			pat, line = line[:i], line[i:]
		}
		var states []attrAssign
		valid := true
		for _, tok := range strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' || r == '\r' || r == '\n' }) {
			a, ok := parseAttrAssign(tok)
			if !ok {
				valid = false
				break
			}
			states = append(states, a)
		}
		if !valid {
			continue // git skips a line with an invalid attribute name
		}
		if name, ok := strings.CutPrefix(pat, "[attr]"); ok {
			if macros && validAttrName(name) {
				c.macros[name] = states
			}
			continue
		}
		if strings.HasPrefix(pat, "!") {
			continue // negative patterns are forbidden in attributes files
		}
		p, ok := parseIgnoreLine(pat, base)
		if !ok {
			continue
		}
		f.lines = append(f.lines, attrLine{pat: p, states: states})
	}
	return f
}

func parseAttrAssign(tok string) (attrAssign, bool) {
	var a attrAssign
	switch tok[0] {
	case '-':
		a.name, a.state = tok[1:], attrState{set: true, unset: true}
	case '!':
		a.name = tok[1:]
	default:
		name, value, hasValue := strings.Cut(tok, "=")
		a.name, a.state = name, attrState{set: true, value: value}
		if hasValue && value == "" {
			a.state.value = "" // "attr=" is set to the empty string; treated as set
		}
	}
	return a, validAttrName(a.name)
}

// validAttrName: git's attribute names are ASCII letters, digits, "-", "_" and ".",
// not starting with "-".
func validAttrName(s string) bool {
	if s == "" || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// cutQuoted splits a leading C-quoted string off s.
func cutQuoted(s string) (string, string, bool) {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			q, err := strconv.Unquote(s[:i+1])
			if err != nil {
				return "", "", false
			}
			return q, s[i+1:], true
		}
	}
	return "", "", false
}

// indexEntry returns the stage-0 entry of the index loaded by this operation.
func (r *repo) indexEntry(name string) *idxEntry {
	if r.idx == nil {
		return nil
	}
	ents := r.idx.entries
	lo, hi := 0, len(ents)
	for lo < hi {
		m := (lo + hi) / 2
		if ents[m].name < name {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(ents) && ents[lo].name == name && ents[lo].stage() == 0 {
		return ents[lo]
	}
	return nil
}

// readBlobLimited returns the content of a blob of at most limit bytes (an error when it
// is larger), through the bounded object reader (objread.go). Calls from the walk's
// goroutines are serialised.
func (r *repo) readBlobLimited(h plumbing.Hash, limit int64) ([]byte, error) {
	r.objMu.Lock()
	defer r.objMu.Unlock()
	return r.readObject(h, plumbing.BlobObject, limit)
}

// attributeTable is every attribute git defines and what sharedos does with it:
// "applied" (as git applies it, as data), "declined" (the path is reported and left to
// git, with the code named), or "ignored" (it only shapes what sharedos never does).
// The package doc's "Attributes" table is this list; TestAttributeTableMatchesDoc
// holds them equal.
var attributeTable = []struct{ name, handling, what string }{
	{"text", "applied", "end-of-line conversion when staging and comparing (with core.autocrlf)"},
	{"eol", "applied", "makes a file text; its lf/crlf choice shapes only checkout"},
	{"crlf", "applied", "git's legacy spelling of text"},
	{"ident", "applied", "$Id: ...$ collapsed to $Id$ when staging and comparing; nothing expanded"},
	{"working-tree-encoding", "applied", "converted to UTF-8 when staging and comparing; unconvertible: encoding_unsupported"},
	{"diff", "applied", "-diff: binary; diff, diff=NAME: text, NAME's built-in funcname patterns"},
	{"binary", "applied", "the built-in macro -diff -merge -text"},
	{"filter", "declined", "never run: reported (filter), skipped under a directory, refused by name (filter_required)"},
	{"merge", "ignored", "sharedos never merges"},
	{"conflict-marker-size", "ignored", "sharedos never merges"},
	{"whitespace", "ignored", "shapes only git diff --check and git apply"},
	{"export-ignore", "ignored", "shapes only git archive"},
	{"export-subst", "ignored", "shapes only git archive"},
	{"delta", "ignored", "shapes only packing; sharedos writes loose objects"},
	{"encoding", "ignored", "shapes only gitk and git gui display"},
}
