// Command sharedos is the command line of the SharedOS permission kernel: it lists the
// tools an agent may use, toggles tool namespaces, calls and explains tools and keeps an
// audit trail. See README.md.
package main

import (
	"os"

	"github.com/sharedos/sharedos/cmd"
)

func main() { os.Exit(cmd.Main()) }
