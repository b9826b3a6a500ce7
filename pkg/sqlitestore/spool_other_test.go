//go:build !unix

package sqlitestore

import (
	"fmt"
	"os"
)

// runSpoolChild: without flock(2) there is no spool (EnableSpool does nothing).
func runSpoolChild(role string) int {
	fmt.Fprintln(os.Stderr, "child: no audit spool on this system:", role)
	return 1
}
