package wire

import (
	"fmt"
	"os"
	"path/filepath"
)

// Environment variables dal-exec gives an agent, and every shim and the Go
// client read.
const (
	EnvSocket  = "DAL_SOCKET"        // dald's socket path
	EnvSession = "DAL_SESSION"       // the session id
	EnvToken   = "DAL_SESSION_TOKEN" // the session's capability (TokenLen random bytes, hex)
	EnvStream  = "DAL_STREAM"        // the stream hint
)

// TokenLen is the number of random bytes in a session token; on the wire
// and in DAL_SESSION_TOKEN it is their lowercase hex.
const TokenLen = 32

// DefaultSocket is where dald listens unless told otherwise:
// $XDG_RUNTIME_DIR/dal/dald.sock, /run/dal/dald.sock for root, else
// $TMPDIR/dal-UID/dald.sock.
func DefaultSocket() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "dal", "dald.sock")
	}
	if os.Getuid() == 0 {
		return "/run/dal/dald.sock"
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("dal-%d", os.Getuid()), "dald.sock")
}
