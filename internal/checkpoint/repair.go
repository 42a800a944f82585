package checkpoint

import (
	"archive/tar"
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// RepairReport is what Repair did.
type RepairReport struct {
	Run       string
	Recovered []Checkpoint
	// Lost are the archives that could not be recovered, each with why;
	// they are left in place.
	Lost []error
	// Backup is where the damaged manifest was moved ("" when it was
	// missing).
	Backup string
}

// Repair rebuilds the manifest of run (an id or a unique prefix) from its
// archives, which each carry their checkpoint's metadata, after checking
// every archive's content. The damaged manifest is kept beside it as
// manifest.json.damaged-N. Tags set after a checkpoint was stored are taken
// from the damaged manifest when it still parses and agrees on the
// archive's hash, else the tag the checkpoint was stored with is used. A
// manifest that is fine is left alone.
func (s *Store) Repair(run string) (*RepairReport, error) {
	unlock, err := s.lock(true)
	if err != nil {
		return nil, err
	}
	defer unlock()
	id, err := s.resolveRun(run, run)
	if err != nil {
		return nil, err
	}
	dir := s.runDir(id)
	_, err = readManifest(dir, id)
	if err == nil {
		return nil, fmt.Errorf("the manifest of run %s is intact: nothing to repair (`dal-exec checkpoint validate` checks the archives)", id)
	}
	var me *ManifestError
	if !errors.Is(err, fs.ErrNotExist) && !(errors.As(err, &me) && !me.Newer) {
		return nil, err
	}
	old := lenientManifest(dir)
	rep := &RepairReport{Run: id}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint store: run %s: %w", id, err)
	}
	bySeq := map[int]Entry{}
	var run0 *Run
	for _, de := range ents {
		name := de.Name()
		if !validArchiveName(name) || !de.Type().IsRegular() {
			continue
		}
		e, r, err := recoverArchive(dir, id, name)
		if err != nil {
			rep.Lost = append(rep.Lost, err)
			continue
		}
		if prev, ok := bySeq[e.Seq]; ok && !e.Compacted && prev.Compacted {
			continue // a compaction finished: keep the compacted copy
		}
		if o := old.entry(e.Seq); o != nil && o.ArchiveSHA256 == e.ArchiveSHA256 {
			e.Tag = o.Tag
		}
		bySeq[e.Seq] = e
		if run0 == nil || r.Finished.After(run0.Finished) {
			rr := r
			run0 = &rr
		}
	}
	if run0 == nil {
		return rep, fmt.Errorf("run %s: no archive could be recovered; they are left in place: %w", id, errors.Join(rep.Lost...))
	}
	m := &Manifest{Run: *run0}
	m.Run.ID = id
	m.Run.Failed = m.Run.Failed || old.Run.Failed
	for _, seq := range sortedInts(bySeq) {
		m.Checkpoints = append(m.Checkpoints, bySeq[seq])
	}
	if _, err := os.Stat(filepath.Join(dir, ManifestFile)); err == nil {
		rep.Backup = filepath.Join(dir, ManifestFile+".damaged-"+strconv.FormatInt(s.now().Unix(), 10))
		if err := os.Rename(filepath.Join(dir, ManifestFile), rep.Backup); err != nil {
			return nil, writeErr("checkpoint store: run "+id, err)
		}
	}
	if err := writeManifest(dir, m); err != nil {
		if rep.Backup != "" {
			os.Rename(rep.Backup, filepath.Join(dir, ManifestFile))
		}
		return nil, writeErr("checkpoint store: writing the manifest of run "+id, err)
	}
	for _, e := range m.Checkpoints {
		rep.Recovered = append(rep.Recovered, s.view(&m.Run, e))
	}
	return rep, nil
}

// lenientManifest parses a damaged manifest for hints; never nil.
func lenientManifest(dir string) *Manifest {
	m := &Manifest{}
	if b, err := os.ReadFile(filepath.Join(dir, ManifestFile)); err == nil {
		json.Unmarshal(b, m)
	}
	return m
}

// recoverArchive reads an archive's metadata and checks its content.
func recoverArchive(dir, runID, name string) (Entry, Run, error) {
	path := filepath.Join(dir, name)
	meta, err := readMeta(path)
	if err != nil {
		return Entry{}, Run{}, fmt.Errorf("archive %s: %w", name, err)
	}
	e := meta.Checkpoint
	e.Archive = name
	e.Compacted = strings.HasSuffix(name, ".compact"+archiveSuffix)
	if e.ArchiveSHA256, e.ArchiveSize, err = hashFile(path); err != nil {
		return Entry{}, Run{}, fmt.Errorf("archive %s: %w", name, err)
	}
	if e.Seq <= 0 || meta.Run.ID != runID {
		return Entry{}, Run{}, fmt.Errorf("archive %s belongs to run %s, checkpoint %d", name, meta.Run.ID, e.Seq)
	}
	f, err := os.Open(path)
	if err != nil {
		return Entry{}, Run{}, err
	}
	defer f.Close()
	if _, err := extract(bufio.NewReaderSize(f, 1<<20), runID+"/"+strconv.Itoa(e.Seq), &e, nil, nil); err != nil {
		return Entry{}, Run{}, err
	}
	return e, meta.Run, nil
}

// readMeta reads checkpoint.json, the first member of an archive.
func readMeta(path string) (*archiveMeta, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := zstd.NewReader(bufio.NewReader(f), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(decoderMaxWindow))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	hdr, err := tr.Next()
	if err != nil {
		return nil, fmt.Errorf("it cannot be decompressed (%v)", err)
	}
	if hdr.Name != metaMember {
		return nil, fmt.Errorf("its first member is %q, not %s", hdr.Name, metaMember)
	}
	b, err := io.ReadAll(io.LimitReader(tr, maxMetaSize))
	if err != nil {
		return nil, fmt.Errorf("it cannot be decompressed (%v)", err)
	}
	meta := &archiveMeta{}
	if err := json.Unmarshal(b, meta); err != nil {
		return nil, fmt.Errorf("its %s is not valid JSON (%v)", metaMember, err)
	}
	if meta.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("its %s has schema version %d, expected %d", metaMember, meta.SchemaVersion, SchemaVersion)
	}
	return meta, nil
}

func sortedInts[V any](m map[int]V) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	return ks
}
