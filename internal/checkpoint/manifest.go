package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dal-runtime/dal/internal/atomicfile"
)

// SchemaVersion is the version of manifest.json and of the checkpoint.json
// inside archives.
const SchemaVersion = 1

// ManifestFile is the manifest's name in a run's directory.
const ManifestFile = "manifest.json"

// Run is the agent run the checkpoints came from.
type Run struct {
	// ID names the run's directory; Ingest makes one (NewRunID) when empty.
	ID string `json:"id"`
	// Command is the agent's command line.
	Command []string `json:"command,omitempty"`
	// Workspace is the absolute path of the directory the agent worked in:
	// restores go there by default and retention counts per workspace.
	Workspace string  `json:"workspace"`
	Mode      string  `json:"mode,omitempty"`
	Seed      *uint64 `json:"seed,omitempty"`
	// Bundle is the recorded bundle, when the run was recorded.
	Bundle string `json:"bundle,omitempty"`
	// Started and Finished are real times.
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Failed runs keep all their checkpoints (retention's count limit does
	// not apply to them).
	Failed bool `json:"failed"`
	// Manual is set for checkpoints saved with `dal-exec checkpoint save`
	// outside an agent run.
	Manual bool `json:"manual,omitempty"`
}

// Artifact is one file of a checkpoint.
type Artifact struct {
	// Path is relative to the workspace, /-separated; absolute when the
	// file was outside the workspace.
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	Mode   uint32 `json:"mode"`
}

// Entry is one checkpoint in a manifest.
type Entry struct {
	Seq  int    `json:"seq"`
	Name string `json:"name"`
	Tag  string `json:"tag,omitempty"`
	Note string `json:"note,omitempty"`
	// AtNS is the mark's clock (virtual under the shims' strict mode);
	// Stored is the real time it entered the store, which retention uses.
	AtNS   int64     `json:"at_ns"`
	Stored time.Time `json:"stored"`
	// MarkSeq is the mark's number in the run's marks directory.
	MarkSeq int    `json:"mark_seq"`
	Runtime string `json:"runtime,omitempty"`

	Archive       string     `json:"archive"`
	ArchiveSHA256 string     `json:"archive_sha256"`
	ArchiveSize   int64      `json:"archive_size"`
	Artifacts     []Artifact `json:"artifacts"`
	StateSHA256   string     `json:"state_sha256"`
	StateSize     int64      `json:"state_size"`
	// Compression is "zstd"; Compacted is set once retention recompressed
	// the archive at zstd's best level.
	Compression string `json:"compression"`
	Compacted   bool   `json:"compacted"`
}

// ArtifactBytes is the total size of the checkpoint's artifacts.
func (e *Entry) ArtifactBytes() int64 {
	var n int64
	for _, a := range e.Artifacts {
		n += a.Size
	}
	return n
}

// Manifest is a run's manifest.json.
type Manifest struct {
	SchemaVersion int     `json:"schema_version"`
	Run           Run     `json:"run"`
	Checkpoints   []Entry `json:"checkpoints"`
	// Checksum is the SHA-256 of the manifest's compact JSON with this field
	// empty: a changed byte anywhere in the file is found.
	Checksum string `json:"checksum"`
}

func (m *Manifest) normalize() {
	m.Run.Started = m.Run.Started.UTC()
	m.Run.Finished = m.Run.Finished.UTC()
	for i := range m.Checkpoints {
		m.Checkpoints[i].Stored = m.Checkpoints[i].Stored.UTC()
	}
	if m.Checkpoints == nil {
		m.Checkpoints = []Entry{}
	}
}

func (m *Manifest) checksum() string {
	c := *m
	c.Checksum = ""
	b, err := json.Marshal(&c)
	if err != nil { // only plain data: cannot happen
		return ""
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// entry returns the checkpoint seq, or nil.
func (m *Manifest) entry(seq int) *Entry {
	for i := range m.Checkpoints {
		if m.Checkpoints[i].Seq == seq {
			return &m.Checkpoints[i]
		}
	}
	return nil
}

func (m *Manifest) maxSeq() int {
	n := 0
	for _, e := range m.Checkpoints {
		n = max(n, e.Seq)
	}
	return n
}

// readManifest reads and checks dir's manifest. A missing manifest is
// fs.ErrNotExist; anything else wrong is a *ManifestError.
func readManifest(dir, runID string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) error {
		return &ManifestError{Run: runID, Reason: fmt.Sprintf(format, a...)}
	}
	m := &Manifest{}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, bad("it is not valid JSON (%v)", err)
	}
	if m.SchemaVersion != SchemaVersion {
		if m.SchemaVersion > SchemaVersion {
			return nil, &ManifestError{Run: runID, Newer: true, Reason: fmt.Sprintf("it has schema version %d, written by a newer dal (this one reads %d)", m.SchemaVersion, SchemaVersion)}
		}
		return nil, bad("it has schema version %d, expected %d", m.SchemaVersion, SchemaVersion)
	}
	if got := m.checksum(); got != m.Checksum {
		return nil, bad("its content has checksum %s, the manifest says %s", short(got), short(m.Checksum))
	}
	if m.Run.ID != runID {
		return nil, bad("it names run %q", m.Run.ID)
	}
	seen := map[int]bool{}
	for _, e := range m.Checkpoints {
		if e.Seq <= 0 || seen[e.Seq] || !validArchiveName(e.Archive) {
			return nil, bad("checkpoint %d is listed with an invalid number or archive name %q", e.Seq, e.Archive)
		}
		seen[e.Seq] = true
	}
	return m, nil
}

// writeManifest replaces dir's manifest atomically.
func writeManifest(dir string, m *Manifest) error {
	m.SchemaVersion = SchemaVersion
	m.normalize()
	m.Checksum = m.checksum()
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, ManifestFile), append(b, '\n'), 0o644)
}

// writeFileAtomic replaces path with b (atomicfile), then syncs the
// directory so the rename itself survives a crash.
func writeFileAtomic(path string, b []byte, perm os.FileMode) error {
	if err := atomicfile.WriteFile(path, b, perm); err != nil {
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(path))
}

// short abbreviates a hex digest for messages.
func short(h string) string {
	if len(h) > 16 {
		return h[:16] + "…"
	}
	if h == "" {
		return "(none)"
	}
	return h
}
