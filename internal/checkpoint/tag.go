package checkpoint

import (
	"fmt"
	"strings"
	"unicode"
)

// Tag tags checkpoint id: retention keeps it forever. The tag replaces any
// earlier one.
func (s *Store) Tag(id, tag string) (Checkpoint, error) {
	if err := checkTag(tag); err != nil {
		return Checkpoint{}, err
	}
	return s.setTag(id, tag)
}

// Untag removes checkpoint id's tag; retention treats it as any other.
func (s *Store) Untag(id string) (Checkpoint, error) { return s.setTag(id, "") }

func (s *Store) setTag(id, tag string) (Checkpoint, error) {
	unlock, err := s.lock(true)
	if err != nil {
		return Checkpoint{}, err
	}
	defer unlock()
	c, err := s.get(id)
	if err != nil {
		return Checkpoint{}, err
	}
	dir := s.runDir(c.Run.ID)
	m, err := readManifest(dir, c.Run.ID)
	if err != nil {
		return Checkpoint{}, err
	}
	e := m.entry(c.Seq)
	if e == nil { // cannot happen under the lock
		return Checkpoint{}, fmt.Errorf("%w: %s", ErrNotFound, c.ID)
	}
	if e.Tag == tag {
		return s.view(&m.Run, *e), nil
	}
	e.Tag = tag
	if err := writeManifest(dir, m); err != nil {
		return Checkpoint{}, writeErr("checkpoint store: writing the manifest of run "+c.Run.ID, err)
	}
	return s.view(&m.Run, *e), nil
}

func checkTag(tag string) error {
	if tag == "" {
		return fmt.Errorf("the tag is empty: use untag to remove one")
	}
	if len(tag) > 64 || strings.IndexFunc(tag, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) >= 0 {
		return fmt.Errorf("tag %q: use up to 64 printable characters without spaces, e.g. release-1", tag)
	}
	return nil
}

// CheckTag validates a tag as Tag does, for callers that check input early.
func CheckTag(tag string) error { return checkTag(tag) }
