package repoplane

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNothingCanExecute proves statically that the plane cannot start a program: os/exec
// is not linked into it at all, and neither this package nor any non-standard package it
// depends on (go-git, go-billy, …) calls os.StartProcess or the syscall exec functions.
func TestNothingCanExecute(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not available")
	}
	cmd := exec.Command(goBin, "list", "-deps", "-json=ImportPath,Standard,Dir,GoFiles", ".")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	scanned := 0
	for dec.More() {
		var p struct {
			ImportPath string
			Standard   bool
			Dir        string
			GoFiles    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.ImportPath == "os/exec" {
			t.Fatal("os/exec is linked into the repo plane")
		}
		if p.Standard {
			continue
		}
		for _, f := range p.GoFiles {
			src, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			for _, bad := range []string{"StartProcess(", "ForkExec(", "syscall.Exec(", "unix.Exec("} {
				if p.ImportPath == "golang.org/x/sys/unix" && bad == "syscall.Exec(" {
					continue // the definition of unix.Exec, whose callers are searched for above
				}
				if strings.Contains(string(src), bad) {
					t.Fatalf("%s/%s calls %s", p.ImportPath, f, bad)
				}
			}
			scanned++
		}
	}
	if scanned == 0 {
		t.Fatal("no source scanned")
	}
}
