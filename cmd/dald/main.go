// Command dald serves virtual time, stream identities and tick logs to dal
// sessions over a Unix socket.
package main

import (
	"os"

	"github.com/dal-runtime/dal/internal/dald"
)

func main() {
	os.Exit(dald.Main(os.Args, os.Stdout, os.Stderr))
}
