package bundle

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
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
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ReplayOutcome is one replay of a bundle, stored as replays/NNNN.json
// (the schema's $defs/replay_outcome) with its signature beside it in
// replays/NNNN.json.sig. Outcomes are added after the bundle is signed
// and are not covered by the bundle's signature: each is signed by
// whoever replayed, and readers count only those signed by a key they
// trust, for this bundle.
type ReplayOutcome struct {
	At          time.Time         `json:"at"`           // when the replay ended; AddSignedReplay fills now when zero
	Fidelity    float64           `json:"fidelity"`     // matching / compared components, in [0, 1]
	MatchStatus string            `json:"match_status"` // AddSignedReplay fills MatchStatusFor(Fidelity) when empty
	Components  map[string]bool   `json:"components,omitempty"`
	Divergences map[string]string `json:"divergences,omitempty"` // component -> first divergence
	DurationMS  int64             `json:"duration_ms,omitempty"`
	CreatedBy   string            `json:"created_by,omitempty"` // AddSignedReplay fills this build when empty
	// Manifest is the digest ("sha256:<hex>") of the manifest.json that
	// was replayed, so an outcome cannot be moved to another bundle;
	// AddSignedReplay sets it.
	Manifest string `json:"manifest,omitempty"`
	// Signer is the replayer's ed25519 public key (standard base64),
	// whose signature of this file's bytes is NNNN.json.sig;
	// AddSignedReplay sets it.
	Signer string `json:"signer,omitempty"`
	// Match is the strategies the replay compared with (dal-exec replay
	// --match, e.g. "exact,stdout=semantic"), Threshold the semantic
	// threshold and Similarity the semantic score per component; Live
	// marks a live re-execution (dal-exec replay --live).
	Match      string             `json:"match,omitempty"`
	Threshold  float64            `json:"threshold,omitempty"`
	Similarity map[string]float64 `json:"similarity,omitempty"`
	Live       bool               `json:"live,omitempty"`

	Seq      int    `json:"-"` // NNNN of its file, set by Open and AddSignedReplay
	SignedBy Signer `json:"-"` // who signed it, set by Open and AddSignedReplay
}

// UnverifiedReplay is a file of replays/ that does not count as a
// replay: Reason says why, in words for a user ("is not signed", "is
// signed by key SHA256:… which you do not trust", "was signed for
// another bundle", …).
type UnverifiedReplay struct {
	File    string         // "replays/NNNN.json"
	Reason  string         // why it does not count
	Outcome *ReplayOutcome // as the file says, or nil when it cannot be read
}

// SigSuffix is appended to an outcome's file name to name its signature.
const SigSuffix = ".sig"

var replayName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9]{4,9})\.json$`) })

// Bounds of replays/ as read by Open.
const maxWarnings = 20

// warn adds a warning, keeping at most maxWarnings and a count of the rest.
func (b *Bundle) warn(format string, args ...any) {
	switch n := len(b.Warnings); {
	case n < maxWarnings:
		b.Warnings = append(b.Warnings, fmt.Sprintf(format, args...))
	case n == maxWarnings:
		b.Warnings = append(b.Warnings, "more warnings about replays/ were left out")
	}
}

// loadReplays reads replays/: NNNN.json outcomes and their NNNN.json.sig
// signatures. Names starting with "." (an interrupted AddSignedReplay)
// are ignored; anything else is a warning. Nothing here fails Open:
// replays/ is not covered by the bundle's signature, so anyone could
// have put anything there.
func (b *Bundle) loadReplays() {
	fi, err := b.root.Lstat(ReplaysDir)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil || !fi.IsDir() {
		b.warn("%s is not a directory: replay outcomes there were ignored", ReplaysDir)
		return
	}
	ents, err := b.root.ReadDirNames(ReplaysDir)
	if err != nil {
		b.warn("%s cannot be read (%v): replay outcomes there were ignored", ReplaysDir, err)
		return
	}
	if len(ents) > maxReplayFiles {
		b.warn("%s holds more than %d files: only the first %d were read", ReplaysDir, maxReplayFiles, maxReplayFiles)
		ents = ents[:maxReplayFiles]
	}
	names := map[string]bool{}
	for _, name := range ents {
		names[name] = true
	}
	seen := map[int]bool{}
	for _, name := range ents {
		rel := ReplaysDir + "/" + name
		switch {
		case strings.HasPrefix(name, "."):
			continue
		case strings.HasSuffix(name, SigSuffix) && replayName().MatchString(strings.TrimSuffix(name, SigSuffix)):
			if !names[strings.TrimSuffix(name, SigSuffix)] {
				b.warn("%s is a signature without its outcome: ignored", rel)
			}
			continue
		case !replayName().MatchString(name):
			b.warn("%s is not a replay outcome (%s holds only NNNN.json and NNNN.json.sig): ignored", rel, ReplaysDir)
			continue
		}
		seq, _ := strconv.Atoi(replayName().FindStringSubmatch(name)[1])
		o, reason := b.readReplay(rel)
		if reason == "" && seen[seq] {
			reason = "has a number another outcome has"
		}
		if reason != "" {
			b.Unverified = append(b.Unverified, UnverifiedReplay{File: rel, Reason: reason, Outcome: o})
			continue
		}
		seen[seq] = true
		o.Seq = seq
		b.Replays = append(b.Replays, *o)
	}
	slices.SortFunc(b.Replays, func(x, y ReplayOutcome) int { return x.Seq - y.Seq })
}

// readReplay reads and checks one outcome. It returns the outcome (nil
// when it cannot be read) and, when it does not count, why.
func (b *Bundle) readReplay(rel string) (*ReplayOutcome, string) {
	data, err := b.readSmall(rel, maxReplayBytes)
	if err == nil {
		err = validateReplay(data)
	}
	var o ReplayOutcome
	if err == nil {
		err = json.Unmarshal(data, &o)
	}
	if err != nil {
		return nil, fmt.Sprintf("is not a valid replay outcome (%v)", err)
	}
	if o.Signer == "" {
		return &o, "is not signed"
	}
	pub, err := base64.StdEncoding.Strict().DecodeString(o.Signer)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return &o, "names a malformed signer key"
	}
	sigText, err := b.readSmall(rel+SigSuffix, maxSigBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return &o, "has no signature (" + rel + SigSuffix + ")"
	}
	var sig []byte
	if err == nil {
		sig, err = decodeSignature(sigText)
	}
	if err != nil {
		return &o, fmt.Sprintf("has a bad signature file (%s %v)", rel+SigSuffix, err)
	}
	if !ed25519.Verify(pub, data, sig) {
		return &o, "does not match its signature (it was changed after signing)"
	}
	o.SignedBy = b.opts.signer(pub)
	if o.Manifest != b.manifestDigest {
		return &o, "was signed for another bundle"
	}
	if !o.SignedBy.Trusted {
		return &o, fmt.Sprintf("is signed by key %s, which you do not trust", o.SignedBy.Fingerprint)
	}
	return &o, ""
}

// AddSignedReplay stores o, signed with key (the replayer's), as the
// next replays/NNNN.json and its signature NNNN.json.sig, each written
// atomically (temporary file, fsync, rename without replacing), without
// touching manifest.json or manifest.sig: the bundle's signature stays
// valid. It fills o's Manifest (this bundle's manifest digest) and
// Signer. The signature is published first, claiming the number, so
// concurrent AddSignedReplay calls never share one; a crash between the
// two renames leaves a signature without an outcome, which Open warns
// about and ignores. For an archive bundle it then rewrites the archive
// atomically (concurrent calls on one archive: the last rewrite wins).
// o is appended to b.Replays when Open would count it (key trusted),
// else to b.Unverified.
func (b *Bundle) AddSignedReplay(o ReplayOutcome, key ed25519.PrivateKey) error {
	if len(key) != ed25519.PrivateKeySize {
		return fmt.Errorf("bundle %s: the replay outcome's signing key is not an ed25519 private key", b.Path)
	}
	if o.At.IsZero() {
		o.At = time.Now().UTC()
	}
	if o.MatchStatus == "" {
		o.MatchStatus = MatchStatusFor(o.Fidelity)
	}
	if o.CreatedBy == "" {
		o.CreatedBy = defaultCreatedBy()
	}
	pub := key.Public().(ed25519.PublicKey)
	o.Manifest, o.Signer = b.manifestDigest, EncodePublicKey(pub)
	data, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return fmt.Errorf("bundle %s: encoding the replay outcome: %w", b.Path, err)
	}
	data = append(data, '\n')
	if err := validateReplay(data); err != nil {
		return fmt.Errorf("bundle %s: the replay outcome does not conform to the schema: %w", b.Path, err)
	}
	sig := encodeSignature(ed25519.Sign(key, data))
	// Everything below goes through b.root: replays/ may be anything
	// in a bundle someone handed over, a symbolic link included. The
	// outcome of a bundle read from a private copy goes to the original.
	if b.home != nil {
		copied := b.root
		b.root = b.home
		defer func() { b.root = copied }()
	}
	created := false
	if err := b.root.Mkdir(ReplaysDir, 0o755); err == nil {
		created = true
	} else if !errors.Is(err, fs.ErrExist) {
		return writeErr(b.Path, ReplaysDir, err)
	} else if !b.isDir(ReplaysDir) {
		return fmt.Errorf("bundle %s: %s is not a directory: remove it to store replay outcomes", b.Path, ReplaysDir)
	}
	tmpSig, err := b.writeTemp(sig)
	if err != nil {
		return writeErr(b.Path, ReplaysDir, err)
	}
	defer b.root.Remove(tmpSig) // fails harmlessly once renamed
	tmpData, err := b.writeTemp(data)
	if err != nil {
		return writeErr(b.Path, ReplaysDir, err)
	}
	defer b.root.Remove(tmpData)
	seq := b.nextReplaySeq()
	var final string
	for {
		final = fmt.Sprintf("%s/%04d.json", ReplaysDir, seq)
		err = b.root.RenameNoReplace(tmpSig, final+SigSuffix)
		if err == nil {
			if err = b.root.RenameNoReplace(tmpData, final); errors.Is(err, fs.ErrExist) {
				// a stray outcome holds the number: give it back
				if rerr := b.root.Rename(final+SigSuffix, tmpSig); rerr != nil {
					return writeErr(b.Path, ReplaysDir, rerr)
				}
			}
		}
		if !errors.Is(err, fs.ErrExist) {
			break
		}
		seq++ // another process added one meanwhile
	}
	if err != nil {
		b.root.Remove(final + SigSuffix)
		return writeErr(b.Path, ReplaysDir, err)
	}
	if err := b.syncDir(ReplaysDir); err != nil {
		return writeErr(b.Path, ReplaysDir, err)
	}
	if created {
		if err := b.syncDir(""); err != nil {
			return writeErr(b.Path, ReplaysDir, err)
		}
	}
	if b.packing != packDir {
		target, err := filepath.EvalSymlinks(b.Path)
		if err == nil {
			err = packTo(b.Dir, target, b.packing, true)
		}
		if err != nil {
			b.root.Remove(final)
			b.root.Remove(final + SigSuffix)
			return err
		}
	}
	o.Seq, o.SignedBy = seq, b.opts.signer(pub)
	if o.SignedBy.Trusted {
		b.Replays = append(b.Replays, o)
	} else {
		b.Unverified = append(b.Unverified, UnverifiedReplay{File: final,
			Reason: fmt.Sprintf("is signed by key %s, which you do not trust", o.SignedBy.Fingerprint), Outcome: &o})
	}
	return nil
}

// nextReplaySeq is one more than the highest number used in replays/ by
// an outcome or a signature, or 1.
func (b *Bundle) nextReplaySeq() int {
	seq := 1
	names, _ := b.root.ReadDirNames(ReplaysDir)
	for _, name := range names {
		if m := replayName().FindStringSubmatch(strings.TrimSuffix(name, SigSuffix)); m != nil {
			n, _ := strconv.Atoi(m[1])
			seq = max(seq, n+1)
		}
	}
	return seq
}

// writeTemp writes data to a new file replays/.replay-<random>, fsynced,
// mode 0644, and returns its path in the bundle.
func (b *Bundle) writeTemp(data []byte) (string, error) {
	var r [8]byte
	rand.Read(r[:])
	rel := ReplaysDir + "/.replay-" + hex.EncodeToString(r[:])
	f, err := b.root.Create(rel, 0o644)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644) // whatever the umask
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.root.Remove(rel)
		return "", err
	}
	return rel, nil
}

// syncDir fsyncs the bundle's directory rel.
func (b *Bundle) syncDir(rel string) error {
	f, err := b.root.Open(rel)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
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
