package har

import (
	"net/http"
	"time"
)

// Exchange is one HTTP request and its response as the proxy saw them on
// the wire: raw and unredacted. It lives in memory only; [FromExchange]
// turns it into a redacted [Entry] before anything is written.
type Exchange struct {
	// Seq is the exchange's position in the run, from 0, in the order the
	// requests were received.
	Seq int
	// Started is when the proxy received the request's headers.
	Started time.Time
	// Request is the request as the client sent it.
	Request Request
	// Response is nil when no response was obtained (Error says why).
	Response *Response
	// Error is set when the exchange failed: upstream unreachable, TLS
	// failure, protocol not handled. It is reported, not replayed.
	Error string
	// ClientClosed is set when the client closed its connection before
	// the whole response had reached it: an ordinary event, not a failure.
	// Response holds what dal had received from upstream by then (nil
	// when the client left before the response headers arrived).
	ClientClosed *ClientClose
	// Refused is the address the proxy refused to connect to for this
	// request (a loopback service or one of the host's own addresses not
	// allowed for the run); Response is dal's 403 answer, served again by
	// replay.
	Refused string
	// Answered names who answered the request in dal's place without
	// forwarding it ("policy", "strict-llm"; see netcap.Config.Before);
	// Response is that answer, served again by replay.
	Answered string
	// Timings in the HAR sense, each >= 0.
	Send, Wait, Receive time.Duration
	// Via is how the request reached the proxy: "proxy" (absolute URI),
	// "connect" (inside a CONNECT tunnel), "transparent" (a connection to
	// a mirrored address).
	Via string
	// ServerAddr is the upstream address dialled, "host:port" ("" in replay).
	ServerAddr string
	// Dest is the server the request goes to, "host:port", in both
	// modes: the CONNECT target, the absolute URL's host, or the
	// transparent destination. It never comes from a Host header.
	Dest string
	// RemoteAddr is the address the upstream connection that carried the
	// request was connected to, "ip:port" (recording only; "" when no
	// connection was made).
	RemoteAddr string
}

// Request is a client's request.
type Request struct {
	Method string
	// URL is absolute: scheme://host[:port]/path?query, as the client
	// addressed it.
	URL    string
	Proto  string // "HTTP/1.1"
	Header http.Header
	// Body is the request body exactly as sent (after transfer decoding,
	// before any content decoding).
	Body []byte
}

// Response is an upstream's response.
type Response struct {
	Status     int
	StatusText string // e.g. "OK"
	Proto      string
	Header     http.Header
	// Body is the whole body as received (after transfer decoding; still
	// content-encoded when Content-Encoding is set).
	Body []byte
	// Chunks are the body's pieces in the order and with the boundaries
	// they were read from upstream (flush by flush for streams); their
	// concatenation is Body. Nil for a body read in one piece.
	Chunks []Chunk
	// Streamed reports that the response was relayed chunk by chunk
	// (text/event-stream, or chunked transfer encoding).
	Streamed bool
}

// ClientClose says how far a response had got when its client closed
// the connection.
type ClientClose struct {
	// Bytes and Chunks are the body bytes and streamed pieces the client
	// read before it closed when Read is set (a stream whose client dal
	// watched); otherwise what dal had handed to its connection, an
	// upper bound. Chunks is 0 for a response that was not streamed.
	Bytes  int64
	Chunks int
	Read   bool
	// Truncated: dal stopped reading the response from upstream because
	// the client had gone, so the recorded body ends there.
	Truncated bool
}

// Chunk is one piece of a streamed body.
type Chunk struct {
	// At is the time since the response's headers arrived.
	At   time.Duration
	Data []byte
}

// Served is what replay sends back for one request: the recorded
// headers and the body in pieces as they were received (content-encoded
// as they were), or, for an entry that keeps only the decoded body, that
// body with Content-Encoding removed and Notice set.
type Served struct {
	Status     int
	StatusText string
	Header     http.Header
	// Chunks: one element for a plain body; the recorded pieces for a
	// stream. At is the recorded offset, honoured with --replay-speed.
	Chunks   []Chunk
	Streamed bool
	// Entry is the index of the HAR entry served, Seq its recorded seq.
	Entry, Seq int
	// Notice, when set, says in one sentence how the response differs
	// from the one recorded (the body is sent decoded).
	Notice string
	// HoldOpen: the client closed the connection in the recording after
	// Chunks had reached it. Replay sends Chunks, then neither ends nor
	// breaks the response but waits for the client to close, as it did.
	// Header then describes the recorded response (its Content-Length
	// may exceed the bytes sent). Status 0 means no response at all.
	HoldOpen bool
}
