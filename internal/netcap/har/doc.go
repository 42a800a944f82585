// Package har is dal's network.har: the HAR 1.2 model of a run's HTTP
// exchanges, how a raw [Exchange] becomes a redacted [Entry], how the log
// is written and read back, and the replay [Index] that serves recorded
// responses to live requests. It is a format package: it imports nothing
// else of dal. The proxy (package netcap) captures; this package decides
// what reaches disk and what replay serves.
//
// # File
//
// network.har is a HAR 1.2 document ({"log": {...}}) written by [Write]:
// indented, fields in a fixed order, entries in seq order. dal's own data
// lives in "_dal" fields, which HAR 1.2 reserves for tools:
//
//	log._dal     {"format": 1, "key_headers": [...]}
//	entry._dal   {"key", "seq", "via", "streamed", "encoded", "wire",
//	              "chunks", "redactions", "error", "server_addr",
//	              "destination", "remote_addr", "client_closed",
//	              "refused", "answered"}
//
// key is the replay match key (below), seq the exchange's position in the
// run (from 0, in the order requests arrived), via how the request reached
// the proxy ("proxy", "connect", "transparent"), destination the server
// the request went to ("host:port": the CONNECT target, the absolute
// URL's host or the transparent address, never a Host header),
// server_addr the name dialled and remote_addr the address connected to
// (recording only; HAR's serverIPAddress is its IP), error why an exchange
// failed (status 0 and no content when no response came). client_closed
// {"bytes", "chunks", "read", "truncated"} says the client closed its
// connection before the whole response reached it, an ordinary event and
// not an error: bytes and chunks are the body bytes and streamed pieces
// it had read when read is true (a stream, its client watched), else
// what dal had handed it (an upper bound: older bundles, plain bodies,
// a client dal could not watch; replay says so in a notice when it
// serves such a stream), truncated that the
// recorded body ends where dal stopped reading upstream (status 0 when
// the client left before the response). Replay sends that much and waits
// for the client to close ([Served.HoldOpen]). refused is the host address
// dal refused to connect to, the response dal's own 403, replayed as
// recorded; or the Host a request named inside a tunnel to another
// server, the response dal's 421. redactions
// lists the places a secret was replaced, as "request.header.authorization",
// "request.query.token", "request.body.$.api_key", "request.body.password"
// (form), "response.header.set-cookie", "response.body.$.access_token",
// "request.url.userinfo", or a bare place ("response.body") where a
// credential of this exchange was found verbatim.
//
// # Bodies
//
// response.content.text is the body with its Content-Encoding removed
// (gzip, deflate as zlib or raw, br, zstd, and lists of them). The text
// is stored as is when the decoded bytes are valid UTF-8, otherwise in
// standard base64 with content.encoding "base64". content.size is the
// decoded length, response.bodySize the length received. A body whose
// coding is unknown or corrupt, or that decodes to more than 256 MiB, is
// stored as received (base64 when not UTF-8) with _dal.encoded true.
//
// Replay sends the body as it came off the wire, under the recorded
// headers (Content-Encoding and Content-Length included): a decoded body
// also keeps its bytes as received in _dal.wire (base64; per piece in
// _dal.chunks[].wire for a stream). They are left out when a secret was
// redacted from the decoded body, as they would hold it: replay then
// sends the redacted text without its Content-Encoding, as it does for
// entries of older bundles, with a one-line [Served.Notice].
// request.postData.text follows the same convention;
// HAR has no encoding field there, so a base64 request body carries
// "_encoding": "base64".
//
// A streamed response (text/event-stream, chunked) also has
// _dal.chunks: [{"at_ms", "text", "encoding"}], the body's pieces with the
// boundaries they were read with, at_ms after the response headers. Each
// piece is what a streaming decoder produced from that recorded piece, so
// a compressed stream keeps its frame boundaries; the pieces concatenate
// to content.text. The same UTF-8-or-base64 convention applies per piece,
// so a piece that splits a multi-byte character is base64.
//
// # Secrets
//
// Nothing secret is written. A [Redactor] replaces with "[REDACTED]" the
// values of credential headers (Authorization, Proxy-Authorization,
// X-Api-Key, Api-Key, X-Auth-Token, X-Goog-Api-Key, and every header
// whose name is a credential field name below), cookie values in Cookie
// and Set-Cookie (names and attributes stay), the password in a URL's
// user info, and credential fields in query strings, JSON bodies (at any
// depth, request and response, SSE data lines included) and form bodies.
// Credential field names, compared case-insensitively with '-' read as
// '_': api_key, apikey, access_token, refresh_token, id_token,
// auth_token, session_token, token, secret, client_secret, password,
// passwd, private_key, secret_access_key, and any name ending in _token,
// _secret, _api_key, _apikey, _password, _secret_key, _private_key. In
// query strings "key" is also a credential (Google APIs take ?key=);
// elsewhere "key" is too common to be one. Every credential value of
// eight bytes or more found this way is then also replaced wherever it
// appears verbatim in the entry (URL, headers, bodies, chunks, error),
// so an echoed token does not leak through another field. Headers keep
// their place with the value replaced. Base64 bodies are searched for
// verbatim credentials only. Not covered: a secret in a URL's path (as in
// /bot<token>/), a credential under a name outside the list (extend it
// with [NewRedactor]), and a credential field in a JSON body after the
// point where the body is malformed or truncated. Stream pieces are
// redacted as one body, so a secret split across pieces is still found.
//
// # Matching
//
// [Key] identifies a request: method, normalized absolute URL (lower-case
// scheme and host, default port dropped, query parameters sorted, no
// fragment), canonical body (JSON with sorted keys and no insignificant
// space; form bodies sorted; other bodies as bytes, after removing any
// Content-Encoding) and the allow-listed headers (none by default; the
// log's _dal.key_headers). Credential values are masked in that material,
// so replay needs no live credentials and the key reveals nothing about
// them. The key is stored as "METHOD URL sha256:HEX", the URL without its
// query. It is computed on the raw request before anything is redacted,
// at record and at replay alike.
//
// [Index] serves entries with the live request's key first in, first
// out: a request recorded three times replays three recorded responses in
// order. A request that matches nothing, or one more time than recorded,
// gets a [*MissError] naming the nearest recorded request and the
// differing fields; replay never goes to the network. An exchange that
// failed when recorded is replayed as a [*RecordedFailure].
package har
