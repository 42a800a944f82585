// Package netcap is dal's recording and replaying HTTP(S) proxy (docs/design.md
// §7): the mechanism that sees every HTTP exchange an agent makes, hands
// it over as a raw [har.Exchange] when recording, and answers it from a
// [Source] when replaying. It does not write HAR, redact, match requests
// or extract prompts (package har and package prompts do), and it does
// not create network namespaces or listeners (the caller passes them in).
//
// # Entry points
//
// A [Proxy] serves any number of listeners:
//
//   - [Proxy.Serve]: an explicit forward proxy for clients that honour
//     HTTP_PROXY/HTTPS_PROXY. Absolute-form requests are forwarded;
//     CONNECT tunnels are opened locally and their content sniffed: a TLS
//     ClientHello is intercepted (a certificate for the SNI name, or the
//     CONNECT host, minted by the per-run [CA]; ALPN offers only
//     http/1.1, so clients that prefer HTTP/2 fall back), plain HTTP is
//     handled as is.
//   - [Proxy.ServeTransparent]: connections a client opened to a fixed
//     address (a local model server, say), arriving on a listener dal
//     placed at that address inside the agent's network namespace. TLS is
//     intercepted (the SNI name, or the address's IP without SNI), HTTP/1.x
//     is handled with URLs http://dst/..., and the recording upstream is
//     the address itself.
//
// HTTP/1.1 is spoken on both sides with keep-alive, request bodies of
// either framing, Expect: 100-continue, HEAD, 204 and 304. Hop-by-hop
// headers (Connection and the headers it names, Proxy-Connection,
// Proxy-Authorization, Keep-Alive, TE, Trailer, Transfer-Encoding,
// Upgrade) are not forwarded, but stay in the recorded request so that the
// writer can redact them. Responses are never decompressed: the record
// and the client get the bytes the server sent. The proxy speaks to
// upstream servers itself rather than through net/http's Transport (which
// would hide the chunk framing): upstream connections follow the
// client's (a client connection's requests share upstream connections
// only among themselves, up to 64 idle, 90 s), are checked to be still
// open before reuse, and a request the server dropped on a reused
// connection is sent again on a new one when that is safe (nothing was
// written, or it is idempotent). Once a destination has accepted a
// connection, the proxy keeps one more to it dialled (and TLS-handshaken)
// ahead, which the next client connection needing a new one takes for
// itself alone (spare.go): a client that opens a connection per request
// does not wait for a dial each time, and the server sees one connection
// more than the client opened, idle until used or until the proxy shuts
// down.
//
// # Streams
//
// A response that is text/event-stream or of unknown length is relayed as
// it arrives, flushed to the client at once, and recorded as Chunks with
// their offsets (Chunk.At) from the response headers. A chunked response
// is read frame by frame off the upstream connection: every HTTP/1.1
// chunk the server sent is one recorded chunk (extensions dropped, At when
// its last byte arrived) and is relayed to the client as one chunk,
// however the chunks were packed into TCP reads. A chunk larger than
// 1 MiB is relayed in pieces as it arrives (the client sees several
// chunks) and still recorded as one. A stream without chunk framing (an
// event stream with Content-Length, or ended by close) is recorded read
// by read, each read having at least 64 KiB of room, so writes that reach
// dal together become one chunk. Replay writes one chunked-encoding frame
// per recorded chunk (or, for a stream recorded with a Content-Length,
// the pieces under it), at once ([Config.Speed] 0) or paced at the
// recorded offsets, and the bytes as received: content-encoded bodies
// keep their Content-Encoding and Content-Length.
//
// # Delivery order
//
// With [Proxy.SetSettle] (record and replay under the syscall layer) the
// proxy hands the client its responses one at a time, each once the
// client's process tree has settled, in an order that depends only on
// what the client sent, never on which upstream answered first
// (order.go; docs/design.md §3.1). Upstream requests still leave at once.
//
// # Read boundaries
//
// In both modes every streamed piece (the headers first, the last empty
// chunk too) is a read of its own for the client: before a piece leaves
// for the client's socket, the proxy waits until the client has received
// and read everything written to its connection (drain.go: the client's
// socket found with sock_diag in the connection's network namespace,
// opened once per namespace). It spins a few µs, then backs off to 1 ms
// timers, and stops waiting for a client that reads nothing for 2 s.
// Where the client's socket cannot be seen (not on this host, no
// sock_diag, no privilege to enter the namespace), pieces go out without
// waiting.
//
// # What the proxy reaches
//
// A recording proxy connects to the internet and machines behind a
// router and, of this host's own services, only the addresses in
// [Config.Allow] (--allow-loopback HOST:PORT): never loopback
// (127.0.0.0/8, ::1), the unspecified address (0.0.0.0, ::) or any
// address of the host's interfaces otherwise, whether the service
// listened before the run or opened after it. Link-local addresses
// (169.254.0.0/16, fe80::/10: cloud metadata services), the metadata
// addresses outside them and every address on a network attached to one
// of the host's interfaces are refused too unless in [Config.AllowNets]
// or Allow (--allow-address); a network allowed never opens the host's
// own addresses. The rule is enforced in the dialer's Control function
// on the address the socket is about to connect to, after name
// resolution, with IPv4-mapped addresses unmapped: a name resolving to
// loopback, DNS rebinding or [::ffff:127.0.0.1] meet the same check, and
// nothing separates the check from the connect. The host's addresses are
// listed at New and listed again on every address change the kernel
// announces (a netlink subscription; where it cannot be had, each dial
// asks the kernel whether the address is local by binding a socket to
// it), with the networks they are on. A refused
// request is answered 403 with the JSON body
// {"error": "dal: connection to 127.0.0.1:8080 refused: pass
// --allow-loopback 127.0.0.1:8080 to allow it"} and header X-Dal-Proxy:
// refused, reported as a [KindRefused] event, and recorded
// (Exchange.Refused, the 403 as its response) so that replay answers the
// same request the same way. A CONNECT tunnel to such an address is
// opened (locally, as every tunnel is) and its requests get the 403,
// inside TLS when the client speaks it. Config.Dial replaces the guarded
// dialer entirely.
//
// # Where a request goes
//
// Requests are routed, handed to [Config.Before] and recorded by what
// the proxy dials: the absolute URL's host, a tunnel's CONNECT target, a
// transparent destination (Exchange.Dest; Exchange.RemoteAddr is the
// address connected to). Inside a tunnel, and inside TLS intercepted on a
// transparent connection with a server name, a request whose Host names
// another server (dest.go) is answered 421, reported as a
// [KindMisdirected] event and recorded with Exchange.Refused naming the
// Host, never forwarded nor handed to Before.
//
// # Early closes
//
// A client may close its connection before the response is complete (a
// stream read up to "data: [DONE]", a cancelled reader, a size limit). It
// is an ordinary event, not a failure: the exchange is recorded with
// Exchange.ClientClosed, no Error, and the upstream connection is closed
// (the server sees the cancellation the client meant). Of a stream it
// holds the body bytes and pieces the client read (ClientClose.Read): a
// piece counts once the client's socket is seen to have read it, or,
// once that socket is gone, when its FIN acknowledged every byte written
// (a socket closed with bytes unread sends a reset instead); whether a
// client that read a piece and closed found the next one in its socket
// is a race that does not show. Of a plain body, or where the client
// cannot be followed, it holds what dal had handed the connection. A
// client that leaves before the response headers is recorded alike,
// without a response. Replay hands the client those pieces, then neither
// ends nor breaks the response but waits for the client to close (or the
// proxy to shut down), and records the close with those pieces (Read
// when it read them all: a client that reads while it closes may read
// fewer, a race of its own); a write failing because the client left is
// tolerated and recorded the same way. dal-exec does not watch SIGPIPE: such writes
// return EPIPE here and nowhere else.
//
// # Replay is offline
//
// A proxy built with [Config.Source] has no transport and no dialer: no
// code path in it can open a connection. A request the Source cannot
// answer gets 502 with X-Dal-Replay: miss and an OpenAI-style JSON error
// body, is reported as [KindReplayMiss] and recorded as failed; nothing
// is forwarded. An exchange that failed when recorded fails the same way.
//
// # Reported, not captured
//
// What the proxy sees but cannot capture is reported through
// [Config.Report], one [Event] with one sentence each, and the connection
// closed (or the request refused): connections that are not HTTP (raw
// TCP, a server-speaks-first protocol that stays silent, TLS carrying
// something else), HTTP/2 (prior knowledge, or ALPN h2 only), clients
// that refuse dal's certificate with a TLS alert (pinning, or not
// trusting the bundle; a hang-up without an alert is reported without
// blaming the certificate), WebSocket upgrades (501), requests that do not
// say where they go, and replay misses. Upstream failures while recording
// (refused, TLS verification, reset mid-body) are captured: the exchange
// is recorded with Error set and the client gets a 502 or a broken
// connection.
//
// # Secrets and memory
//
// Exchanges hold raw headers and bodies, credentials included, in memory
// only; the CA's key never leaves memory. Bodies are held whole (a 100 MB
// download costs 100 MB until Record returns), and trailers are dropped.
package netcap
