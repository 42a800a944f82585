package bundle

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ReplayOutcome is one replay of a bundle, stored as replays/NNNN.json
// (the schema's $defs/replay_outcome). Outcomes are added after the
// bundle is signed and are not covered by the signature.
type ReplayOutcome struct {
	At          time.Time         `json:"at"`           // when the replay ended; AddReplay fills now when zero
	Fidelity    float64           `json:"fidelity"`     // matching / compared components, in [0, 1]
	MatchStatus string            `json:"match_status"` // AddReplay fills MatchStatusFor(Fidelity) when empty
	Components  map[string]bool   `json:"components,omitempty"`
	Divergences map[string]string `json:"divergences,omitempty"` // component -> first divergence
	DurationMS  int64             `json:"duration_ms,omitempty"`
	CreatedBy   string            `json:"created_by,omitempty"` // AddReplay fills this build when empty
	Seq         int               `json:"-"`                    // NNNN of its file, set by Open and AddReplay
}

var replayName = regexp.MustCompile(`^([0-9]{4,9})\.json$`)

// loadReplays reads replays/: files NNNN.json, each a replay outcome.
// Names starting with "." (an interrupted AddReplay) are ignored.
func (b *Bundle) loadReplays() error {
	dir := filepath.Join(b.Dir, ReplaysDir)
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil || !fi.IsDir() {
		return corrupt(b.Path, ReplaysDir, err, "is not a directory")
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return corrupt(b.Path, ReplaysDir, err, "cannot be read (%v)", err)
	}
	seen := map[int]bool{}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		rel := ReplaysDir + "/" + e.Name()
		m := replayName.FindStringSubmatch(e.Name())
		if m == nil {
			return &Error{Bundle: b.Path, File: rel, Kind: ErrCorrupt,
				msg: fmt.Sprintf("bundle %s: %s is not a replay outcome (replays/ holds only NNNN.json files): remove it", b.Path, rel)}
		}
		seq, _ := strconv.Atoi(m[1])
		data, err := b.readSmall(rel, maxReplayBytes)
		if err == nil {
			err = validateReplay(data)
		}
		var o ReplayOutcome
		if err == nil {
			err = json.Unmarshal(data, &o)
		}
		if err == nil && seen[seq] {
			err = errors.New("its number is used twice")
		}
		if err != nil {
			return &Error{Bundle: b.Path, File: rel, Kind: ErrCorrupt, Err: err,
				msg: fmt.Sprintf("bundle %s: %s is not a valid replay outcome (%v): remove it", b.Path, rel, err)}
		}
		seen[seq] = true
		o.Seq = seq
		b.Replays = append(b.Replays, o)
	}
	slices.SortFunc(b.Replays, func(x, y ReplayOutcome) int { return x.Seq - y.Seq })
	return nil
}

// AddReplay stores o as the next replays/NNNN.json, atomically (temporary
// file, fsync, rename), without touching manifest.json or manifest.sig:
// the signature stays valid. For an archive bundle it then rewrites the
// archive atomically (concurrent AddReplay calls on one archive: the last
// rewrite wins). o is appended to b.Replays.
func (b *Bundle) AddReplay(o ReplayOutcome) error {
	if o.At.IsZero() {
		o.At = time.Now().UTC()
	}
	if o.MatchStatus == "" {
		o.MatchStatus = MatchStatusFor(o.Fidelity)
	}
	if o.CreatedBy == "" {
		o.CreatedBy = defaultCreatedBy()
	}
	data, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return fmt.Errorf("bundle %s: encoding the replay outcome: %w", b.Path, err)
	}
	data = append(data, '\n')
	if err := validateReplay(data); err != nil {
		return fmt.Errorf("bundle %s: the replay outcome does not conform to the schema: %w", b.Path, err)
	}
	dir := filepath.Join(b.Dir, ReplaysDir)
	created := false
	if err := os.Mkdir(dir, 0o755); err == nil {
		created = true
	} else if !errors.Is(err, fs.ErrExist) {
		return writeErr(b.Path, ReplaysDir, err)
	} else if !isDir(dir) {
		return corrupt(b.Path, ReplaysDir, nil, "is not a directory")
	}
	tmp, err := os.CreateTemp(dir, ".replay-*")
	if err != nil {
		return writeErr(b.Path, ReplaysDir, err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err != nil {
		return writeErr(b.Path, ReplaysDir, err)
	}
	seq := 1
	for _, r := range b.Replays {
		seq = max(seq, r.Seq+1)
	}
	var final string
	for {
		final = filepath.Join(dir, fmt.Sprintf("%04d.json", seq))
		err = renameNoReplace(tmp.Name(), final)
		if !errors.Is(err, unix.EEXIST) {
			break
		}
		seq++ // another process added one meanwhile
	}
	if err != nil {
		return writeErr(b.Path, ReplaysDir, err)
	}
	if err := syncDir(dir); err != nil {
		return writeErr(b.Path, ReplaysDir, err)
	}
	if created {
		if err := syncDir(b.Dir); err != nil {
			return writeErr(b.Path, ReplaysDir, err)
		}
	}
	if b.packing != packDir {
		target, err := filepath.EvalSymlinks(b.Path)
		if err == nil {
			err = packTo(b.Dir, target, b.packing, true)
		}
		if err != nil {
			os.Remove(final)
			return err
		}
	}
	o.Seq = seq
	b.Replays = append(b.Replays, o)
	return nil
}

// ReplayStatus summarizes the replays the way the snapshot schema's
// replay_status does: the manifest's recorded status plus the outcomes
// in replays/, the last of which gives last_replay and match_status.
func (b *Bundle) ReplayStatus() ReplayStatus {
	s := ReplayStatus{MatchStatus: NotReplayed}
	if b.Manifest != nil && b.Manifest.ReplayStatus != nil {
		s = *b.Manifest.ReplayStatus
	}
	if n := len(b.Replays); n > 0 {
		last := b.Replays[n-1]
		at := last.At
		s.ReplayCount += n
		s.LastReplay = &at
		s.MatchStatus = last.MatchStatus
	}
	s.Replayed = s.ReplayCount > 0
	return s
}

// renameNoReplace renames old to new, failing with EEXIST when new exists.
func renameNoReplace(old, new string) error {
	err := unix.Renameat2(unix.AT_FDCWD, old, unix.AT_FDCWD, new, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) { // no RENAME_NOREPLACE here
		if _, lerr := os.Lstat(new); lerr == nil {
			return unix.EEXIST
		}
		return os.Rename(old, new)
	}
	if errors.Is(err, unix.ENOTEMPTY) {
		return unix.EEXIST
	}
	return err
}
