package testscripts

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoUnsafeOrRawSyscalls holds the product's code (every non-test file under pkg/,
// internal/ and cmd/) to golang.org/x/sys/unix and the standard library's file APIs:
// no package unsafe, and no system call made by number (syscall.Syscall*, RawSyscall*,
// unix.Syscall*, SYS_ constants).
func TestNoUnsafeOrRawSyscalls(t *testing.T) {
	fset := token.NewFileSet()
	for _, dir := range []string{"../pkg", "../internal", "../cmd"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == "unsafe" {
					t.Errorf("%s imports unsafe", path)
				}
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, bad := range []string{"syscall.Syscall", "syscall.RawSyscall", "unix.Syscall", "unix.RawSyscall", "unix.SYS_", "syscall.SYS_"} {
				if strings.Contains(string(src), bad) {
					t.Errorf("%s makes a system call by number (%s)", path, bad)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
