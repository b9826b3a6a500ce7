package pgtest

import (
	"strings"
	"testing"
)

// TestNoServerSkips: with no SHAREDOS_TEST_POSTGRES and no binaries (none under the
// Debian folder, none on PATH), there is no server and no error: the one-line reason to
// skip says how to enable the tests.
func TestNoServerSkips(t *testing.T) {
	t.Setenv(EnvDSN, "")
	t.Setenv("PATH", t.TempDir())
	old := binGlob
	binGlob = t.TempDir() + "/*/bin"
	defer func() { binGlob = old }()
	c, msg, err := start()
	if c != nil || err != nil {
		t.Fatalf("start without a server = %v, %v; want no cluster and no error", c, err)
	}
	if strings.Contains(msg, "\n") || !strings.Contains(msg, "postgresql package") || !strings.Contains(msg, EnvDSN) {
		t.Errorf("the skip reason %q is not one line naming the package and %s", msg, EnvDSN)
	}
}
