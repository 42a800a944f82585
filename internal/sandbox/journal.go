package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/dal-runtime/dal/internal/atomicfile"
	"github.com/dal-runtime/dal/internal/safefs"
)

// A journal makes Apply and Revert recoverable: it is written (and synced)
// before the workspace is touched and removed once it is done, so a
// journal that outlives its process means the workspace may be between
// states. It is a file beside the workspace, never in it (the agent wrote
// the workspace): <parent>/.<name>.dal-journal, or, when the parent is not
// writable, $XDG_STATE_HOME/dal/journals/<hash of the path>.json. The
// process applying holds an exclusive flock on it, so a live apply is
// never taken for a dead one.

// journal is the content of a journal file.
type journal struct {
	V         int      `json:"v"`
	Op        string   `json:"op"` // "apply" or "revert"
	Workspace string   `json:"workspace"`
	Mirror    string   `json:"mirror"`         // the files/ the operation copies from
	Undo      string   `json:"undo,omitempty"` // the files/ of the other direction, if known
	PID       int      `json:"pid"`
	Changes   []Change `json:"changes"`
}

// What Recover found and did.
const (
	RecoverNothing    = "nothing to recover"
	RecoverUntouched  = "the interrupted operation had not changed the workspace"
	RecoverWasDone    = "the interrupted operation had finished"
	RecoverCompleted  = "completed the interrupted operation"
	RecoverRolledBack = "rolled the interrupted operation back"
)

// Recovered is what [Recover] did.
type Recovered struct {
	Op      string // "apply" or "revert"; "" when there was no journal
	Outcome string // one of the Recover* constants
	Journal string // the journal file that was read (and removed)
	State   string // the workspace's state now: "pre-run" or "post-run" ("" with RecoverNothing)
}

// interruptAfter, when positive, stops replace after that many steps as a
// kill -9 would (tests only).
var interruptAfter int

var errInterrupted = errors.New("interrupted (test)")

// journalPaths are where a journal of workspace may be, the preferred
// first.
func journalPaths(workspace string) []string {
	abs, err := filepath.Abs(workspace)
	if err != nil {
		abs = filepath.Clean(workspace)
	}
	out := []string{filepath.Join(filepath.Dir(abs), "."+filepath.Base(abs)+".dal-journal")}
	state := os.Getenv("XDG_STATE_HOME")
	if !filepath.IsAbs(state) {
		if home, err := os.UserHomeDir(); err == nil {
			state = filepath.Join(home, ".local", "state")
		}
	}
	if state != "" {
		sum := sha256.Sum256([]byte(abs))
		out = append(out, filepath.Join(state, "dal", "journals", hex.EncodeToString(sum[:16])+".json"))
	}
	return out
}

// findJournal returns the journal of workspace, "" when there is none.
func findJournal(workspace string) string {
	for _, p := range journalPaths(workspace) {
		if _, err := os.Lstat(p); err == nil {
			return p
		}
	}
	return ""
}

// openJournal writes j as the journal of its workspace, synced, and
// returns it open and locked; close it with finish.
func openJournal(j *journal) (*os.File, error) {
	b, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	var firstErr error
	for i, p := range journalPaths(j.Workspace) {
		if i > 0 {
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				continue
			}
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			if errors.Is(err, fs.ErrExist) {
				return nil, fmt.Errorf("another dal-exec is applying to %s now (journal %s): wait for it, or run dal-exec recover once it has died", j.Workspace, p)
			}
			continue
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err == nil {
			_, err = f.Write(b)
		}
		if err == nil {
			err = f.Sync()
		}
		if err == nil {
			err = atomicfile.SyncDir(filepath.Dir(p))
		}
		if err != nil {
			f.Close()
			os.Remove(p)
			return nil, fmt.Errorf("write the journal %s: %w", p, err)
		}
		return f, nil
	}
	return nil, fmt.Errorf("write a journal for %s (beside it or in the state directory): %w", j.Workspace, firstErr)
}

// finish removes the journal f (the workspace is at a state) and closes
// it.
func finish(f *os.File) error {
	err := os.Remove(f.Name())
	if err == nil {
		err = atomicfile.SyncDir(filepath.Dir(f.Name()))
	}
	f.Close()
	return err
}

// otherMirror is the files/ of the bundle directory beside mirror's (a
// bundle holds fs-diff/ and fs-pre/ side by side), "" when it is missing.
func otherMirror(mirror string) string {
	dir := filepath.Dir(mirror) // .../fs-diff or .../fs-pre
	other := "fs-pre"
	if filepath.Base(dir) == "fs-pre" {
		other = "fs-diff"
	}
	p := filepath.Join(filepath.Dir(dir), other, "files")
	if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
		return ""
	}
	return p
}

// Recover finishes an Apply or Revert of workspace that was interrupted
// (killed, or a full disk) and says what it did: it completes it from the
// copies it was using, or, when those are gone, rolls it back from the
// other side's copies; a workspace already at either state is only noted.
// It refuses while the interrupted process still runs. Apply, Revert and
// Restore call it first when they find a journal. When neither the copies
// nor the pre-images are left, it returns an error naming the state, and
// the journal stays.
func Recover(workspace string) (*Recovered, error) {
	p := findJournal(workspace)
	if p == "" {
		return &Recovered{Outcome: RecoverNothing}, nil
	}
	f, err := os.OpenFile(p, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("read the journal %s: %w", p, err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil, fmt.Errorf("another dal-exec is applying to %s now (journal %s): wait for it", workspace, p)
	}
	var j journal
	if err := json.NewDecoder(f).Decode(&j); err != nil || (j.Op != "apply" && j.Op != "revert") {
		return nil, fmt.Errorf("the journal %s is not readable (%v): check the workspace %s by hand, then remove it", p, err, workspace)
	}
	if err := Validate(j.Changes); err != nil {
		return nil, fmt.Errorf("the journal %s: %w", p, err)
	}
	ws, err := safefs.Open(workspace)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	rec := &Recovered{Op: j.Op, Journal: p}
	target, origin := "post-run", "pre-run"
	toTarget, toOrigin := atPost, atPre
	if j.Op == "revert" {
		target, origin, toTarget, toOrigin = origin, target, toOrigin, toTarget
	}
	done := func(outcome, state string) (*Recovered, error) {
		rec.Outcome, rec.State = outcome, state
		if err := finish(f); err != nil {
			return rec, fmt.Errorf("remove the journal %s: %w", p, err)
		}
		return rec, nil
	}
	if toTarget(ws, j.Changes) == nil {
		return done(RecoverWasDone, target)
	}
	if toOrigin(ws, j.Changes) == nil {
		return done(RecoverUntouched, origin)
	}
	forward := j.Op == "apply"
	if err := converge(ws, j.Mirror, j.Changes, forward); err == nil && toTarget(ws, j.Changes) == nil {
		return done(RecoverCompleted, target)
	}
	undo := j.Undo
	if undo == "" {
		undo = otherMirror(j.Mirror)
	}
	if undo != "" {
		if err := converge(ws, undo, j.Changes, !forward); err == nil && toOrigin(ws, j.Changes) == nil {
			return done(RecoverRolledBack, origin)
		}
	}
	return nil, fmt.Errorf("the %s to %s was interrupted and the workspace is at neither its pre-run nor its post-run state; the copies to finish it (%s) or undo it (%s) are gone or do not fit: the journal %s lists the paths involved",
		j.Op, workspace, j.Mirror, orNone(undo), p)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// converge moves every path of changes to its post-run state (forward) or
// its pre-run state from the mirror, whatever mix of states it is in.
func converge(ws *safefs.Dir, mirror string, changes []Change, forward bool) error {
	if mirror == "" {
		return errors.New("no copies")
	}
	src, err := safefs.OpenOneMount(mirror)
	if err != nil {
		return err
	}
	defer src.Close()
	if forward {
		return replace(ws, src, changes, OpDeleted, applied)
	}
	return replace(ws, src, changes, OpCreated, Change.Before)
}
