package show

import (
	"encoding/json"

	"github.com/dal-runtime/dal/internal/boundary"
)

// Page is everything the HTML page shows: one run, or two and their
// comparison. It is embedded in the page as JSON.
type Page struct {
	Version     int         `json:"version"`
	GeneratedBy string      `json:"generated_by"`
	Runs        []*View     `json:"runs"`
	Compare     *Comparison `json:"compare,omitempty"`
}

// PageVersion is the version of the page's JSON (the script reads it).
const PageVersion = 1

// View is one bundle, as the page shows it.
type View struct {
	Name   string `json:"name"` // the path the user gave
	Signer Signer `json:"signer"`
	// Notices are what the reader must know before trusting the page: an
	// untrusted signer, stray files in replays/, parts left out.
	Notices []string `json:"notices"`

	Summary     Summary            `json:"summary"`
	Env         Env                `json:"env"`
	Streams     []Stream           `json:"streams"`
	LLM         []LLMCall          `json:"llm"`
	HTTP        []Exchange         `json:"http"`
	Events      []Event            `json:"events"`
	EventsLeft  int                `json:"events_left,omitempty"`
	Iterations  *Iterations        `json:"iterations,omitempty"`
	Checkpoints []Checkpoint       `json:"checkpoints"`
	Files       []File             `json:"files"`
	Logs        []Log              `json:"logs"`
	Replay      Replay             `json:"replay"`
	Boundary    *boundary.Boundary `json:"boundary,omitempty"` // syscalls.json without its events (Events has them)
}

// Signer is who signed the bundle.
type Signer struct {
	Fingerprint string `json:"fingerprint"`
	Trusted     bool   `json:"trusted"`
	Source      string `json:"source,omitempty"`
}

// Summary is the run at a glance.
type Summary struct {
	Command      []string `json:"command"`
	Mode         string   `json:"mode"`
	Seed         uint64   `json:"seed"`
	Epoch        string   `json:"epoch"`
	ExitCode     int      `json:"exit_code"`
	TimedOut     bool     `json:"timed_out,omitempty"`
	DurationMS   int64    `json:"duration_ms"`
	StartedAt    string   `json:"started_at"`
	Workspace    string   `json:"workspace"`
	Cwd          string   `json:"cwd"`
	DalVersion   string   `json:"dal_version"`
	Host         string   `json:"host"`
	Model        string   `json:"model,omitempty"`
	TokensIn     int64    `json:"tokens_in"`
	TokensOut    int64    `json:"tokens_out"`
	Files        int      `json:"files"`
	SnapshotID   string   `json:"snapshot_id"`
	CapturedAt   string   `json:"captured_at"`
	MatchStatus  string   `json:"match_status"`
	ReplayCount  int      `json:"replay_count"`
	SelfContains bool     `json:"self_contained"`
}

// Env is how the run was set up: guard rails and kept variables. Secret
// variables are listed by name only (the bundle never holds their value).
type Env struct {
	GuardRails map[string]string `json:"guard_rails"`
	Inherited  map[string]string `json:"inherited"`
	Kept       map[string]string `json:"kept,omitempty"`
	Secrets    []string          `json:"secrets,omitempty"`
	Scrubbed   []string          `json:"scrubbed,omitempty"`
	Runtimes   map[string]string `json:"runtimes,omitempty"`
	Denied     []string          `json:"denied_writes,omitempty"`
	Blocked    []string          `json:"blocked,omitempty"`
}

// Stream is one process's clock stream: its id places it in the spawn
// tree ("0.1" is the first child of "0").
type Stream struct {
	ID       string           `json:"id"`
	Parent   string           `json:"parent"`
	Depth    int              `json:"depth"`
	Runtime  string           `json:"runtime"`
	Reported bool             `json:"reported"`
	Reads    int64            `json:"reads"`
	SleepNS  int64            `json:"sleep_ns"`
	NowNS    int64            `json:"now_ns"`
	Timers   int              `json:"timers"`
	Draws    map[string]int64 `json:"draws,omitempty"`
}

// Message is one chat message, flattened to text.
type Message struct {
	Role string `json:"role"`
	Text string `json:"text"`
}

// LLMCall is one prompts/NNNN.json with the timing of its exchange.
type LLMCall struct {
	File       string          `json:"file"` // prompts/NNNN.json
	Seq        int             `json:"seq"`
	HTTP       int             `json:"http"` // index into View.HTTP, -1: none
	Provider   string          `json:"provider"`
	API        string          `json:"api"`
	URL        string          `json:"url"`
	Status     int             `json:"status"`
	Model      string          `json:"model"`
	Params     json.RawMessage `json:"params,omitempty"`
	Messages   []Message       `json:"messages"`
	Response   Message         `json:"response"`
	Finish     string          `json:"finish,omitempty"`
	Error      string          `json:"error,omitempty"`
	Stream     bool            `json:"stream"`
	Chunks     int             `json:"chunks"`
	TokensIn   int             `json:"tokens_in"`
	TokensOut  int             `json:"tokens_out"`
	StartMS    float64         `json:"start_ms"`
	LatencyMS  float64         `json:"latency_ms"`
	FirstChunk float64         `json:"first_chunk_ms,omitempty"` // time to the first streamed chunk
}

// Exchange is one network.har entry.
type Exchange struct {
	Seq         int         `json:"seq"`
	Method      string      `json:"method"`
	URL         string      `json:"url"`
	Status      int         `json:"status"`
	StatusText  string      `json:"status_text,omitempty"`
	ReqSize     int64       `json:"req_size"`
	RespSize    int64       `json:"resp_size"`
	Mime        string      `json:"mime,omitempty"`
	StartMS     float64     `json:"start_ms"`
	TimeMS      float64     `json:"time_ms"`
	WaitMS      float64     `json:"wait_ms"`
	ReceiveMS   float64     `json:"receive_ms"`
	LLM         int         `json:"llm"` // index into View.LLM, -1: none
	Via         string      `json:"via,omitempty"`
	Error       string      `json:"error,omitempty"`
	Refused     string      `json:"refused,omitempty"`
	Answered    string      `json:"answered,omitempty"`
	Redactions  []string    `json:"redactions,omitempty"`
	ReqHeaders  [][2]string `json:"req_headers"`
	RespHeaders [][2]string `json:"resp_headers"`
	ReqBody     *Body       `json:"req_body,omitempty"`
	RespBody    *Body       `json:"resp_body,omitempty"`
	Chunks      []Chunk     `json:"chunks,omitempty"`
	ChunksLeft  int         `json:"chunks_left,omitempty"`
}

// Body is a request or response body, as text (base64 when it is not
// UTF-8), possibly cut.
type Body struct {
	Text   string `json:"text"`
	Base64 bool   `json:"base64,omitempty"`
	Size   int    `json:"size"`
	Cut    bool   `json:"cut,omitempty"` // Text is the first part only
}

// Chunk is one streamed piece of a response, as it arrived.
type Chunk struct {
	AtMS float64 `json:"at_ms"`
	Text string  `json:"text"`
}

// Event is a notable crossing from syscalls.json (exec, connect, open of
// a random device).
type Event struct {
	Kind   string `json:"kind"`
	PID    int    `json:"pid"`
	Detail string `json:"detail"`
}

// Iterations is iterations/selection.json.
type Iterations struct {
	Selected    int         `json:"selected"`
	Best        int         `json:"best"`
	Final       int         `json:"final"`
	Override    bool        `json:"override"`
	Accepted    bool        `json:"accepted"`
	Rationale   []string    `json:"rationale"`
	Degradation []string    `json:"degradation"`
	Items       []Iteration `json:"items"`
}

// Iteration is one marked iteration.
type Iteration struct {
	Seq       int                `json:"seq"`
	Score     *float64           `json:"score"`
	Source    string             `json:"source"`
	Accepted  bool               `json:"accepted"`
	Note      string             `json:"note,omitempty"`
	Delta     *float64           `json:"delta,omitempty"`
	Dims      map[string]float64 `json:"dims,omitempty"`
	Artifacts []string           `json:"artifacts"`
	AtNS      int64              `json:"at_ns,omitempty"`
}

// Checkpoint is a checkpoint the run stored (from the local checkpoint
// store: a bundle does not hold them).
type Checkpoint struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Tag   string `json:"tag,omitempty"`
	Note  string `json:"note,omitempty"`
	AtNS  int64  `json:"at_ns"`
	Files int    `json:"files"`
	Bytes int64  `json:"bytes"`
}

// File is one change of fs-diff/changes.json.
type File struct {
	Path        string `json:"path"`
	Op          string `json:"op"`
	Kind        string `json:"kind"`
	Mode        string `json:"mode"`
	Size        int64  `json:"size"`
	PreSize     int64  `json:"pre_size"`
	Hash        string `json:"hash,omitempty"`
	LinkTarget  string `json:"link_target,omitempty"`
	RenamedFrom string `json:"renamed_from,omitempty"`
	Binary      bool   `json:"binary,omitempty"`
	Diff        string `json:"diff,omitempty"` // unified diff, text files
	NoDiff      string `json:"no_diff,omitempty"`
}

// Log is one of logs/: its head and tail when it is long.
type Log struct {
	Name    string `json:"name"` // stdout, stderr, dal.log
	Size    int64  `json:"size"`
	Head    string `json:"head"`
	Tail    string `json:"tail,omitempty"`
	Omitted int64  `json:"omitted,omitempty"` // bytes between head and tail
}

// Replay is the bundle's replay outcomes: the latest trusted one in full.
type Replay struct {
	Count      int          `json:"count"`
	Latest     *Verdict     `json:"latest,omitempty"`
	Unverified []Unverified `json:"unverified,omitempty"`
}

// Verdict is one replay outcome, component by component.
type Verdict struct {
	File       string      `json:"file"`
	At         string      `json:"at"`
	Fidelity   float64     `json:"fidelity"`
	Status     string      `json:"status"`
	SignedBy   string      `json:"signed_by"`
	Components []Component `json:"components"`
}

// Component is one compared component of a replay; a divergent one says
// where in the page its first divergence is.
type Component struct {
	Name  string `json:"name"`
	Match bool   `json:"match"`
	First string `json:"first,omitempty"`
	At    *Place `json:"at,omitempty"`
}

// Place is where in the page a divergence is: a tab, an item of it and a
// line or message of that item.
type Place struct {
	Tab   string `json:"tab"`            // "output", "timeline", "files"
	Item  string `json:"item,omitempty"` // log name, file path
	Index int    `json:"index"`          // LLM call or HTTP entry index, -1: none
	Line  int    `json:"line,omitempty"` // 1-based line of a log
	Msg   int    `json:"msg"`            // message index of an LLM call, -1: none
	Kind  string `json:"kind,omitempty"` // "llm" or "http" for the timeline
}

// Unverified is a replay outcome that does not count, and why.
type Unverified struct {
	File   string `json:"file"`
	Reason string `json:"reason"`
}

// Comparison pairs two runs: A is Runs[0], B is Runs[1].
type Comparison struct {
	Summary  []Difference `json:"summary"`
	Timeline []Pair       `json:"timeline"`
	LLM      []LLMPair    `json:"llm"`
	Files    []FilePair   `json:"files"`
	Logs     []LogPair    `json:"logs"`
}

// Difference is one field of the two runs.
type Difference struct {
	Name string `json:"name"`
	A    string `json:"a"`
	B    string `json:"b"`
	Same bool   `json:"same"`
}

// Pair is one row of the aligned timelines: an activity of A, of B, or
// of both ("same": the same request; "changed": at the same place, but a
// different one).
type Pair struct {
	Kind  string `json:"kind"` // "llm" or "http"
	A     int    `json:"a"`    // index into A's LLM or HTTP, -1: none
	B     int    `json:"b"`
	State string `json:"state"` // same, changed, only_a, only_b
}

// LLMPair is the i-th LLM call of A against the i-th of B.
type LLMPair struct {
	A        int           `json:"a"` // index into A's LLM, -1: none
	B        int           `json:"b"`
	Same     bool          `json:"same"`
	Model    string        `json:"model,omitempty"` // "m1 → m2" when it differs
	Messages []MessageDiff `json:"messages"`
}

// MessageDiff compares one message (or the response, Index -1).
type MessageDiff struct {
	Index int    `json:"index"` // -1: the response
	Role  string `json:"role"`
	State string `json:"state"` // same, changed, only_a, only_b
	Diff  string `json:"diff,omitempty"`
}

// FilePair is one path changed by either run.
type FilePair struct {
	Path  string `json:"path"`
	A     string `json:"a"` // "created 12 B", "" when A did not change it
	B     string `json:"b"`
	State string `json:"state"` // same, changed, only_a, only_b
	Diff  string `json:"diff,omitempty"`
}

// LogPair compares one log.
type LogPair struct {
	Name  string `json:"name"`
	Same  bool   `json:"same"`
	First string `json:"first,omitempty"`
}
