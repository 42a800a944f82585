package record

import (
	"strings"

	"github.com/dal-runtime/dal/internal/runner"
	"github.com/dal-runtime/dal/internal/sandbox"
	"github.com/dal-runtime/dal/internal/wire"
)

// Inside the sandbox the variables dal sets for itself are the same in
// every run and in its replays, so an agent that prints its environment
// (env, os.environ, process.env) repeats:
//
//   - dald's socket is shown at /run/dal/dald.sock, in the sandbox's
//     private /run, wherever it is outside;
//   - the session's token is a file at /run/dal/session-token
//     (DAL_SESSION_TOKEN_FILE) instead of DAL_SESSION_TOKEN: it stays the
//     session's capability, readable by the agent and nobody else's;
//   - the clock log's default path, in dal-exec's temporary run directory
//     (written after the agent exits, never seen by it), reads
//     /run/dal/clock.json;
//   - DAL_SESSION is the same already: the embedded dald counts sessions.
const sandboxDir = "/run/dal"

// sandboxEnv rewrites the agent's environment env as above and adds what
// the sandbox cfg must show for it. With no private /run (cfg.PrivateTmp
// unset) the socket is shown at its own path and the variables are left.
// userClock reports whether the clock log's path is the user's own
// (--clock-out), kept as it is.
func sandboxEnv(env []string, cfg *sandbox.Config, userClock bool) ([]string, error) {
	if !cfg.PrivateTmp {
		for _, kv := range env {
			if sock, ok := strings.CutPrefix(kv, wire.EnvSocket+"="); ok && sock != "" {
				cfg.Sockets = append(cfg.Sockets, sock)
			}
		}
		return env, nil
	}
	return runner.ShowDalFiles(env, cfg, sandboxDir, true, userClock)
}
