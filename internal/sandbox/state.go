package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"

	"github.com/dal-runtime/dal/internal/atomicfile"
	"github.com/dal-runtime/dal/internal/safefs"
)

// StateError says that a workspace is not at the state an operation needs,
// at the first path where it differs.
type StateError struct {
	Path  string // relative to the workspace
	State string // "pre-run" or "post-run"
	Why   string // what differs
}

func (e *StateError) Error() string {
	return fmt.Sprintf("the workspace differs from its %s state at %s: %s", e.State, e.Path, e.Why)
}

// AtPre checks that workspace is at the run's pre-run state on every path
// of changes, and names the first that is not.
func AtPre(workspace string, changes []Change) error {
	ws, err := safefs.Open(workspace)
	if err != nil {
		return fmt.Errorf("check the workspace: %w", err)
	}
	defer ws.Close()
	return atPre(ws, changes)
}

// AtPost checks that workspace is at the run's post-run state on every path
// of changes (and that directories the run created hold nothing else), and
// names the first that is not.
func AtPost(workspace string, changes []Change) error {
	ws, err := safefs.Open(workspace)
	if err != nil {
		return fmt.Errorf("check the workspace: %w", err)
	}
	defer ws.Close()
	return atPost(ws, changes)
}

func atPre(ws *safefs.Dir, changes []Change) error {
	return atState(ws, changes, "pre-run", Change.Before, nil)
}

// atPost compares with the state Apply leaves (applied): the same
// as after the run but for setuid and setgid, which Apply never sets.
func atPost(ws *safefs.Dir, changes []Change) error {
	return atState(ws, changes, "post-run", applied, func(c Change) bool {
		return c.Kind == KindDir && (c.Op == OpCreated || c.Op == OpModified && c.Pre != nil && c.Pre.Kind != KindDir)
	})
}

// atState compares each changed path with want(change); for the changes
// where whole is true it also lists the directory and requires each entry
// to be a change. Every parent of a changed path that is not itself a
// change must be a directory (not a symlink to one): the run did not
// change it, and Apply and Revert write below it.
func atState(ws *safefs.Dir, changes []Change, state string, want func(Change) *Entry, whole func(Change) bool) error {
	if err := Validate(changes); err != nil {
		return err
	}
	listed := make(map[string]bool, len(changes))
	for _, c := range changes {
		listed[c.Path] = true
	}
	dirOK := map[string]bool{}
	for _, c := range changes {
		for d := path.Dir(c.Path); d != "." && !listed[d] && !dirOK[d]; d = path.Dir(d) {
			fi, err := ws.Lstat(d)
			switch {
			case err != nil && (isAbsent(err) || errors.Is(err, safefs.ErrSymlink)):
				// The first parent that is not a directory says why.
				continue
			case err != nil:
				return fmt.Errorf("check %s: %w", ws.Join(d), err)
			case !fi.IsDir():
				return &StateError{Path: d, State: state, Why: fmt.Sprintf("it is a %s, expected the directory it was during the run", describeKind(kindOf(fi)))}
			}
			dirOK[d] = true
		}
	}
	for _, c := range changes {
		w := want(c)
		bad := func(why string) error { return &StateError{Path: c.Path, State: state, Why: why} }
		fi, err := ws.Lstat(c.Path)
		switch {
		case errors.Is(err, safefs.ErrSymlink):
			return bad("a parent of it is a symlink")
		case err != nil && !isAbsent(err):
			return fmt.Errorf("check %s: %w", ws.Join(c.Path), err)
		case err != nil:
			fi = nil
		}
		switch {
		case w == nil && fi == nil:
			continue
		case w == nil:
			return bad("it exists and should not")
		case fi == nil:
			return bad("it is missing")
		}
		got := Entry{Kind: kindOf(fi), Mode: fi.Mode() & modeBits}
		if got.Kind != w.Kind {
			return bad(fmt.Sprintf("it is a %s, expected a %s", describeKind(got.Kind), w.Kind))
		}
		if got.Mode != w.Mode {
			return bad(fmt.Sprintf("its mode is %04o, expected %04o", unixMode(got.Mode), unixMode(w.Mode)))
		}
		if w.Kind == KindFile && fi.Size() != w.Size {
			return bad("its content changed")
		}
		if w.Kind != KindDir {
			e, err := entryOf(ws, c.Path, fi)
			if err != nil {
				return fmt.Errorf("check %s: %w", ws.Join(c.Path), err)
			}
			if e.Hash != w.Hash {
				return bad("its content changed")
			}
		}
		if whole != nil && whole(c) {
			names, err := ws.ReadDirNames(c.Path)
			if err != nil {
				return fmt.Errorf("check %s: %w", ws.Join(c.Path), err)
			}
			for _, n := range names {
				if r := path.Join(c.Path, n); !listed[r] {
					return &StateError{Path: r, State: state, Why: "it was added since"}
				}
			}
		}
	}
	return nil
}

func describeKind(k string) string {
	if k == "" {
		return "special file"
	}
	return k
}

// WriteChanges writes changes as indented JSON to file (atomically).
func WriteChanges(file string, changes []Change) error {
	if changes == nil {
		changes = []Change{}
	}
	b, err := json.MarshalIndent(changes, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(file, append(b, '\n'), 0o644)
}

// ReadChanges reads a list written by [WriteChanges] (or [Export], as
// diffDir/changes.json), validates it and returns it sorted by path.
func ReadChanges(file string) ([]Change, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read the change list: %w", err)
	}
	return ParseChanges(b, file)
}

// ParseChanges is [ReadChanges] of the bytes b (read from name): a
// bundle's change list is read once, hash-checked, and parsed from
// memory, never read again by path.
func ParseChanges(b []byte, name string) ([]Change, error) {
	var cs []Change
	if err := json.Unmarshal(b, &cs); err != nil {
		return nil, fmt.Errorf("the change list %s is not valid JSON: %w", name, err)
	}
	if err := Validate(cs); err != nil {
		return nil, fmt.Errorf("the change list %s: %w", name, err)
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].Path < cs[j].Path })
	return cs, nil
}
