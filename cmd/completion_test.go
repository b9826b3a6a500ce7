package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// completionFiles maps each shell to its checked-in script under completions/.
var completionFiles = map[string]string{
	"bash":       "sharedos.bash",
	"zsh":        "_sharedos",
	"fish":       "sharedos.fish",
	"powershell": "sharedos.ps1",
}

// TestCompletionsUpToDate fails when a script under completions/ differs from what the
// command tree generates. UPDATE_COMPLETIONS=1 rewrites them.
func TestCompletionsUpToDate(t *testing.T) {
	update := os.Getenv("UPDATE_COMPLETIONS") == "1"
	for _, shell := range CompletionShells {
		t.Run(shell, func(t *testing.T) {
			ios, _, _, _ := Test()
			root := NewRootCmd(&Factory{IOStreams: ios, Env: func(string) string { return "" }})
			var buf bytes.Buffer
			if err := GenerateCompletion(root, shell, &buf); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("..", "completions", completionFiles[shell])
			if update {
				if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			have, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run UPDATE_COMPLETIONS=1 go test ./cmd/ -run TestCompletionsUpToDate)", err)
			}
			if !bytes.Equal(have, buf.Bytes()) {
				t.Fatalf("%s is stale: run UPDATE_COMPLETIONS=1 go test ./cmd/ -run TestCompletionsUpToDate", path)
			}
		})
	}
}
