package bundle

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pubOf is key's public half.
func pubOf(key ed25519.PrivateKey) ed25519.PublicKey { return key.Public().(ed25519.PublicKey) }

// trustOf is a trust set of the given keys.
func trustOf(keys ...ed25519.PrivateKey) *Trust {
	t := &Trust{}
	for i, k := range keys {
		t.Add(pubOf(k), "test key "+string(rune('a'+i)))
	}
	return t
}

func TestAddSignedReplay(t *testing.T) {
	t.Parallel()
	replayer := testKey(3)
	for _, name := range []string{"run", "run.tgz", "run.tar.zst"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), name)
			makeBundle(t, out)
			trusted := OpenOptions{Trust: trustOf(testKey(1), replayer)}
			b, err := Open(out, trusted)
			if err != nil {
				t.Fatal(err)
			}
			if s := b.ReplayStatus(); s.Replayed || s.ReplayCount != 0 || s.MatchStatus != NotReplayed || s.LastReplay != nil {
				t.Fatalf("fresh bundle: %+v", s)
			}
			manifest, sig := must(os.ReadFile(b.File(ManifestFile))), must(os.ReadFile(b.File(SignatureFile)))
			t1 := time.Date(2026, 2, 1, 10, 0, 0, 0, time.UTC)
			t2 := t1.Add(time.Hour)
			if err := b.AddSignedReplay(ReplayOutcome{At: t1, Fidelity: 1, Components: map[string]bool{"stdout": true}}, replayer); err != nil {
				t.Fatal(err)
			}
			if err := b.AddSignedReplay(ReplayOutcome{At: t2, Fidelity: 0.5, Components: map[string]bool{"stdout": true, "fs-diff": false},
				Divergences: map[string]string{"fs-diff": "out.txt differs"}}, replayer); err != nil {
				t.Fatal(err)
			}
			if err := b.AddSignedReplay(ReplayOutcome{At: t2, Fidelity: 3}, replayer); err == nil {
				t.Fatal("a fidelity of 3 was stored")
			}
			if err := b.AddSignedReplay(ReplayOutcome{At: t2, Fidelity: 1}, nil); err == nil {
				t.Fatal("an outcome was stored without a key")
			}
			if len(b.Replays) != 2 {
				t.Fatalf("after adding: %+v", b.Replays)
			}
			b.Close()

			b, err = Open(out, trusted)
			if err != nil {
				t.Fatalf("after AddSignedReplay the bundle no longer verifies: %v", err)
			}
			defer b.Close()
			if !bytes.Equal(must(os.ReadFile(b.File(ManifestFile))), manifest) || !bytes.Equal(must(os.ReadFile(b.File(SignatureFile))), sig) {
				t.Fatal("AddSignedReplay changed manifest.json or manifest.sig")
			}
			s := b.ReplayStatus()
			if !s.Replayed || s.ReplayCount != 2 || s.MatchStatus != PartialMatch || s.LastReplay == nil || !s.LastReplay.Equal(t2) {
				t.Fatalf("status %+v", s)
			}
			if len(b.Replays) != 2 || b.Replays[0].Seq != 1 || b.Replays[0].MatchStatus != ExactMatch ||
				b.Replays[1].Divergences["fs-diff"] != "out.txt differs" || b.Replays[1].CreatedBy == "" ||
				!b.Replays[0].SignedBy.Trusted || b.Replays[0].SignedBy.Fingerprint != Fingerprint(pubOf(replayer)) {
				t.Fatalf("replays %+v", b.Replays)
			}
			if len(b.Unverified) != 0 || len(b.Warnings) != 0 {
				t.Fatalf("unverified %+v, warnings %q", b.Unverified, b.Warnings)
			}
			if name == "run" {
				for _, f := range []string{"replays/0001.json", "replays/0001.json.sig", "replays/0002.json", "replays/0002.json.sig"} {
					if !exists(filepath.Join(out, f)) {
						t.Fatalf("%s missing", f)
					}
				}
			}
			if left, _ := Leftovers(out); len(left) != 0 {
				t.Fatalf("left %v", left)
			}
			// A reader who does not trust the replayer sees the outcomes
			// but does not count them.
			b2, err := Open(out, OpenOptions{Trust: trustOf(testKey(1))})
			if err != nil {
				t.Fatal(err)
			}
			defer b2.Close()
			if s := b2.ReplayStatus(); s.ReplayCount != 0 || len(b2.Unverified) != 2 ||
				!strings.Contains(b2.Unverified[0].Reason, Fingerprint(pubOf(replayer))) {
				t.Fatalf("untrusted replayer: status %+v, unverified %+v", s, b2.Unverified)
			}
		})
	}
}

// TestReplaysNeverFatal: replays/ is not covered by the bundle's
// signature, so whatever is there, a signed bundle opens; only outcomes
// signed by a trusted key for this bundle count, the others are listed
// with the reason, and stray files are warnings.
func TestReplaysNeverFatal(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "run")
	makeBundle(t, src)
	replayer, stranger := testKey(3), testKey(4)
	other := filepath.Join(t.TempDir(), "other")
	w, _ := Create(other)
	w.WriteFile("x", []byte("another bundle"))
	if err := w.Commit(fullManifest(), testKey(1)); err != nil {
		t.Fatal(err)
	}
	signed := func(dir string, key ed25519.PrivateKey, o ReplayOutcome) {
		b, err := Open(dir, OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if err := b.AddSignedReplay(o, key); err != nil {
			t.Fatal(err)
		}
	}
	rd := func(d string) string {
		os.MkdirAll(filepath.Join(d, ReplaysDir), 0o755)
		return filepath.Join(d, ReplaysDir)
	}
	cases := []struct {
		name       string
		change     func(dir string)
		count      int
		unverified string // a reason, or ""
		warning    string // a warning, or ""
	}{
		{"stray file", func(d string) { os.WriteFile(filepath.Join(rd(d), "notes"), nil, 0o644) }, 0, "", "replays/notes is not a replay outcome"},
		{"stray directory", func(d string) { os.MkdirAll(filepath.Join(rd(d), "sub", "x"), 0o755) }, 0, "", "replays/sub is not a replay outcome"},
		{"replays is a file", func(d string) { os.WriteFile(filepath.Join(d, ReplaysDir), nil, 0o644) }, 0, "", "replays is not a directory"},
		{"replays is a symlink", func(d string) { os.Symlink("/etc", filepath.Join(d, ReplaysDir)) }, 0, "", "replays is not a directory"},
		{"outcome is a symlink", func(d string) { os.Symlink("/etc/passwd", filepath.Join(rd(d), "0001.json")) }, 0, "not a valid replay outcome", ""}, // not extracted from an archive
		{"outcome is a fifo", func(d string) { mkfifo(filepath.Join(rd(d), "0001.json")) }, 0, "not a valid replay outcome", ""},                       // no archive holds one
		{"invalid outcome", func(d string) { os.WriteFile(filepath.Join(rd(d), "0001.json"), []byte(`{"fidelity": 2}`), 0o644) }, 0, "not a valid replay outcome", ""},
		{"unsigned outcome (older dal)", func(d string) {
			os.WriteFile(filepath.Join(rd(d), "0001.json"), []byte(`{"at":"2026-01-01T00:00:00Z","fidelity":1,"match_status":"exact_match"}`), 0o644)
		}, 0, "is not signed", ""},
		{"forged outcome: signer named, no signature", func(d string) {
			signed(d, replayer, ReplayOutcome{Fidelity: 0})
			os.Remove(filepath.Join(d, ReplaysDir, "0001.json.sig"))
		}, 0, "has no signature", ""},
		{"outcome changed after signing", func(d string) {
			signed(d, replayer, ReplayOutcome{Fidelity: 0})
			p := filepath.Join(d, ReplaysDir, "0001.json")
			os.WriteFile(p, bytes.Replace(must(os.ReadFile(p)), []byte(`"no_match"`), []byte(`"exact_match"`), 1), 0o644)
		}, 0, "does not match its signature", ""},
		{"outcome signed by a stranger", func(d string) { signed(d, stranger, ReplayOutcome{Fidelity: 1}) }, 0, "which you do not trust", ""},
		{"outcome moved from another bundle", func(d string) {
			signed(other, replayer, ReplayOutcome{Fidelity: 1})
			os.MkdirAll(filepath.Join(d, ReplaysDir), 0o755)
			for _, f := range []string{"0001.json", "0001.json.sig"} {
				os.WriteFile(filepath.Join(d, ReplaysDir, f), must(os.ReadFile(filepath.Join(other, ReplaysDir, f))), 0o644)
			}
		}, 0, "signed for another bundle", ""},
		{"signature without outcome", func(d string) { os.WriteFile(filepath.Join(rd(d), "0007.json.sig"), []byte("x\n"), 0o644) }, 0, "", "0007.json.sig is a signature without its outcome"},
		{"trusted outcome next to junk", func(d string) {
			signed(d, replayer, ReplayOutcome{Fidelity: 1})
			os.WriteFile(filepath.Join(d, ReplaysDir, "README"), []byte("\x1b]52;c;x\x07"), 0o644)
		}, 1, "", "replays/README"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			copyTree(t, src, dir)
			c.change(dir)
			forms := []string{"dir", "tgz", "tar.zst"}
			if strings.Contains(c.name, "fifo") {
				forms = forms[:1] // Pack refuses what a bundle cannot hold
			}
			for _, form := range forms {
				skipped := form != "dir" && strings.Contains(c.name, "symlink") // not extracted: a warning says so
				p := dir
				if form != "dir" {
					p = filepath.Join(t.TempDir(), "run."+form)
					if err := Pack(dir, p); err != nil {
						t.Fatal(err)
					}
				}
				b, err := Open(p, OpenOptions{Trust: trustOf(testKey(1), replayer)})
				if err != nil {
					t.Fatalf("%s: a signed bundle with %s does not open: %v", form, c.name, err)
				}
				defer b.Close()
				if got := b.ReplayStatus().ReplayCount; got != c.count {
					t.Errorf("%s: %d replays counted, want %d", form, got, c.count)
				}
				if skipped {
					if len(b.Warnings) == 0 || len(b.Unverified) != 0 {
						t.Errorf("%s: warnings %q, unverified %+v", form, b.Warnings, b.Unverified)
					}
					continue
				}
				if c.unverified != "" && (len(b.Unverified) != 1 || !strings.Contains(b.Unverified[0].Reason, c.unverified)) {
					t.Errorf("%s: unverified %+v, want one saying %q", form, b.Unverified, c.unverified)
				}
				if c.warning != "" && form == "dir" && !strings.Contains(strings.Join(b.Warnings, "\n"), c.warning) {
					t.Errorf("%s: warnings %q, want %q", form, b.Warnings, c.warning)
				}
				if c.warning != "" && form != "dir" && len(b.Warnings) == 0 {
					t.Errorf("%s: no warning", form)
				}
			}
		})
	}
}

// TestAddReplayInterrupted: the temporary files of an AddSignedReplay
// that died do not break the bundle.
func TestAddReplayInterrupted(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "run")
	makeBundle(t, out)
	os.Mkdir(filepath.Join(out, ReplaysDir), 0o755)
	os.WriteFile(filepath.Join(out, ReplaysDir, ".replay-123"), []byte("{"), 0o644)
	os.WriteFile(filepath.Join(out, ReplaysDir, "0001.json.sig"), []byte("orphan\n"), 0o644) // died between the renames
	b, err := Open(out, OpenOptions{Trust: trustOf(testKey(1))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.AddSignedReplay(ReplayOutcome{Fidelity: 0}, testKey(1)); err != nil {
		t.Fatal(err)
	}
	if s := b.ReplayStatus(); s.ReplayCount != 1 || s.MatchStatus != NoMatch || b.Replays[0].Seq != 2 {
		t.Fatalf("status %+v, replays %+v", s, b.Replays)
	}
	var o ReplayOutcome
	if err := json.Unmarshal(must(os.ReadFile(filepath.Join(out, ReplaysDir, "0002.json"))), &o); err != nil || o.Signer != EncodePublicKey(pubOf(testKey(1))) || !strings.HasPrefix(o.Manifest, "sha256:") {
		t.Fatalf("stored outcome %+v, %v", o, err)
	}
}

func TestMatchStatusFor(t *testing.T) {
	t.Parallel()
	for f, want := range map[float64]string{1: ExactMatch, 0.99: PartialMatch, 0.01: PartialMatch, 0: NoMatch} {
		if got := MatchStatusFor(f); got != want {
			t.Errorf("MatchStatusFor(%v) = %s, want %s", f, got, want)
		}
	}
}
