package scenario

import "testing"

// TestDefaultTempDirReadsGivenEnv: TempDir's default reads TMPDIR through
// Options.Getenv (the command line's Env), never the process's; an explicit dir wins.
func TestDefaultTempDirReadsGivenEnv(t *testing.T) {
	t.Parallel()
	env := func(k string) string {
		if k == "TMPDIR" {
			return "/from/the/env"
		}
		return ""
	}
	if got := defaultTempDir("", env); got != "/from/the/env" {
		t.Fatalf("defaultTempDir with TMPDIR in the given env = %q", got)
	}
	if got := defaultTempDir("/explicit", env); got != "/explicit" {
		t.Fatalf("defaultTempDir with a dir = %q", got)
	}
}
