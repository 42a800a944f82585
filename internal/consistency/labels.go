package consistency

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dal-runtime/dal/internal/safefs"
)

// Labels name what an evaluation measured, for the dashboard to group
// evaluations by: framework and task are the documented keys (the seed's
// report has both), any other KEY=VALUE is kept as given.
type Labels map[string]string

// Label keys the dashboard groups by.
const (
	LabelFramework = "framework"
	LabelTask      = "task"
)

const (
	maxLabelKey   = 64
	maxLabelValue = 200
	maxLabels     = 32
)

// ParseLabels reads --label KEY=VALUE flags: KEY is lower-case letters,
// digits, '_', '-' and '.', starting with a letter; VALUE is printable and
// not empty; a key is given once.
func ParseLabels(flags []string) (Labels, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	if len(flags) > maxLabels {
		return nil, fmt.Errorf("%d labels: give at most %d", len(flags), maxLabels)
	}
	l := Labels{}
	for _, f := range flags {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("label %q is not KEY=VALUE, e.g. --label framework=langgraph --label task=bug_fixing", f)
		}
		if err := checkLabelKey(k); err != nil {
			return nil, err
		}
		if v == "" || len(v) > maxLabelValue || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return nil, fmt.Errorf("label %s's value must be 1 to %d printable characters", k, maxLabelValue)
		}
		if _, dup := l[k]; dup {
			return nil, fmt.Errorf("label %s is given twice: give each key once", k)
		}
		l[k] = v
	}
	return l, nil
}

func checkLabelKey(k string) error {
	ok := k != "" && len(k) <= maxLabelKey && k[0] >= 'a' && k[0] <= 'z'
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("label key %q must be lower-case letters, digits, '_', '-' or '.', starting with a letter (at most %d)", k, maxLabelKey)
	}
	return nil
}

// String is the labels as KEY=VALUE, sorted by key.
func (l Labels) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(l)) {
		parts = append(parts, k+"="+l[k])
	}
	return strings.Join(parts, " ")
}

// ID is what every shard of an evaluation, and its report, share: the
// first 16 hex digits of the SHA-256 of the evaluation's JSON (command,
// seeds, strategy, labels, ...), so the dashboard puts the shards of one
// evaluation, running or merged, together.
func (e Evaluation) ID() string {
	data, _ := json.Marshal(e) // plain struct: cannot fail
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// ProgressFileName is the file an evaluation writes into its directory
// when it starts, so that a dashboard can show its runs while it runs.
const ProgressFileName = "evaluation.json"

// Progress is DIR/evaluation.json: which evaluation (or shard of one)
// is being recorded in DIR.
type Progress struct {
	SchemaVersion int       `json:"schema_version"`
	EvaluationID  string    `json:"evaluation_id"`
	Labels        Labels    `json:"labels,omitempty"`
	Command       []string  `json:"command"`
	Runs          int       `json:"runs"` // of the whole evaluation
	Shard         *Shard    `json:"shard,omitempty"`
	StartedAt     time.Time `json:"started_at"`
	// Stopped is why the evaluation stopped before its report (or shard
	// file) was written; "" while it runs. A killed evaluation cannot say.
	Stopped string `json:"stopped,omitempty"`
}

// writeProgress writes o.Dir/evaluation.json, with stopped the reason
// the evaluation stopped ("" when it starts).
func (o *Options) writeProgress(start time.Time, stopped string) error {
	e := o.evaluation()
	p := Progress{SchemaVersion: 1, EvaluationID: e.ID(), Labels: o.Labels, Command: o.Command, Runs: len(o.Seeds), StartedAt: start.UTC(),
		Stopped: stopped}
	if o.Shard.Count > 0 {
		sh := o.Shard
		p.Shard = &sh
	}
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("progress: %w", err)
	}
	return writeAtomic(filepath.Join(o.Dir, ProgressFileName), append(data, '\n'))
}

// PeekRun reads what a finished run's bundle says of it, without
// verifying it, for a dashboard that shows an evaluation while it runs:
// index, seed, exit code, duration, tokens, start. Success is the exit
// code's alone (a --verify command has not been considered); a bundle
// without manifest.json is not finished yet. No symbolic link inside dir
// is followed.
func PeekRun(dir string, index int) (RunReport, error) {
	root, err := safefs.Open(dir)
	if err != nil {
		return RunReport{}, err
	}
	defer root.Close()
	f, err := readFacts(dirFiles(root))
	if err != nil {
		return RunReport{}, err
	}
	return RunReport{Index: index, Seed: f.env.Seed, Bundle: filepath.ToSlash(filepath.Join("runs", runDirName(index))),
		Success: f.env.ExitCode == 0, ExitCode: f.env.ExitCode, TimedOut: f.env.TimedOut, DurationMS: f.durationMS,
		Tokens: f.tokens, OutputHash: f.outputHash, StartedAt: f.env.StartedAt}, nil
}

// ErrRunUnfinished is PeekRun's error for a bundle still being written.
var ErrRunUnfinished = errNoManifest

// LastStart is when the evaluation's last run started: the time of the
// evaluation as the dashboard orders them (zero when no run says).
func (r *Report) LastStart() time.Time { return r.lastStart() }

// Analyse is the report of runs already measured, in index order, as
// Evaluate and Merge write it for o (its Command, Mode, Seeds, Strategy,
// Consensus, Level, Answer and Labels).
func Analyse(o Options, runs []RunReport, warnings []string) *Report {
	if o.Level == 0 {
		o.Level = 0.95
	}
	return analyse(o, runs, warnings)
}
