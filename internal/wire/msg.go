package wire

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Ops of protocol 1.
const (
	OpHello         = "hello"
	OpSpawn         = "spawn"
	OpTicksPut      = "ticks.put"
	OpTicksFetch    = "ticks.fetch"
	OpDrawsPut      = "draws.put"
	OpDrawsFetch    = "draws.fetch"
	OpReport        = "report"
	OpDrift         = "drift"
	OpScheduleFetch = "schedule.fetch"
	OpStatus        = "status"
	OpSessionOpen   = "session.open"
	OpSessionLoad   = "session.load"
	OpSessionDump   = "session.dump"
	OpSessionTicks  = "session.ticks"
	OpSessionDraws  = "session.draws"
	OpSessionClose  = "session.close"
	OpTraceStart    = "trace.start"
	OpTraceReport   = "trace.report"
	OpObserve       = "observe"
)

// Roles a connection declares in its hello.
const (
	RoleShim = "shim"
	RoleExec = "exec"
	RoleCtl  = "ctl"
)

// Tick kinds.
const (
	KindRealtime  = 0
	KindMonotonic = 1
)

// Request is every field any request may carry; an op reads the ones it
// documents and ignores the rest. One flat type keeps decoding to a single
// pass and lets unknown keys from newer clients pass harmlessly.
type Request struct {
	Op      string `msgpack:"op"`
	ID      uint64 `msgpack:"id"`
	Proto   int    `msgpack:"proto,omitempty"`
	Role    string `msgpack:"role,omitempty"`
	Session string `msgpack:"session,omitempty"`
	Stream  string `msgpack:"stream,omitempty"`
	PID     int    `msgpack:"pid,omitempty"`
	PPID    int    `msgpack:"ppid,omitempty"`
	Runtime string `msgpack:"runtime,omitempty"`
	// Token is the session's capability: required in a shim's hello (from
	// DAL_SESSION_TOKEN), bound to the connection from then on.
	Token string `msgpack:"token,omitempty"`

	// session.open
	Mode      string `msgpack:"mode,omitempty"`
	Seed      uint64 `msgpack:"seed,omitempty"`
	EpochNS   int64  `msgpack:"epoch_ns,omitempty"`
	QuantumNS int64  `msgpack:"quantum_ns,omitempty"`
	Replay    bool   `msgpack:"replay,omitempty"`
	// Figures opens a session that only reports figures (observe): no
	// process may join it and dald's session metrics do not count it.
	Figures bool `msgpack:"figures,omitempty"`

	// ticks and draws
	Kinds  []byte `msgpack:"kinds,omitempty"`
	Values Int64s `msgpack:"values,omitempty"`
	Label  string `msgpack:"label,omitempty"`
	Data   []byte `msgpack:"data,omitempty"`
	From   int    `msgpack:"from,omitempty"`
	Max    int    `msgpack:"max,omitempty"`

	// report
	Reads   int64            `msgpack:"reads,omitempty"`
	SleepNS int64            `msgpack:"sleep_ns,omitempty"`
	NowNS   int64            `msgpack:"now_ns,omitempty"`
	Timers  [][2]int64       `msgpack:"timers,omitempty"`
	Draws   map[string]int64 `msgpack:"draws,omitempty"`
	// Unserved counts calls of clock and random APIs the shim left real,
	// by "<category>/<api>" (e.g. "random/crypto.generateKeyPair(rsa)").
	Unserved map[string]int64 `msgpack:"unserved,omitempty"`

	// drift
	What   string `msgpack:"what,omitempty"`
	Detail string `msgpack:"detail,omitempty"`

	// trace.start: the peer's process lineage counts from its n-th exec.
	FromExec int `msgpack:"from_exec,omitempty"`
	// observe (on the connection that opened Session): What is replay,
	// coverage, revert or network; Value the fidelity, coverage ratio,
	// revert seconds; Counts the escapes by category or network outcomes.
	Value  float64          `msgpack:"value,omitempty"`
	Counts map[string]int64 `msgpack:"counts,omitempty"`
}

// Reply is every field any reply may carry.
type Reply struct {
	ID  uint64 `msgpack:"id"`
	OK  bool   `msgpack:"ok"`
	Err string `msgpack:"err,omitempty"`

	Proto   int    `msgpack:"proto,omitempty"`
	Version string `msgpack:"version,omitempty"`

	// hello (shim)
	Stream    string `msgpack:"stream,omitempty"`
	Mode      string `msgpack:"mode,omitempty"`
	Seed      uint64 `msgpack:"seed"`
	EpochNS   int64  `msgpack:"epoch_ns,omitempty"`
	MonoNS    int64  `msgpack:"mono_ns,omitempty"`
	QuantumNS int64  `msgpack:"quantum_ns,omitempty"`
	Replay    bool   `msgpack:"replay"`
	Batch     int    `msgpack:"batch,omitempty"`

	Child   string `msgpack:"child,omitempty"`
	Session string `msgpack:"session,omitempty"`
	// Token (session.open) is the new session's capability, for its
	// processes' DAL_SESSION_TOKEN.
	Token string `msgpack:"token,omitempty"`
	// Socket (session.open) is the path of the session's own socket, the
	// one its processes connect to (DAL_SOCKET): it serves that session's
	// shims only.
	Socket string `msgpack:"socket,omitempty"`

	Kinds  []byte     `msgpack:"kinds,omitempty"`
	Values Int64s     `msgpack:"values,omitempty"`
	Data   []byte     `msgpack:"data,omitempty"`
	End    bool       `msgpack:"end"`
	Timers [][2]int64 `msgpack:"timers,omitempty"`

	// status and session.dump
	PID      int             `msgpack:"pid,omitempty"`
	UptimeS  float64         `msgpack:"uptime_s,omitempty"`
	Sessions []SessionStatus `msgpack:"sessions,omitempty"`
	Streams  []StreamStatus  `msgpack:"streams,omitempty"`
	Drift    []Drift         `msgpack:"drift,omitempty"`
	// Attached (status): the tracer's eBPF programs are attached to their
	// hooks now, which they are only while a traced session is open.
	Attached bool `msgpack:"attached,omitempty"`

	// trace.start and trace.report
	Tracing  bool              `msgpack:"tracing"`
	Reason   string            `msgpack:"reason,omitempty"`
	Syscalls map[string]uint64 `msgpack:"syscalls,omitempty"`
	Events   []TraceEvent      `msgpack:"events,omitempty"`
	Drops    uint64            `msgpack:"drops,omitempty"`
}

// TraceEvent is one notable boundary crossing the tracer saw.
type TraceEvent struct {
	Kind   string `msgpack:"kind" json:"kind"`
	PID    int    `msgpack:"pid" json:"pid"`
	Detail string `msgpack:"detail" json:"detail"`
}

// SessionStatus describes one session in a status reply.
type SessionStatus struct {
	ID      string `msgpack:"id" json:"id"`
	Mode    string `msgpack:"mode" json:"mode"`
	Seed    uint64 `msgpack:"seed" json:"seed"`
	Streams int    `msgpack:"streams" json:"streams"`
	Live    int    `msgpack:"live" json:"live"`
	Drift   int    `msgpack:"drift" json:"drift"`
}

// StreamStatus is one process stream's clock log summary.
type StreamStatus struct {
	Stream   string           `msgpack:"stream" json:"stream"`
	PID      int              `msgpack:"pid" json:"pid"`
	Runtime  string           `msgpack:"runtime" json:"runtime"`
	Reads    int64            `msgpack:"reads" json:"reads"`
	Ticks    int              `msgpack:"ticks" json:"ticks"`
	SleepNS  int64            `msgpack:"sleep_ns" json:"sleep_ns"`
	NowNS    int64            `msgpack:"now_ns" json:"now_ns"`
	Timers   [][2]int64       `msgpack:"timers" json:"timers"`
	Draws    map[string]int64 `msgpack:"draws,omitempty" json:"draws,omitempty"`
	Unserved map[string]int64 `msgpack:"unserved,omitempty" json:"unserved,omitempty"`
	Reported bool             `msgpack:"reported" json:"reported"`
}

// Drift is one divergence a shim observed while serving a recording.
type Drift struct {
	Stream string `msgpack:"stream" json:"stream"`
	What   string `msgpack:"what" json:"what"`
	Detail string `msgpack:"detail" json:"detail"`
}

// ErrNotMap reports a frame body that is not a msgpack map.
var ErrNotMap = errors.New("frame body is not a msgpack map")

// DecodeRequest decodes a frame body. A body that is not a msgpack map, or
// that has no op, is an error; the returned Request still carries the id
// when one could be read, so the error can be answered.
func DecodeRequest(body []byte) (Request, error) {
	var req Request
	if len(body) == 0 || !isMap(body[0]) {
		return req, ErrNotMap
	}
	if err := check(body); err != nil {
		return req, fmt.Errorf("malformed request: %w", err)
	}
	dec := msgpack.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("malformed request: %w", err)
	}
	if req.Op == "" {
		return req, errors.New("request has no op")
	}
	return req, nil
}

// DecodeReply decodes a reply frame body.
func DecodeReply(body []byte) (Reply, error) {
	var rep Reply
	if len(body) == 0 || !isMap(body[0]) {
		return rep, ErrNotMap
	}
	if err := check(body); err != nil {
		return rep, fmt.Errorf("malformed reply: %w", err)
	}
	if err := msgpack.Unmarshal(body, &rep); err != nil {
		return rep, fmt.Errorf("malformed reply: %w", err)
	}
	return rep, nil
}

// Encode encodes a request or reply as a msgpack map.
func Encode(v any) ([]byte, error) { return msgpack.Marshal(v) }

// isMap reports whether b is the first byte of a msgpack map.
func isMap(b byte) bool { return b&0xf0 == 0x80 || b == 0xde || b == 0xdf }

// Int64s is a []int64 that decodes without reflection per element: tick
// batches carry thousands of values and the generic slice decoder spends
// most of its time looking up the element decoder.
type Int64s []int64

// DecodeMsgpack implements msgpack.CustomDecoder.
func (v *Int64s) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n < 0 {
		*v = nil
		return nil
	}
	out := make([]int64, n) // n is bounded by the frame: check ran first
	for i := range out {
		if out[i], err = dec.DecodeInt64(); err != nil {
			return err
		}
	}
	*v = out
	return nil
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (v Int64s) EncodeMsgpack(enc *msgpack.Encoder) error {
	if err := enc.EncodeArrayLen(len(v)); err != nil {
		return err
	}
	for _, x := range v {
		if err := enc.EncodeInt(x); err != nil {
			return err
		}
	}
	return nil
}
