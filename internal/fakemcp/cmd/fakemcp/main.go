// Command fakemcp runs the gateway's fake upstream MCP server on stdio (bench/gateway.sh
// and manual checks; the tests re-execute their own binaries instead).
package main

import (
	"os"

	"github.com/sharedos/sharedos/internal/fakemcp"
)

func main() { os.Exit(fakemcp.Main()) }
