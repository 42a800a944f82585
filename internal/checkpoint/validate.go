package checkpoint

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Validate checks checkpoint id: the manifest's checksum, the archive's
// SHA-256 and size, and, after decompression, every artifact's and the
// state's SHA-256. A mismatch is a *DamagedError naming what differs
// (errors.Is ErrDamaged); a damaged manifest is a *ManifestError.
func (s *Store) Validate(id string) error {
	unlock, err := s.lock(false)
	if err != nil {
		return err
	}
	defer unlock()
	c, err := s.get(id)
	if err != nil {
		return err
	}
	return validate(&c)
}

func validate(c *Checkpoint) error {
	if err := checkArchiveHash(c); err != nil {
		return err
	}
	f, err := os.Open(c.ArchivePath)
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", c.ID, err)
	}
	defer f.Close()
	_, err = extract(bufio.NewReaderSize(f, 1<<20), c.ID, &c.Entry, nil, nil)
	return err
}

// checkArchiveHash compares the archive file with the manifest.
func checkArchiveHash(c *Checkpoint) error {
	sum, size, err := hashFile(c.ArchivePath)
	if errors.Is(err, fs.ErrNotExist) {
		return &DamagedError{ID: c.ID, Reason: fmt.Sprintf("its archive %s is missing", c.Archive)}
	}
	if err != nil {
		return fmt.Errorf("checkpoint %s: reading its archive: %w", c.ID, err)
	}
	if sum != c.ArchiveSHA256 {
		return &DamagedError{ID: c.ID, Reason: fmt.Sprintf("archive %s has sha256 %s (%d bytes), the manifest says %s (%d bytes)",
			c.Archive, short(sum), size, short(c.ArchiveSHA256), c.ArchiveSize)}
	}
	return nil
}

// CheckReport is the result of checking several checkpoints.
type CheckReport struct {
	Checked int     // checkpoints checked
	Damaged []error // one per damaged checkpoint or unreadable manifest
}

// Check validates the checkpoints ids name, or every checkpoint in the
// store when ids is empty. Unknown ids are errors in Damaged too, so one
// call reports everything.
func (s *Store) Check(ids ...string) (*CheckReport, error) {
	unlock, err := s.lock(false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rep := &CheckReport{}
	if len(ids) > 0 {
		for _, id := range ids {
			c, err := s.get(id)
			if err != nil {
				rep.Damaged = append(rep.Damaged, err)
				continue
			}
			rep.Checked++
			if err := validate(&c); err != nil {
				rep.Damaged = append(rep.Damaged, err)
			}
		}
		return rep, nil
	}
	all, err := s.loadAll()
	if err != nil {
		return nil, err
	}
	for _, l := range all {
		if l.err != nil {
			rep.Damaged = append(rep.Damaged, l.err)
			continue
		}
		for _, e := range l.m.Checkpoints {
			c := s.view(&l.m.Run, e)
			rep.Checked++
			if err := validate(&c); err != nil {
				rep.Damaged = append(rep.Damaged, err)
			}
		}
	}
	return rep, nil
}

// State returns checkpoint id's state (compact JSON, "null" when none),
// checked against the manifest.
func (s *Store) State(id string) ([]byte, error) {
	unlock, err := s.lock(false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	c, err := s.get(id)
	if err != nil {
		return nil, err
	}
	if err := checkArchiveHash(&c); err != nil {
		return nil, err
	}
	f, err := os.Open(c.ArchivePath)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", c.ID, err)
	}
	defer f.Close()
	return extract(bufio.NewReaderSize(f, 1<<20), c.ID, &c.Entry, nil, nil)
}
