// Package daemon is dald's server: it listens on a Unix socket, names
// process streams, hands out clock configuration, keeps tick logs, logged
// draws and timer schedules, traces sessions when given a Tracer, and
// reports status. It serves internal/wire's protocol (docs/protocol.md).
// internal/dald is the command line around it (flags, signals, logging,
// socket activation); dal-exec embeds a Server in-process when no dald runs.
//
// # Who may do what
//
// The socket is mode 0600 and every connection's SO_PEERCRED is checked:
// only dald's own user and root connect. Within that user, sessions are
// kept apart by capability, not by uid, because every process of every
// session runs as the same user:
//
//   - session.open (role exec) mints a session id and a token of
//     wire.TokenLen random bytes. The opening connection owns the session:
//     every exec op (load, dump, ticks, draws, trace, observe, close) must
//     arrive on it, and the session ends when it closes.
//   - dal-exec hands the token to the agent in DAL_SESSION_TOKEN, never in
//     the bundle; in record's sandbox, in a file only the sandbox shows
//     (DAL_SESSION_TOKEN_FILE), so that the agent's environment repeats. A
//     shim's hello must carry it; a missing or wrong token is refused
//     (compared in constant time) and the connection closed. The session
//     id, a count of the server's sessions which status shows, grants
//     nothing.
//   - The token is bound to the connection at hello rather than carried on
//     every op. A Unix stream connection cannot be joined or hijacked by
//     another process; a process that holds the fd (inherited, or passed with
//     SCM_RIGHTS) could read the token from its owner's environment anyway.
//     So after hello the connection itself is the credential: every later op
//     must name the session and stream that hello granted, and 32 hex bytes
//     per clock upload would buy nothing.
//   - observe is taken only from the connection that opened the session it
//     names, once per figure: a client adds to /metrics what its own session
//     measured. A session opened with figures: true exists only for that (no
//     process may join it, it is not counted as a session).
//   - The agent never sees dald's socket: session.open makes a socket of
//     the session's own (sessionsock.go) and dal-exec gives the agent
//     that one. A connection on it may only hello as that session's
//     process and ask status about it, so an agent cannot open sessions
//     or reach another, and its connections take none of --max-conns.
//   - status lists the sessions opened by the caller's uid; root sees all.
//
// What this does not stop: a process of dald's user that can reach dald's
// socket can open sessions of its own and report figures for them. An
// agent under record or replay holds its own session's token and socket
// (it needs them) and nothing else.
//
// # Limits
//
// Everything a client can make dald hold is bounded (Limits, flags of the
// same names on dald). Defaults (DefaultLimits): 4096 connections, 1024
// sessions; per session 1024 connections on its own socket, 16384
// processes (hello), 65536 outstanding spawn
// reservations, 16 Mi clock ticks and timer entries (about 150 MiB), 64 MiB
// of random draws; frames of 4 MiB (64 KiB before hello), read as they
// arrive so an announced length costs nothing until its bytes come. A
// connection that holds no open session is closed after a minute without a
// request; a session's own connections are closed when it ends, so nothing
// outlives it. A refusal names the limit and its flag, and the first refusal
// of each kind becomes a "limit" drift entry of the session. When a session
// ends everything it held is released (see TestFloodedSessionMemoryReturns
// for the figures).
package daemon
