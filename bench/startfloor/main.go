// Command startfloor is the start-up floor of sharedos for bench/cli.sh: the sharedos
// binary (cmd.Main stays reachable, so the linker keeps everything sharedos links) whose
// main returns at once, unless given more than 99 arguments. Its time is what every
// sharedos command pays before its own work — the loading of the binary, the runtime's
// start and every package's init — and what no change to the command tree can remove:
// only linking fewer or lighter packages lowers it.
package main

import (
	"os"

	"github.com/sharedos/sharedos/cmd"
)

func main() {
	if len(os.Args) > 99 {
		os.Exit(cmd.Main())
	}
}
