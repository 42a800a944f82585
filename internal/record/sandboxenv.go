package record

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

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
const (
	sandboxSocket = "/run/dal/dald.sock"
	sandboxToken  = "/run/dal/session-token"
	sandboxClock  = "/run/dal/clock.json"
)

// sandboxEnv rewrites the agent's environment env as above and adds what
// the sandbox cfg must show for it. With no private /run (cfg.PrivateTmp
// unset) the socket is shown at its own path and the variables are left.
// userClock reports whether the clock log's path is the user's own
// (--clock-out), kept as it is.
func sandboxEnv(env []string, cfg *sandbox.Config, userClock bool) ([]string, error) {
	vars := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	sock := vars[wire.EnvSocket]
	if !cfg.PrivateTmp {
		if sock != "" {
			cfg.Sockets = append(cfg.Sockets, sock)
		}
		return env, nil
	}
	set := map[string]string{}
	drop := map[string]bool{}
	if sock != "" {
		cfg.SocketsAt = append(cfg.SocketsAt, sandbox.Mount{Source: sock, Target: sandboxSocket})
		set[wire.EnvSocket] = sandboxSocket
	}
	if token := vars[wire.EnvToken]; token != "" {
		file, err := writeToken(cfg.Staging, token)
		if err != nil {
			return nil, err
		}
		cfg.Mounts = append(cfg.Mounts, sandbox.Mount{Source: file, Target: sandboxToken, ReadOnly: true})
		set[wire.EnvTokenFile] = sandboxToken
		drop[wire.EnvToken] = true
	}
	if _, ok := vars["AGENT_CLOCK_FILE"]; ok && !userClock {
		set["AGENT_CLOCK_FILE"] = sandboxClock
	}
	// In place, new names last and sorted: the order is the agent's too.
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if v, ok := set[k]; ok {
			out = append(out, k+"="+v)
			delete(set, k)
		} else if !drop[k] {
			out = append(out, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		out = append(out, k+"="+set[k])
	}
	return out, nil
}

// writeToken writes the session token into dal's staging directory (mode
// 0400, created anew, not following a link), for the sandbox to show.
func writeToken(staging, token string) (string, error) {
	if err := os.MkdirAll(staging, 0o700); err != nil {
		return "", fmt.Errorf("create the sandbox staging directory: %w", err)
	}
	p := filepath.Join(staging, "session-token")
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		return "", fmt.Errorf("replace the session token file: %w", err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o400)
	if err != nil {
		return "", fmt.Errorf("write the session token file: %w", err)
	}
	_, err = f.WriteString(token + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("write the session token file: %w", err)
	}
	return p, nil
}
