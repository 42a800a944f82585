package consistency

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/consistency/consensus"
	"github.com/dal-runtime/dal/internal/version"
)

// Shard is one of Count parts of an evaluation: shard Index (1-based)
// records runs Index, Index+Count, Index+2·Count, ... Seeds depend only on
// the run index, so shards are independent and any scheduler may run them
// anywhere; Merge puts them together. The zero value is no sharding.
type Shard struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

// ParseShard reads K/N.
func ParseShard(s string) (Shard, error) {
	k, n, ok := strings.Cut(strings.TrimSpace(s), "/")
	ki, err1 := strconv.Atoi(k)
	ni, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("shard %q is not K/N, e.g. 3/10 for the third of ten shards", s)
	}
	sh := Shard{Index: ki, Count: ni}
	if ni < 1 || ki < 1 || ki > ni {
		return Shard{}, fmt.Errorf("shard %q: K must be between 1 and N (shards are numbered from 1)", s)
	}
	return sh, nil
}

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// check validates a shard of an evaluation of runs runs.
func (s Shard) check(runs int) error {
	if s.Count == 0 && s.Index == 0 {
		return nil
	}
	if s.Count < 1 || s.Index < 1 || s.Index > s.Count {
		return fmt.Errorf("shard %s: K must be between 1 and N", s)
	}
	if s.Count > runs {
		return fmt.Errorf("shard %s: %d shards for %d runs would leave shards without a run; use at most %d shards", s, s.Count, runs, runs)
	}
	return nil
}

// indices are the 1-based run indices of the shard, all of them without
// sharding.
func (s Shard) indices(runs int) []int {
	var out []int
	for i := 1; i <= runs; i++ {
		if s.Count == 0 || (i-1)%s.Count == s.Index-1 {
			out = append(out, i)
		}
	}
	return out
}

// ShardFileName is the file a shard evaluation writes into its directory,
// and ShardSigFileName its signature: the standard base64 of the ed25519
// signature of shard.json's exact bytes, then "\n", under the key that
// shard.json names (a bundle's manifest.sig, for shard.json).
const (
	ShardFileName    = "shard.json"
	ShardSigFileName = "shard.sig"
)

// ShardFile is DIR/shard.json: what merge needs of a shard besides its
// run bundles. The run entries hold what the verify, score and answer
// commands said; merge checks every other field against the run's signed
// bundle. PublicKey signed shard.sig and must have signed every run's
// bundle, so a shard file cannot be changed without the key its runs
// were recorded with.
type ShardFile struct {
	SchemaVersion int        `json:"schema_version"`
	DalVersion    string     `json:"dal_version"`
	PublicKey     string     `json:"public_key"` // standard base64, as a bundle manifest's dal.public_key
	Shard         Shard      `json:"shard"`
	Evaluation    Evaluation `json:"evaluation"`
	Runs          []ShardRun `json:"runs"`
}

// shardSchemaVersion is shard.json's format version: 2 since it is
// signed (public_key, shard.sig).
const shardSchemaVersion = 2

// Evaluation is what every shard of one evaluation must share.
type Evaluation struct {
	Command   []string           `json:"command"`
	Mode      string             `json:"mode"`
	Seeds     []uint64           `json:"seeds"`
	Strategy  consensus.Strategy `json:"strategy"`
	Threshold float64            `json:"threshold"`
	Exclude   string             `json:"exclude_outliers"`
	Cutoff    float64            `json:"outlier_cutoff,omitempty"`
	Metrics   []consensus.Metric `json:"outlier_metrics,omitempty"`
	Level     float64            `json:"level"`
	Verify    string             `json:"verify,omitempty"`
	Score     string             `json:"score,omitempty"`
	ScoreFile string             `json:"score_file,omitempty"`
	Answer    AnswerSource       `json:"answer"`
	Labels    Labels             `json:"labels,omitempty"`
}

// ShardRun is one run of a shard with the warnings it gave, and its
// bundle's head: the bundle.HeadDigest of its manifest.json and
// manifest.sig, whose signature the shard checked when it wrote the
// file. Merge opens the bundle endorsed by it (bundle.Endorsement), so
// that one signature, shard.sig's, covers every run's; a shard file of
// an earlier dal has none, and merge verifies each bundle's signature.
type ShardRun struct {
	RunReport
	Warnings []string `json:"warnings,omitempty"`
	Head     string   `json:"head,omitempty"`
}

func (o *Options) evaluation() Evaluation {
	return Evaluation{Command: o.Command, Mode: o.Mode, Seeds: o.Seeds, Strategy: o.Strategy,
		Threshold: o.Consensus.Threshold, Exclude: string(o.Consensus.Exclude.Method), Cutoff: o.Consensus.Exclude.Cutoff,
		Metrics: o.Consensus.Exclude.Metrics, Level: o.Level, Verify: o.Verify, Score: o.Score, ScoreFile: o.ScoreFile,
		Answer: o.Answer, Labels: o.Labels}
}

// options are the Options of the evaluation e, for analyse.
func (e Evaluation) options() Options {
	return Options{Command: e.Command, Mode: e.Mode, Seeds: e.Seeds, Strategy: e.Strategy,
		Consensus: consensus.Options{Threshold: e.Threshold,
			Exclude: consensus.Exclusion{Method: consensus.OutlierMethod(e.Exclude), Cutoff: e.Cutoff, Metrics: e.Metrics}},
		Level: e.Level, Verify: e.Verify, Score: e.Score, ScoreFile: e.ScoreFile, Answer: e.Answer, Labels: e.Labels}
}

// writeShard writes o.Dir/shard.json for the shard's runs, in index
// order, and its signature shard.sig under o.Key. Each file is replaced
// atomically; a crash between the two leaves a signature that does not
// verify, which merge refuses (running the shard again rewrites both).
func (o *Options) writeShard(runs []RunReport, warnings [][]string) error {
	pub := o.Key.Public().(ed25519.PublicKey)
	f := ShardFile{SchemaVersion: shardSchemaVersion, DalVersion: version.Version,
		PublicKey: base64.StdEncoding.EncodeToString(pub), Shard: o.Shard, Evaluation: o.evaluation()}
	for k, r := range runs {
		bundleDir := BundlePath(o.Dir, r.Index)
		head, err := bundle.Endorse(bundleDir, pub)
		if err != nil {
			return fmt.Errorf("shard %s, run %d: %v: remove %s and run the shard again to record it anew", o.Shard, r.Index, err, bundleDir)
		}
		f.Runs = append(f.Runs, ShardRun{RunReport: r, Warnings: warnings[k], Head: head})
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	data = append(data, '\n')
	if err := writeAtomic(filepath.Join(o.Dir, ShardFileName), data); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(o.Dir, ShardSigFileName), encodeSig(ed25519.Sign(o.Key, data)))
}

// encodeSig and decodeSig are a signature file's format: standard base64
// and a newline.
func encodeSig(sig []byte) []byte {
	return append([]byte(base64.StdEncoding.EncodeToString(sig)), '\n')
}

func decodeSig(text []byte) ([]byte, error) {
	sig, err := base64.StdEncoding.Strict().DecodeString(strings.TrimSuffix(string(text), "\n"))
	if err != nil || len(sig) != ed25519.SignatureSize {
		return nil, errors.New("is not one base64 ed25519 signature")
	}
	return sig, nil
}

// decodeKey reads a public key written as in a bundle manifest.
func decodeKey(s string) (ed25519.PublicKey, error) {
	pub, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return nil, errors.New("is not a base64 ed25519 public key")
	}
	return ed25519.PublicKey(pub), nil
}
