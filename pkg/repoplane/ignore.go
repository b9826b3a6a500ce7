package repoplane

import (
	"os"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

const maxIgnoreFileBytes = 1 << 20

// ignoreRules are the exclude patterns in force in one directory: .git/info/exclude,
// then each .gitignore from the top down to it (later patterns take precedence, as in
// git). core.excludesFile and the global ignore file are never read.
type ignoreRules struct {
	pats []gitignore.Pattern
}

// with returns the rules extended by the patterns of data, found in directory dir.
func (ir *ignoreRules) with(data []byte, dir []string) *ignoreRules {
	var add []gitignore.Pattern
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		add = append(add, gitignore.ParsePattern(line, dir))
	}
	if len(add) == 0 {
		return ir
	}
	out := &ignoreRules{pats: make([]gitignore.Pattern, 0, len(ir.pats)+len(add))}
	out.pats = append(append(out.pats, ir.pats...), add...)
	return out
}

// match reports whether the path (components) is ignored.
func (ir *ignoreRules) match(path []string, isDir bool) bool {
	if ir == nil || len(ir.pats) == 0 {
		return false
	}
	for i := len(ir.pats) - 1; i >= 0; i-- {
		switch ir.pats[i].Match(path, isDir) {
		case gitignore.Exclude:
			return true
		case gitignore.Include:
			return false
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

// baseIgnore returns the repository-wide rules (.git/info/exclude).
func (r *repo) baseIgnore() *ignoreRules {
	ir := &ignoreRules{}
	if data := loadIgnoreFile(r.git, "info/exclude"); data != nil {
		ir = ir.with(data, nil)
	}
	return ir
}

func splitPath(p string) []string {
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}
