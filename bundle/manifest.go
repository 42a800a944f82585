package bundle

import (
	"bytes"
	"crypto/rand"
	_ "embed"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"time"
)

// FormatVersion is the bundle format version this package writes and the
// only one it reads.
const FormatVersion = 1

// SnapshotVersion is the execution-snapshot schema version ("version").
const SnapshotVersion = "1.0"

// Execution modes of docs/design.md §2, the schema's config.execution_mode.
const (
	ModeStrict  = "strict"
	ModeSeeded  = "seeded"
	ModeLogged  = "logged"
	ModeDefault = "default"
)

// Match statuses of the schema's replay_status.match_status.
const (
	ExactMatch    = "exact_match"
	SemanticMatch = "semantic_match"
	PartialMatch  = "partial_match"
	NoMatch       = "no_match"
	NotReplayed   = "not_replayed"
)

// Operations of outputs.artifacts_created.
const (
	OpCreated  = "created"
	OpModified = "modified"
	OpDeleted  = "deleted"
)

// Manifest is manifest.json: an execution snapshot (docs/design.md §6.1) whose
// dal section covers every file of the bundle.
type Manifest struct {
	SnapshotID   string        `json:"snapshot_id"` // a UUID; Commit fills it when empty
	WorkflowID   string        `json:"workflow_id"`
	Version      string        `json:"version,omitempty"` // Commit fills SnapshotVersion when empty
	CapturedAt   time.Time     `json:"captured_at"`       // Commit fills the current time when zero
	Config       Config        `json:"config"`
	Inputs       Inputs        `json:"inputs"`
	Outputs      Outputs       `json:"outputs"`
	Metrics      *Metrics      `json:"metrics,omitempty"`
	ReplayStatus *ReplayStatus `json:"replay_status,omitempty"` // Commit fills "not replayed" when nil
	Dal          DalSection    `json:"dal"`
}

// Config is the snapshot's execution configuration.
type Config struct {
	Model            Model    `json:"model"`
	ExecutionMode    string   `json:"execution_mode"` // one of the Mode constants
	Temperature      *float64 `json:"temperature,omitempty"`
	Seed             *uint64  `json:"seed,omitempty"`
	MaxTokens        *int64   `json:"max_tokens,omitempty"`
	TopP             *float64 `json:"top_p,omitempty"`
	StopSequences    []string `json:"stop_sequences,omitempty"`
	SystemPromptHash string   `json:"system_prompt_hash,omitempty"`
	Agent            *Agent   `json:"agent,omitempty"`
}

// Model identifies the LLM the run used (from prompts/). ID is required
// by the schema; a run that made no LLM call may use ModelNone.
type Model struct {
	ID       string `json:"id"`
	Provider string `json:"provider,omitempty"`
	Version  string `json:"version,omitempty"`
}

// ModelNone is the model ID of a run that made no LLM call.
const ModelNone = "none"

// Agent describes the agent that ran.
type Agent struct {
	Name        string   `json:"name,omitempty"`
	Version     string   `json:"version,omitempty"`
	Tools       []string `json:"tools,omitempty"`
	RulesActive []string `json:"rules_active,omitempty"`
}

// Inputs are all inputs to the run.
type Inputs struct {
	UserPrompt     string            `json:"user_prompt,omitempty"`
	UserPromptHash string            `json:"user_prompt_hash,omitempty"`
	ContextFiles   []ContextFile     `json:"context_files,omitempty"`
	Environment    map[string]string `json:"environment,omitempty"`
}

// ContextFile is one input file the run read.
type ContextFile struct {
	Path      string `json:"path"`
	Hash      string `json:"hash"`
	SizeBytes int64  `json:"size_bytes"`
}

// Outputs are all outputs of the run.
type Outputs struct {
	Response         string     `json:"response,omitempty"`
	ResponseHash     string     `json:"response_hash,omitempty"`
	ArtifactsCreated []Artifact `json:"artifacts_created,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

// Artifact is one file the run created, modified or deleted.
type Artifact struct {
	Path      string `json:"path"`
	Hash      string `json:"hash,omitempty"`
	Operation string `json:"operation"` // one of the Op constants
}

// ToolCall is one tool call of the run.
type ToolCall struct {
	Tool       string     `json:"tool"`
	InputHash  string     `json:"input_hash,omitempty"`
	OutputHash string     `json:"output_hash,omitempty"`
	Timestamp  *time.Time `json:"timestamp,omitempty"`
}

// Metrics are the run's execution metrics.
type Metrics struct {
	DurationMS     int64 `json:"duration_ms"`
	TokensInput    int64 `json:"tokens_input"`
	TokensOutput   int64 `json:"tokens_output"`
	ToolCallsCount int64 `json:"tool_calls_count"`
	Iterations     int64 `json:"iterations,omitempty"`
}

// ReplayStatus summarizes the replays of a bundle.
type ReplayStatus struct {
	Replayed    bool       `json:"replayed"`
	ReplayCount int        `json:"replay_count"`
	LastReplay  *time.Time `json:"last_replay,omitempty"`
	MatchStatus string     `json:"match_status"`
}

// DalSection is the manifest's "dal" object. Commit fills every field but
// CreatedBy (which it fills only when empty).
type DalSection struct {
	FormatVersion int    `json:"format_version"`
	CreatedBy     string `json:"created_by"`
	PublicKey     string `json:"public_key"` // ed25519, standard base64
	// Files maps each regular file's slash-separated relative path to
	// "sha256:<hex>" of its content.
	Files map[string]string `json:"files"`
	// Symlinks maps each symbolic link's path to "sha256:<hex>" of its
	// target string.
	Symlinks map[string]string `json:"symlinks,omitempty"`
	// EmptyDirs lists, sorted, the directories that hold nothing.
	EmptyDirs []string `json:"empty_dirs,omitempty"`
	// Incomplete names, one sentence each, what the run left that the
	// bundle could not capture (its file changes when the capture
	// failed: a path past PATH_MAX, a full disk, a file that vanished).
	// Such a bundle keeps the rest (network.har, policy.json, logs) for
	// audit; it is not replayed.
	Incomplete []string `json:"incomplete,omitempty"`
}

// Reserved names at the root of a bundle.
const (
	ManifestFile  = "manifest.json"
	SignatureFile = "manifest.sig"
	ReplaysDir    = "replays"
)

//go:embed execution-snapshot.schema.json
var schemaJSON []byte

// SchemaJSON returns the execution-snapshot JSON Schema that manifests are
// validated against (the file docs/schema/execution-snapshot.schema.json).
func SchemaJSON() []byte { return bytes.Clone(schemaJSON) }

// ValidateManifest checks manifest JSON against the execution-snapshot
// schema. The error names the first offending location, e.g.
// "at /config/execution_mode: value must be one of ...".
func ValidateManifest(data []byte) error { return validateJSON(data, "#") }

func validateReplay(data []byte) error { return validateJSON(data, "#/$defs/replay_outcome") }

// MatchStatusFor maps a replay fidelity to a match status: 1 is an exact
// match, 0 no match, anything between a partial match.
func MatchStatusFor(fidelity float64) string {
	switch {
	case fidelity >= 1:
		return ExactMatch
	case fidelity <= 0:
		return NoMatch
	default:
		return PartialMatch
	}
}

// newUUID returns a random (version 4) UUID.
func newUUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:]), nil
}

// defaultCreatedBy names this build when the caller did not.
func defaultCreatedBy() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return "dal " + bi.Main.Version
	}
	return "dal"
}

// fillDefaults sets the fields Commit owns or defaults.
func (m *Manifest) fillDefaults(now time.Time) error {
	if m.SnapshotID == "" {
		id, err := newUUID()
		if err != nil {
			return fmt.Errorf("snapshot id: %w", err)
		}
		m.SnapshotID = id
	}
	if m.Version == "" {
		m.Version = SnapshotVersion
	}
	if m.CapturedAt.IsZero() {
		m.CapturedAt = now.UTC()
	}
	if m.ReplayStatus == nil {
		m.ReplayStatus = &ReplayStatus{MatchStatus: NotReplayed}
	}
	if m.Dal.CreatedBy == "" {
		m.Dal.CreatedBy = defaultCreatedBy()
	}
	m.Dal.FormatVersion = FormatVersion
	return nil
}

// marshalManifest is the exact manifest.json encoding.
func marshalManifest(m *Manifest) ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
