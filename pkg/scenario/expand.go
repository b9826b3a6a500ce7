package scenario

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// DefaultPattern is what `sharedos test` runs when it is given no argument.
const DefaultPattern = "sharedos-tests/**/*.yaml"

// Expand turns FILE, DIR and GLOB arguments into scenario files, sorted within each
// argument, without duplicates. A directory stands for every .yaml, .yml and .json file
// below it; a glob may use ** for any number of folders. A file that does not exist, or
// a glob or directory that selects nothing, is an error naming the argument.
func Expand(args []string) ([]string, error) {
	if len(args) == 0 {
		args = []string{DefaultPattern}
	}
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		c := filepath.Clean(p)
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	for _, a := range args {
		if a == "" {
			return nil, fmt.Errorf("an empty argument names no scenario file")
		}
		if strings.ContainsAny(a, "*?[") {
			ms, err := glob(a)
			if err != nil {
				return nil, err
			}
			if len(ms) == 0 {
				return nil, fmt.Errorf("no scenario file matches %s", a)
			}
			for _, m := range ms {
				add(m)
			}
			continue
		}
		fi, err := os.Stat(a)
		if err != nil {
			return nil, fmt.Errorf("scenario file %s does not exist", a)
		}
		if !fi.IsDir() {
			add(a)
			continue
		}
		var ms []string
		err = filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && isScenarioName(p) {
				ms = append(ms, p)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read %s: %v", a, err)
		}
		if len(ms) == 0 {
			return nil, fmt.Errorf("directory %s holds no .yaml, .yml or .json file", a)
		}
		slices.Sort(ms)
		for _, m := range ms {
			add(m)
		}
	}
	return out, nil
}

func isScenarioName(p string) bool {
	switch strings.ToLower(filepath.Ext(p)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// glob matches pattern (slash-separated; ** matches any number of folders) against the
// files below its literal prefix.
func glob(pattern string) ([]string, error) {
	pat := filepath.ToSlash(pattern)
	segs := strings.Split(pat, "/")
	for _, s := range segs {
		if s != "**" {
			if _, err := path.Match(s, ""); err != nil {
				return nil, fmt.Errorf("bad glob %s: %v", pattern, err)
			}
		}
	}
	// the literal folders before the first segment with a meta character
	base := []string{}
	i := 0
	for ; i < len(segs)-1 && !strings.ContainsAny(segs[i], "*?["); i++ {
		base = append(base, segs[i])
	}
	dir := strings.Join(base, "/")
	if dir == "" {
		dir = "."
		if strings.HasPrefix(pat, "/") {
			dir = "/"
		}
	}
	rest := segs[i:]
	var out []string
	if _, err := os.Stat(dir); err != nil {
		return nil, nil
	}
	err := filepath.WalkDir(filepath.FromSlash(dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(filepath.FromSlash(dir), p)
		if err != nil {
			return err
		}
		if matchSegs(rest, strings.Split(filepath.ToSlash(rel), "/")) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("glob %s: %v", pattern, err)
	}
	slices.Sort(out)
	return out, nil
}

func matchSegs(pat, name []string) bool {
	if len(pat) == 0 {
		return len(name) == 0
	}
	if pat[0] == "**" {
		for k := 0; k <= len(name); k++ {
			if matchSegs(pat[1:], name[k:]) {
				return true
			}
		}
		return false
	}
	if len(name) == 0 {
		return false
	}
	ok, _ := path.Match(pat[0], name[0])
	return ok && matchSegs(pat[1:], name[1:])
}
