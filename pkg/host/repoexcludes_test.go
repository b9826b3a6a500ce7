package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRepoExcludesDefault: unset, repo.excludesFiles defaults to the user's global git
// ignore file ($XDG_CONFIG_HOME/git/ignore, else ~/.config/git/ignore) when it exists
// outside the root; a set list (even empty) is taken as it is.
func TestRepoExcludesDefault(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	root := filepath.Join(home, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := repoExcludes(&Settings{Root: root}); got != nil {
		t.Fatalf("no global ignore file: %v", got)
	}
	ign := filepath.Join(home, ".config", "git", "ignore")
	if err := os.MkdirAll(filepath.Dir(ign), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ign, []byte(".env\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := repoExcludes(&Settings{Root: root}); strings.Join(got, ",") != ign {
		t.Fatalf("default: %v, want %s", got, ign)
	}
	xdg := filepath.Join(home, "xdg")
	t.Setenv("XDG_CONFIG_HOME", xdg)
	if got := repoExcludes(&Settings{Root: root}); got != nil {
		t.Fatalf("XDG_CONFIG_HOME set, no file there: %v", got)
	}
	t.Setenv("XDG_CONFIG_HOME", "")
	// the file inside the root: not a default
	if got := repoExcludes(&Settings{Root: home}); got != nil {
		t.Fatalf("global ignore file inside the root: %v", got)
	}
	if got := repoExcludes(&Settings{Root: root, RepoExcludesFiles: []string{}}); got == nil || len(got) != 0 {
		t.Fatalf("explicitly empty: %v", got)
	}
	if got := repoExcludes(&Settings{Root: root, RepoExcludesFiles: []string{"/x/ign"}}); strings.Join(got, ",") != "/x/ign" {
		t.Fatalf("explicit: %v", got)
	}
}

// TestRepoExcludesReadsSettingsEnv: the global ignore file is found through Settings.Env
// (the CLI's environment), not the process's.
func TestRepoExcludesReadsSettingsEnv(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	ign := filepath.Join(home, ".config", "git", "ignore")
	if err := os.MkdirAll(filepath.Dir(ign), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ign, []byte(".env\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := func(k string) string { return map[string]string{"HOME": home}[k] }
	s := &Settings{Root: filepath.Join(home, "root"), Env: env}
	if got := repoExcludes(s); strings.Join(got, ",") != ign {
		t.Fatalf("through Settings.Env: %v, want %s", got, ign)
	}
}
