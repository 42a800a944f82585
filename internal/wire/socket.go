package wire

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Environment variables dal-exec gives an agent, and every shim and the Go
// client read.
const (
	EnvSocket  = "DAL_SOCKET"        // dald's socket path
	EnvSession = "DAL_SESSION"       // the session id
	EnvToken   = "DAL_SESSION_TOKEN" // the session's capability (TokenLen random bytes, hex)
	EnvStream  = "DAL_STREAM"        // the stream hint
	// EnvTokenFile names a file holding the token, given instead of
	// EnvToken in a sandbox, where every variable dal sets is the same in
	// every run (an agent that prints its environment repeats).
	EnvTokenFile = "DAL_SESSION_TOKEN_FILE"
)

// Token is the session token a process was given: EnvToken, else the
// first line of the file EnvTokenFile names, else "".
func Token() string {
	if t := os.Getenv(EnvToken); t != "" {
		return t
	}
	p := os.Getenv(EnvTokenFile)
	if p == "" {
		return ""
	}
	b, err := os.ReadFile(p)
	if err != nil || len(b) > 4*TokenLen {
		return ""
	}
	return strings.TrimSpace(string(b))
}

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
