package repoplane

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
)

const maxIgnoreFileBytes = 1 << 20

// ignoreRules are the exclude patterns in force in one directory: .git/info/exclude,
// then each .gitignore from the top down to it. As in git, the last pattern that
// matches decides, so a deeper .gitignore overrides a shallower one and both override
// info/exclude, which override the operator's excludes files (ProviderOptions.ExcludesFiles:
// git's core.excludesFile and global ignore file, named by the operator, never by the
// repository's own configuration).
type ignoreRules struct {
	pats []ignorePattern
}

// ignorePattern is one line of an ignore file, parsed as git's parse_path_pattern does.
type ignorePattern struct {
	pattern   string // without "!", the trailing "/" and a leading "/"
	base      string // the directory of the ignore file ("" at the top), with a trailing "/"
	negative  bool   // "!pattern": re-include
	mustBeDir bool   // "pattern/": directories only
	noDir     bool   // no "/" inside: matched against the last component only
	literal   bool   // no wildcard at all: compared, not matched
}

// parseIgnoreFile turns the content of an ignore file found in directory dir ("" or
// "a/b") into patterns: a UTF-8 byte order mark is skipped, lines end at LF (a CR
// before it is dropped), lines starting with "#" and empty lines are skipped, and
// trailing spaces are trimmed unless escaped with a backslash.
func parseIgnoreFile(data []byte, dir string) []ignorePattern {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	base := ""
	if dir != "" {
		base = dir + "/"
	}
	var out []ignorePattern
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if p, ok := parseIgnoreLine(trimTrailingSpaces(string(line)), base); ok {
			out = append(out, p)
		}
	}
	return out
}

// trimTrailingSpaces removes trailing spaces that are not escaped ("\ " stays).
func trimTrailingSpaces(s string) string {
	lastSpace := -1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ':
			if lastSpace < 0 {
				lastSpace = i
			}
		case '\\':
			i++
			if i >= len(s) {
				return s
			}
			lastSpace = -1
		default:
			lastSpace = -1
		}
	}
	if lastSpace >= 0 {
		return s[:lastSpace]
	}
	return s
}

func parseIgnoreLine(s, base string) (ignorePattern, bool) {
	p := ignorePattern{base: base}
	if strings.HasPrefix(s, "!") {
		p.negative = true
		s = s[1:]
	}
	if strings.HasSuffix(s, "/") {
		p.mustBeDir = true
		s = s[:len(s)-1]
	}
	p.noDir = strings.IndexByte(s, '/') < 0
	s = strings.TrimPrefix(s, "/")
	if s == "" {
		return p, false // matches nothing
	}
	p.pattern = s
	p.literal = !strings.ContainsAny(s, "*?[\\")
	return p, true
}

// matches reports whether the pattern applies to path (repository-relative).
func (p *ignorePattern) matches(path string, isDir bool) bool {
	if p.mustBeDir && !isDir {
		return false
	}
	if p.noDir {
		name := path[strings.LastIndexByte(path, '/')+1:]
		if p.literal {
			return name == p.pattern
		}
		return wildmatch(p.pattern, name, 0)
	}
	rest, ok := strings.CutPrefix(path, p.base)
	if !ok {
		return false
	}
	if p.literal {
		return rest == p.pattern
	}
	return wildmatch(p.pattern, rest, wmPathname)
}

// with returns the rules extended by the patterns of data, found in directory dir.
func (ir *ignoreRules) with(data []byte, dir string) *ignoreRules {
	add := parseIgnoreFile(data, dir)
	if len(add) == 0 {
		return ir
	}
	out := &ignoreRules{pats: make([]ignorePattern, 0, len(ir.pats)+len(add))}
	out.pats = append(append(out.pats, ir.pats...), add...)
	return out
}

// match reports whether path itself is excluded by the rules (the last matching
// pattern decides). Whether a directory above it is excluded is the caller's concern:
// git never looks inside an excluded directory, so nothing in it can be re-included.
func (ir *ignoreRules) match(path string, isDir bool) bool {
	if ir == nil {
		return false
	}
	for i := len(ir.pats) - 1; i >= 0; i-- {
		if ir.pats[i].matches(path, isDir) {
			return !ir.pats[i].negative
		}
	}
	return false
}

// loadIgnoreFile reads a regular ignore file through dir; links and oversized files are
// skipped (git refuses to follow a symbolic .gitignore too).
func loadIgnoreFile(dir *os.Root, name string) []byte {
	data, err := readFileLimited(dir, name, maxIgnoreFileBytes)
	if err != nil {
		return nil
	}
	return data
}

// baseIgnore returns the repository-wide rules: the operator's excludes files
// (ProviderOptions.ExcludesFiles, git's core.excludesFile), then .git/info/exclude,
// which takes precedence over them as in git.
func (r *repo) baseIgnore() *ignoreRules {
	ir := &ignoreRules{}
	for _, data := range r.excludes {
		ir = ir.with(data, "")
	}
	if data := loadIgnoreFile(r.git, "info/exclude"); data != nil {
		ir = ir.with(data, "")
	}
	return ir
}

func splitPath(p string) []string {
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// DefaultExcludesFile is the running user's global git ignore file, as git finds it
// when core.excludesFile is unset: $XDG_CONFIG_HOME/git/ignore, else
// $HOME/.config/git/ignore. It returns "" when the file does not exist.
func DefaultExcludesFile(getenv func(string) string) string {
	var p string
	if x := getenv("XDG_CONFIG_HOME"); x != "" && filepath.IsAbs(x) {
		p = filepath.Join(x, "git", "ignore")
	} else if h := getenv("HOME"); h != "" && filepath.IsAbs(h) {
		p = filepath.Join(h, ".config", "git", "ignore")
	}
	if p == "" {
		return ""
	}
	if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	return p
}

// readExcludesFiles reads the operator's excludes files (the only files outside the
// root the repo plane ever opens). A file that is missing, not a regular file or over
// 1 MiB is skipped, as git skips an unreadable core.excludesFile.
func readExcludesFiles(paths []string) [][]byte {
	var out [][]byte
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxIgnoreFileBytes {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(f, maxIgnoreFileBytes+1))
		_ = f.Close()
		if err != nil || len(data) > maxIgnoreFileBytes {
			continue
		}
		out = append(out, data)
	}
	return out
}
