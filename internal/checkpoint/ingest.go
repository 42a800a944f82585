package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/dal-runtime/dal/internal/marks"
	"github.com/klauspost/compress/zstd"
)

// Checkpoint is one stored checkpoint with its run, as List and Get return
// it.
type Checkpoint struct {
	ID  string `json:"id"` // run/seq
	Run Run    `json:"run"`
	Entry
	// ArchivePath is the archive's absolute path.
	ArchivePath string `json:"archive_path"`
}

func (s *Store) view(r *Run, e Entry) Checkpoint {
	return Checkpoint{ID: r.ID + "/" + strconv.Itoa(e.Seq), Run: *r, Entry: e,
		ArchivePath: filepath.Join(s.runDir(r.ID), e.Archive)}
}

// IngestResult is what Ingest did.
type IngestResult struct {
	Run    Run          // as stored (ID filled in)
	Stored []Checkpoint // in mark order
	// Skipped are marks that were not stored, each error naming the mark
	// and why (a copy changed after the mark was written, ...).
	Skipped []error
	// Pruned is what retention did afterwards (nil when nothing was
	// stored); PruneErr is a retention failure, which leaves the stored
	// checkpoints in place.
	Pruned   *Report
	PruneErr error
}

// sourceError is a problem with a mark being stored, not with the store.
type sourceError struct{ err error }

func (e sourceError) Error() string { return e.err.Error() }
func (e sourceError) Unwrap() error { return e.err }

var hexSHA256 = lazyRegexp(`^[0-9a-f]{64}$`)

// Ingest stores the checkpoint marks ms of run (other kinds are ignored)
// and then applies s.Policy. The marks are numbered after the run's
// existing checkpoints: a new run keeps the marks' numbers, and adding to a
// run (the manual run of `checkpoint save`) continues its numbering. Either
// all the stored checkpoints appear (the manifest is written once, last) or
// none does. A mark whose copies do not match its hashes is skipped and
// named in Skipped; the others are stored.
func (s *Store) Ingest(run Run, ms []*marks.Mark) (*IngestResult, error) {
	var cps []*marks.Mark
	for _, mk := range ms {
		if mk != nil && mk.Kind == marks.Checkpoint {
			cps = append(cps, mk)
		}
	}
	res := &IngestResult{Run: run}
	if len(cps) == 0 {
		return res, nil
	}
	now := s.now()
	if run.ID == "" {
		run.ID = NewRunID(now)
	}
	if !validRunID(run.ID) {
		return nil, fmt.Errorf("checkpoint: run id %q: use letters, digits, '.', '_' and '-'", run.ID)
	}
	if run.Workspace == "" || !filepath.IsAbs(run.Workspace) {
		return nil, fmt.Errorf("checkpoint: run %s: the workspace %q is not an absolute path", run.ID, run.Workspace)
	}
	run.Workspace = filepath.Clean(run.Workspace)
	unlock, err := s.lock(true)
	if err != nil {
		return nil, err
	}
	defer unlock()

	dir := s.runDir(run.ID)
	m, err := readManifest(dir, run.ID)
	fresh := errors.Is(err, fs.ErrNotExist)
	switch {
	case fresh:
		m = &Manifest{Run: run}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, writeErr("checkpoint store "+s.Dir, err)
		}
	case err != nil:
		return nil, err // damaged: leave it alone
	default:
		m.Run = mergeRun(m.Run, run)
	}
	res.Run = m.Run

	var created []string
	cleanup := func() {
		for _, a := range created {
			os.Remove(filepath.Join(dir, a))
		}
		if fresh {
			os.Remove(dir) // only when empty
		}
	}
	offset := m.maxSeq()
	var stored []Entry
	for _, mk := range cps {
		seq := offset + mk.Seq
		if mk.Seq <= 0 || m.entry(seq) != nil {
			seq = max(m.maxSeq(), offset) + 1
		}
		for _, e := range stored {
			seq = max(seq, e.Seq+1)
		}
		e, err := storeMark(dir, m.Run, mk, seq, now)
		var se sourceError
		if errors.As(err, &se) {
			res.Skipped = append(res.Skipped, fmt.Errorf("checkpoint mark %d (%s) was not stored: %w", mk.Seq, displayName(mk.Name), se.err))
			continue
		}
		if err != nil {
			cleanup()
			return nil, writeErr(fmt.Sprintf("checkpoint store %s: storing checkpoint mark %d", s.Dir, mk.Seq), err)
		}
		created = append(created, e.Archive)
		stored = append(stored, e)
	}
	if len(stored) == 0 {
		cleanup()
		return res, nil
	}
	m.Checkpoints = append(m.Checkpoints, stored...)
	if err := writeManifest(dir, m); err != nil {
		cleanup()
		return nil, writeErr(fmt.Sprintf("checkpoint store %s: writing the manifest of run %s", s.Dir, run.ID), err)
	}
	for _, e := range stored {
		res.Stored = append(res.Stored, s.view(&m.Run, e))
	}
	if !s.Policy.keepsAll() {
		res.Pruned, res.PruneErr = s.prune(s.Policy, now, false)
	}
	return res, nil
}

// mergeRun updates a stored run with a later Ingest into it.
func mergeRun(old, run Run) Run {
	if run.Finished.After(old.Finished) {
		old.Finished = run.Finished
	}
	old.Failed = old.Failed || run.Failed
	if old.Bundle == "" {
		old.Bundle = run.Bundle
	}
	return old
}

func displayName(n string) string {
	if n == "" {
		return "unnamed"
	}
	return n
}

// storeMark writes mk's archive as checkpoint seq. Problems with the mark
// itself are sourceErrors.
func storeMark(dir string, run Run, mk *marks.Mark, seq int, now time.Time) (Entry, error) {
	state := []byte("null")
	if len(mk.State) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, mk.State); err != nil {
			return Entry{}, sourceError{fmt.Errorf("its state is not valid JSON (%v)", err)}
		}
		state = buf.Bytes()
	}
	e := Entry{Seq: seq, Name: mk.Name, Tag: mk.Tag, Note: mk.Note, AtNS: mk.AtNS, Stored: now.UTC(), MarkSeq: mk.Seq,
		Runtime: mk.Runtime, Archive: archiveName(seq, mk.Name), Artifacts: []Artifact{},
		StateSHA256: sha256Hex(state), StateSize: int64(len(state)), Compression: "zstd"}
	var files []member
	for i, a := range mk.Artifacts {
		if a.Path == "" || !hexSHA256().MatchString(a.SHA256) || a.Size < 0 {
			return Entry{}, sourceError{fmt.Errorf("artifact %d has no path, sha256 or size", i)}
		}
		e.Artifacts = append(e.Artifacts, Artifact{Path: a.Path, SHA256: a.SHA256, Size: a.Size, Mode: a.Mode & 0o7777})
		files = append(files, member{name: filesPrefix + strconv.Itoa(i), size: a.Size, sha256: a.SHA256,
			what: "the copy of artifact " + a.Path, open: func() (io.ReadCloser, error) { return mk.Open(a) }})
	}
	meta, err := json.MarshalIndent(archiveMeta{SchemaVersion: SchemaVersion, Run: run, Checkpoint: e}, "", "  ")
	if err != nil {
		return Entry{}, err
	}
	members := append([]member{bytesMember(metaMember, meta), bytesMember(stateMember, state)}, files...)
	e.ArchiveSHA256, e.ArchiveSize, err = createArchive(dir, e.Archive, func(w io.Writer) error {
		return writeTar(w, zstd.SpeedDefault, members)
	})
	return e, err
}
