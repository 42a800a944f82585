package consistency

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/bundle"
)

// TestMergeTrust: with a trust set, a shard signed by a key outside it
// is refused with the fingerprint to pass to --trust-signer, and writes
// nothing; the shards' own key, trusted, merges; an unsigned shard is
// refused whatever the trust.
func TestMergeTrust(t *testing.T) {
	t.Parallel()
	dirs := shards(t, 4, 2, mixedAgent, defaultEnv) // signed with testKey(1)
	signer := testKey(1).Public().(ed25519.PublicKey)
	other := &bundle.Trust{}
	other.Add(testKey(2).Public().(ed25519.PublicKey), "--key other.pub")
	out := filepath.Join(t.TempDir(), "m1")
	_, err := Merge(context.Background(), dirs, out, MergeOptions{Trust: other})
	if err == nil || !strings.Contains(err.Error(), "which you do not trust") || !strings.Contains(err.Error(), "--trust-signer "+bundle.Fingerprint(signer)) {
		t.Fatalf("a shard signed by an untrusted key: %v", err)
	}
	if _, serr := os.Stat(out); !os.IsNotExist(serr) {
		t.Fatalf("a refused merge wrote %s", out)
	}
	trusted := &bundle.Trust{}
	trusted.Add(signer, "--key shards.pub")
	if _, err := Merge(context.Background(), dirs, filepath.Join(t.TempDir(), "m2"), MergeOptions{Trust: trusted}); err != nil {
		t.Fatalf("shards signed by a trusted key: %v", err)
	}
	os.Remove(filepath.Join(dirs[1], ShardSigFileName))
	_, err = Merge(context.Background(), dirs, filepath.Join(t.TempDir(), "m3"), MergeOptions{Trust: trusted})
	if err == nil || !strings.Contains(err.Error(), "not signed") {
		t.Fatalf("an unsigned shard: %v", err)
	}
}
