package daemon

import (
	"fmt"
	"time"
)

// Limits bound what clients may make dald hold. A zero field takes its
// value from DefaultLimits. Each refusal is an error reply naming the limit
// and the dald flag that raises it; a session that hits one also gets one
// drift entry of kind "limit", so dal-exec's report says the run is
// incomplete.
type Limits struct {
	Conns    int // connected clients, all sessions together
	Sessions int // open sessions
	// SessionConns bounds the connections one session's processes hold on
	// its own socket; they do not count against Conns.
	SessionConns int
	// Per session:
	Streams   int // processes that said hello
	Spawns    int // child names reserved with spawn
	Ticks     int // clock ticks and timer entries held: logged, loaded to serve, reported
	DrawBytes int // random bytes held: logged (draws.put) and loaded to serve
	// IdleTimeout closes a connection that holds no open session (one that
	// has not said hello, a status or figures client, a dal-exec before
	// session.open) after this long without a request. Connections of an
	// open session are never idle-closed: a shim may legitimately be silent
	// for the whole run; they are closed when their session ends.
	IdleTimeout time.Duration
}

// DefaultLimits are the limits of a dald started without flags, and of the
// dald that dal-exec embeds. At the per-session limits one session holds
// about 150 MiB of ticks (9 bytes each) and 64 MiB of draws; a run that
// needs more is a run to record against a dald started with higher limits.
var DefaultLimits = Limits{
	Conns:        4096,
	Sessions:     1024,
	SessionConns: 1024,
	Streams:      16384,
	Spawns:       65536,
	Ticks:        16 << 20,
	DrawBytes:    64 << 20,
	IdleTimeout:  time.Minute,
}

// Fixed bounds on single values, well above what shims send.
const (
	maxStreamName   = 256 // bytes of a stream name (a spawn depth of about 120)
	maxLabel        = 128 // bytes of a draw label
	maxLabels       = 64  // distinct draw labels per stream, and entries in a report's draws
	maxReportTimers = 1 << 16
	maxDrift        = 1024 // drift entries per session
	maxDriftText    = 1024 // bytes of a drift entry's detail
	// handshakeFrame caps frames before hello: nothing before it needs more.
	handshakeFrame = 64 << 10
	// maxRefusing bounds connections being told that dald is full; past it
	// new ones are closed without a word.
	maxRefusing = 64
)

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	pick := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	pick(&l.Conns, d.Conns)
	pick(&l.Sessions, d.Sessions)
	pick(&l.SessionConns, d.SessionConns)
	pick(&l.Streams, d.Streams)
	pick(&l.Spawns, d.Spawns)
	pick(&l.Ticks, d.Ticks)
	pick(&l.DrawBytes, d.DrawBytes)
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	return l
}

// limitError is a refusal at a limit. flag is the dald flag that raises it.
func limitError(what string, limit int, flag string) error {
	return fmt.Errorf("%s (limit %d, dald --%s): start a dald with a higher --%s and pass its --socket to dal-exec", what, limit, flag, flag)
}
