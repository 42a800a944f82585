package checkpoint

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
)

// AgedAction is what retention does with checkpoints older than MaxAge.
type AgedAction string

const (
	// AgedDelete deletes them.
	AgedDelete AgedAction = "delete"
	// AgedCompress recompresses them at zstd's best level and marks them
	// compacted; they are kept.
	AgedCompress AgedAction = "compress"
)

// Policy is the retention policy. The zero Policy keeps everything.
type Policy struct {
	// Keep is how many of the most recent checkpoints of each workspace
	// are kept (whatever their run); beyond them only tagged checkpoints
	// and those of failed runs are kept. 0: no count limit.
	Keep int
	// MaxAge is the age (since the checkpoint was stored) beyond which
	// Aged applies; tagged checkpoints are exempt. 0: no age limit.
	MaxAge time.Duration
	// Aged is AgedDelete (also when empty) or AgedCompress.
	Aged AgedAction
}

// Defaults of DefaultPolicy.
const (
	DefaultKeep   = 5
	DefaultMaxAge = 30 * 24 * time.Hour
)

// DefaultPolicy keeps the 5 most recent checkpoints per workspace, all of
// failed runs and tagged ones, and deletes those older than 30 days.
func DefaultPolicy() Policy {
	return Policy{Keep: DefaultKeep, MaxAge: DefaultMaxAge, Aged: AgedDelete}
}

// Validate checks p's fields.
func (p Policy) Validate() error {
	if p.Keep < 0 {
		return fmt.Errorf("keep %d must not be negative (0 keeps every checkpoint)", p.Keep)
	}
	if p.MaxAge < 0 {
		return fmt.Errorf("max age %s must not be negative (0 keeps checkpoints of any age)", p.MaxAge)
	}
	if _, err := ParseAgedAction(string(p.Aged)); err != nil {
		return err
	}
	return nil
}

func (p Policy) keepsAll() bool { return p.Keep <= 0 && p.MaxAge <= 0 }

func (p Policy) String() string {
	keep := "every checkpoint"
	if p.Keep > 0 {
		keep = fmt.Sprintf("the %d most recent checkpoints per workspace", p.Keep)
	}
	age := "no age limit"
	if p.MaxAge > 0 {
		a := p.Aged
		if a == "" {
			a = AgedDelete
		}
		age = fmt.Sprintf("%s those older than %s", a, FormatAge(p.MaxAge))
	}
	return fmt.Sprintf("keep %s, all of failed runs and tagged ones; %s", keep, age)
}

// ParseAgedAction parses "delete" or "compress" ("" is delete).
func ParseAgedAction(s string) (AgedAction, error) {
	switch AgedAction(s) {
	case "", AgedDelete:
		return AgedDelete, nil
	case AgedCompress:
		return AgedCompress, nil
	}
	return "", fmt.Errorf("unknown action %q for aged checkpoints: use delete or compress", s)
}

// ParseAge parses an age: a Go duration (36h, 90m), a number of days
// (30d) or weeks (2w), or 0 for no limit.
func ParseAge(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" || s == "" {
		return 0, nil
	}
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			f, err := strconv.ParseFloat(n, 64)
			if err != nil || f < 0 || f > 1e5 {
				break
			}
			return time.Duration(f * float64(unit)), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("age %q: use days like 30d, weeks like 2w, a duration like 36h, or 0 for no limit", s)
	}
	return d, nil
}

// FormatAge prints d in days when it is a whole number of them.
func FormatAge(d time.Duration) string {
	day := 24 * time.Hour
	if d > 0 && d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	return d.String()
}

// Decision is what retention does to one checkpoint.
type Decision struct {
	Checkpoint
	Reason string // e.g. "beyond the 5 most recent of /work/ws"
}

// Report is what Plan would do or Prune did.
type Report struct {
	Policy    Policy
	DryRun    bool
	Deleted   []Decision
	Compacted []Decision
	Kept      int
	// Freed is the bytes of archives deleted, and saved by compaction
	// (estimated as 0 in a dry run).
	Freed int64
	// Skipped names runs left alone because their manifest is damaged.
	Skipped []error
}

// Plan reports what Prune(p, now) would do, changing nothing.
func (s *Store) Plan(p Policy, now time.Time) (*Report, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	unlock, err := s.lock(false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return s.prune(p, now, true)
}

// Prune applies p at the real time now: deletes or compacts checkpoints and
// removes what crashed writers left behind. A run whose manifest is damaged
// is skipped (Report.Skipped). Each run's manifest is rewritten before its
// archives are removed, so a crash leaves only unreferenced files.
func (s *Store) Prune(p Policy, now time.Time) (*Report, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	unlock, err := s.lock(true)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return s.prune(p, now, false)
}

type verdict int

const (
	keep verdict = iota
	drop
	compact
)

// prune runs with the lock held (shared for a dry run).
func (s *Store) prune(p Policy, now time.Time, dry bool) (*Report, error) {
	rep := &Report{Policy: p, DryRun: dry}
	all, err := s.loadAll()
	if err != nil {
		return nil, err
	}
	byWS := map[string][]Checkpoint{}
	manifests := map[string]*Manifest{}
	for _, l := range all {
		if l.err != nil {
			rep.Skipped = append(rep.Skipped, l.err)
			continue
		}
		manifests[l.id] = l.m
		for _, e := range l.m.Checkpoints {
			c := s.view(&l.m.Run, e)
			byWS[c.Run.Workspace] = append(byWS[c.Run.Workspace], c)
		}
	}
	decide := map[string]map[int]verdict{} // run -> seq -> verdict
	for ws, cs := range byWS {
		sortNewestFirst(cs)
		for i, c := range cs {
			v, why := p.decide(c, i, ws, now)
			switch v {
			case drop:
				rep.Deleted = append(rep.Deleted, Decision{c, why})
			case compact:
				rep.Compacted = append(rep.Compacted, Decision{c, why})
			default:
				rep.Kept++
				continue
			}
			if decide[c.Run.ID] == nil {
				decide[c.Run.ID] = map[int]verdict{}
			}
			decide[c.Run.ID][c.Seq] = v
		}
	}
	sortDecisions(rep.Deleted)
	sortDecisions(rep.Compacted)
	if dry {
		for _, d := range rep.Deleted {
			rep.Freed += d.ArchiveSize
		}
		return rep, nil
	}
	var errs []error
	for _, id := range sortedKeys(manifests) {
		freed, err := s.applyRun(manifests[id], decide[id])
		rep.Freed += freed
		if err != nil {
			errs = append(errs, err)
		}
	}
	return rep, errors.Join(errs...)
}

// decide applies p to c, the i-th most recent checkpoint of workspace ws.
func (p Policy) decide(c Checkpoint, i int, ws string, now time.Time) (verdict, string) {
	if c.Tag != "" {
		return keep, ""
	}
	if p.Keep > 0 && i >= p.Keep && !c.Run.Failed {
		return drop, fmt.Sprintf("beyond the %d most recent of %s", p.Keep, ws)
	}
	if p.MaxAge > 0 && now.Sub(c.Stored) > p.MaxAge {
		why := "older than " + FormatAge(p.MaxAge)
		if p.Aged == AgedCompress {
			if c.Compacted {
				return keep, ""
			}
			return compact, why
		}
		return drop, why
	}
	return keep, ""
}

func sortDecisions(ds []Decision) {
	sort.Slice(ds, func(i, j int) bool {
		if ds[i].Run.ID != ds[j].Run.ID {
			return ds[i].Run.ID < ds[j].Run.ID
		}
		return ds[i].Seq < ds[j].Seq
	})
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// applyRun carries out the verdicts on one run and removes leftovers of
// crashed writers in its directory. It returns the bytes freed.
func (s *Store) applyRun(m *Manifest, verdicts map[int]verdict) (int64, error) {
	dir := s.runDir(m.Run.ID)
	var added int64
	var errs []error
	next := make([]Entry, 0, len(m.Checkpoints))
	changed := false
	for _, e := range m.Checkpoints {
		switch verdicts[e.Seq] {
		case drop:
			changed = true
			continue
		case compact:
			ne, err := compactArchive(dir, m.Run.ID, e)
			if err != nil {
				errs = append(errs, err)
				break
			}
			added += ne.ArchiveSize
			e, changed = ne, true
		}
		next = append(next, e)
	}
	if changed {
		old := m.Checkpoints
		m.Checkpoints = next
		if err := writeManifest(dir, m); err != nil {
			// The manifest still names the originals: drop the new copies.
			m.Checkpoints = old
			removeUnreferenced(dir, m)
			errs = append(errs, writeErr("checkpoint store: rewriting the manifest of run "+m.Run.ID, err))
			return 0, errors.Join(errs...)
		}
	}
	// What the manifest does not name is garbage now: deleted and
	// superseded archives, and temporary files of crashed writers (the
	// exclusive lock means no writer is running).
	freed := removeUnreferenced(dir, m) - added
	if len(m.Checkpoints) == 0 {
		os.Remove(filepath.Join(dir, ManifestFile))
		os.Remove(dir) // only when nothing else is there
	}
	return freed, errors.Join(errs...)
}

// removeUnreferenced deletes the archives and temporary files in dir that
// m does not name, returning their bytes. Other files are left alone.
func removeUnreferenced(dir string, m *Manifest) int64 {
	named := map[string]bool{}
	for _, e := range m.Checkpoints {
		named[e.Archive] = true
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, de := range ents {
		name := de.Name()
		garbage := strings.HasPrefix(name, ".") && strings.Contains(name, partialInfix) ||
			validArchiveName(name) && !named[name]
		if !garbage || !de.Type().IsRegular() {
			continue
		}
		fi, err := de.Info()
		if err == nil && os.Remove(filepath.Join(dir, name)) == nil {
			n += fi.Size()
		}
	}
	return n
}

// compactArchive recompresses e's archive at zstd's best level under a new
// name. The original is left for the caller to remove once the manifest
// names the copy.
func compactArchive(dir, runID string, e Entry) (Entry, error) {
	c := Checkpoint{ID: runID + "/" + strconv.Itoa(e.Seq), Entry: e, ArchivePath: filepath.Join(dir, e.Archive)}
	if err := checkArchiveHash(&c); err != nil {
		return e, fmt.Errorf("not compacted: %w", err)
	}
	f, err := os.Open(c.ArchivePath)
	if err != nil {
		return e, err
	}
	defer f.Close()
	name := strings.TrimSuffix(e.Archive, archiveSuffix) + ".compact" + archiveSuffix
	sum, size, err := createArchive(dir, name, recompress(bufio.NewReaderSize(f, 1<<20), zstd.SpeedBestCompression))
	if err != nil {
		return e, writeErr("checkpoint "+c.ID+": compacting", err)
	}
	e.Archive, e.ArchiveSHA256, e.ArchiveSize, e.Compacted = name, sum, size, true
	return e, nil
}
