package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Filter selects checkpoints for List; zero fields match everything.
type Filter struct {
	Run       string // a run id or a prefix of one
	Workspace string // the run's workspace (List makes it absolute)
	Tag       string
}

func (f Filter) match(c *Checkpoint) bool {
	if f.Run != "" && !strings.HasPrefix(c.Run.ID, f.Run) {
		return false
	}
	if f.Workspace != "" && f.Workspace != c.Run.Workspace {
		return false
	}
	return f.Tag == "" || f.Tag == c.Tag
}

// List returns the checkpoints f selects, newest first (by the time they
// were stored, then run and number). A missing store lists nothing. Runs
// whose manifest cannot be read are left out and named in the error, which
// comes with the rest of the list.
func (s *Store) List(f Filter) ([]Checkpoint, error) {
	if f.Workspace != "" {
		ws, err := filepath.Abs(f.Workspace)
		if err != nil {
			return nil, err
		}
		f.Workspace = ws
	}
	unlock, err := s.lock(false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	all, err := s.loadAll()
	if err != nil {
		return nil, err
	}
	var out []Checkpoint
	var bad []error
	for _, l := range all {
		if l.err != nil {
			if f.Run == "" || strings.HasPrefix(l.id, f.Run) {
				bad = append(bad, l.err)
			}
			continue
		}
		for _, e := range l.m.Checkpoints {
			c := s.view(&l.m.Run, e)
			if f.match(&c) {
				out = append(out, c)
			}
		}
	}
	sortNewestFirst(out)
	return out, errors.Join(bad...)
}

func sortNewestFirst(cs []Checkpoint) {
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := &cs[i], &cs[j]
		if !a.Stored.Equal(b.Stored) {
			return a.Stored.After(b.Stored)
		}
		if a.Run.ID != b.Run.ID {
			return a.Run.ID > b.Run.ID
		}
		return a.Seq > b.Seq
	})
}

// Get returns the checkpoint id names: "<run>/<seq>" where run is a run id
// or a unique prefix of one and seq a number or "latest"; a bare run (its
// latest checkpoint); or "latest" (the newest in the store).
func (s *Store) Get(id string) (Checkpoint, error) {
	unlock, err := s.lock(false)
	if err != nil {
		return Checkpoint{}, err
	}
	defer unlock()
	return s.get(id)
}

func (s *Store) get(id string) (Checkpoint, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		return Checkpoint{}, fmt.Errorf("no checkpoint id given: use RUN/SEQ as `dal-exec checkpoint list` shows, or latest")
	}
	if id == "latest" {
		all, err := s.loadAll()
		if err != nil {
			return Checkpoint{}, err
		}
		var cs []Checkpoint
		var bad []error
		for _, l := range all {
			if l.err != nil {
				bad = append(bad, l.err)
				continue
			}
			for _, e := range l.m.Checkpoints {
				cs = append(cs, s.view(&l.m.Run, e))
			}
		}
		if len(cs) == 0 {
			if len(bad) > 0 {
				return Checkpoint{}, errors.Join(bad...)
			}
			return Checkpoint{}, fmt.Errorf("%w: the store %s has no checkpoints", ErrNotFound, s.Dir)
		}
		sortNewestFirst(cs)
		return cs[0], nil
	}
	runPart, seqPart, hasSeq := strings.Cut(id, "/")
	if runPart == "" {
		return Checkpoint{}, fmt.Errorf("checkpoint id %q names no run; ids look like RUN/3", id)
	}
	seq := 0 // 0 = latest
	if hasSeq && seqPart != "latest" {
		n, err := strconv.Atoi(seqPart)
		if err != nil || n <= 0 {
			return Checkpoint{}, fmt.Errorf("checkpoint id %q: %q is not a checkpoint number; ids look like RUN/3", id, seqPart)
		}
		seq = n
	}
	runID, err := s.resolveRun(runPart, id)
	if err != nil {
		return Checkpoint{}, err
	}
	m, err := readManifest(s.runDir(runID), runID)
	if errors.Is(err, fs.ErrNotExist) {
		if hasArchives(s.runDir(runID)) {
			return Checkpoint{}, &ManifestError{Run: runID, Reason: "it is missing"}
		}
		return Checkpoint{}, fmt.Errorf("%w: run %s has no checkpoints", ErrNotFound, runID)
	}
	if err != nil {
		return Checkpoint{}, err
	}
	if seq == 0 {
		if len(m.Checkpoints) == 0 {
			return Checkpoint{}, fmt.Errorf("%w: run %s has no checkpoints left", ErrNotFound, runID)
		}
		e := m.Checkpoints[0]
		for _, x := range m.Checkpoints {
			if x.Seq > e.Seq {
				e = x
			}
		}
		return s.view(&m.Run, e), nil
	}
	e := m.entry(seq)
	if e == nil {
		var have []string
		for _, x := range m.Checkpoints {
			have = append(have, strconv.Itoa(x.Seq))
		}
		hint := "it has none left"
		if len(have) > 0 {
			hint = "it has " + strings.Join(have, ", ")
		}
		return Checkpoint{}, fmt.Errorf("%w: run %s has no checkpoint %d (%s; retention may have removed it)", ErrNotFound, runID, seq, hint)
	}
	return s.view(&m.Run, *e), nil
}

// resolveRun finds the one run whose id is prefix or starts with it.
func (s *Store) resolveRun(prefix, id string) (string, error) {
	ids, err := s.runIDs()
	if err != nil {
		return "", err
	}
	var match []string
	for _, r := range ids {
		if r == prefix {
			return r, nil
		}
		if strings.HasPrefix(r, prefix) {
			match = append(match, r)
		}
	}
	switch len(match) {
	case 0:
		return "", fmt.Errorf("%w: no run %q in %s; `dal-exec checkpoint list` shows the ids", ErrNotFound, prefix, s.Dir)
	case 1:
		return match[0], nil
	}
	if len(match) > 5 {
		match = append(match[:5], "...")
	}
	return "", fmt.Errorf("%w: %q matches runs %s; give more of the run id", ErrAmbiguous, id, strings.Join(match, ", "))
}
