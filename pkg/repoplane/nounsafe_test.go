package repoplane

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoHandWrittenSyscalls: no source file of the plane (for any platform) imports
// unsafe or issues a raw system call; system calls go through golang.org/x/sys/unix
// or the standard library.
func TestNoHandWrittenSyscalls(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		n++
		for _, imp := range f.Imports {
			if imp.Path.Value == `"unsafe"` {
				t.Errorf("%s imports unsafe", name)
			}
		}
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"Syscall(", "Syscall6(", "RawSyscall", "SYS_", "BytePtrFromString"} {
			if strings.Contains(string(data), bad) {
				t.Errorf("%s issues a hand-written system call (%s)", name, bad)
			}
		}
	}
	if n == 0 {
		t.Fatal("no source checked")
	}
}
