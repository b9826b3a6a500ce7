// Package testscripts runs the end-to-end scripts of the sharedos command line: every
// *.txtar file below this folder is a testscript (github.com/rogpeppe/go-internal) that
// runs the real command, built into this test binary, in a sandbox.
//
// UPDATE_SCRIPTS=1 rewrites the expected output of `cmp` commands in place.
//
// The package has this one non-test file so that `go test -cover` instruments it: a
// test binary without coverage metadata makes every command it runs as `sharedos` print
// "program not built with -cover" on stderr, which scripts that assert an empty stderr
// would then see.
package testscripts

import (
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
)

// ScriptDirs lists the folders below root that hold *.txtar scripts, sorted.
func ScriptDirs(root string) ([]string, error) {
	set := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".txtar") {
			set[filepath.Dir(path)] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	dirs := make([]string, 0, len(set))
	for d := range set {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	return dirs, nil
}
