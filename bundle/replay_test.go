package bundle

import (
	"bytes"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestAddReplay(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"run", "run.tgz", "run.tar.zst"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), name)
			makeBundle(t, out)
			trusted := OpenOptions{TrustedKey: testKey(1).Public().(ed25519.PublicKey)}
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
			if err := b.AddReplay(ReplayOutcome{At: t1, Fidelity: 1, Components: map[string]bool{"stdout": true}}); err != nil {
				t.Fatal(err)
			}
			if err := b.AddReplay(ReplayOutcome{At: t2, Fidelity: 0.5, Components: map[string]bool{"stdout": true, "fs-diff": false},
				Divergences: map[string]string{"fs-diff": "out.txt differs"}}); err != nil {
				t.Fatal(err)
			}
			if err := b.AddReplay(ReplayOutcome{At: t2, Fidelity: 3}); err == nil {
				t.Fatal("a fidelity of 3 was stored")
			}
			b.Close()

			b, err = Open(out, trusted)
			if err != nil {
				t.Fatalf("after AddReplay the bundle no longer verifies: %v", err)
			}
			defer b.Close()
			if !bytes.Equal(must(os.ReadFile(b.File(ManifestFile))), manifest) || !bytes.Equal(must(os.ReadFile(b.File(SignatureFile))), sig) {
				t.Fatal("AddReplay changed manifest.json or manifest.sig")
			}
			s := b.ReplayStatus()
			if !s.Replayed || s.ReplayCount != 2 || s.MatchStatus != PartialMatch || s.LastReplay == nil || !s.LastReplay.Equal(t2) {
				t.Fatalf("status %+v", s)
			}
			if len(b.Replays) != 2 || b.Replays[0].Seq != 1 || b.Replays[0].MatchStatus != ExactMatch ||
				b.Replays[1].Divergences["fs-diff"] != "out.txt differs" || b.Replays[1].CreatedBy == "" {
				t.Fatalf("replays %+v", b.Replays)
			}
			if name == "run" {
				for _, f := range []string{"replays/0001.json", "replays/0002.json"} {
					if !exists(filepath.Join(out, f)) {
						t.Fatalf("%s missing", f)
					}
				}
			}
			if left, _ := Leftovers(out); len(left) != 0 {
				t.Fatalf("left %v", left)
			}
		})
	}
}

// TestAddReplayInterrupted: a temporary file of an AddReplay that died
// does not break the bundle.
func TestAddReplayInterrupted(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "run")
	makeBundle(t, out)
	os.Mkdir(filepath.Join(out, ReplaysDir), 0o755)
	os.WriteFile(filepath.Join(out, ReplaysDir, ".replay-123"), []byte("{"), 0o644)
	b, err := Open(out, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.AddReplay(ReplayOutcome{Fidelity: 0}); err != nil {
		t.Fatal(err)
	}
	if s := b.ReplayStatus(); s.ReplayCount != 1 || s.MatchStatus != NoMatch {
		t.Fatalf("status %+v", s)
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
