package consistency

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/consistency/consensus"
	"github.com/dal-runtime/dal/internal/digest"
	"github.com/dal-runtime/dal/internal/iterate"
	"github.com/dal-runtime/dal/internal/safefs"
	"github.com/dal-runtime/dal/seedrng"
)

// SchemaVersion is report.json's format version: 2 since runs vote on
// their answer (answer, answer_hash, the tally per answer).
const SchemaVersion = 2

// RunSpec is one run to record.
type RunSpec struct {
	Index  int    // 1-based
	Seed   uint64 // the run's session seed
	Bundle string // where the bundle must be written (a directory that does not exist yet)
}

// Recorder records one run into a complete bundle at r.Bundle. An error is a
// failure of dal, not of the agent, and stops the evaluation.
type Recorder func(ctx context.Context, r RunSpec) error

// Options configure an evaluation.
type Options struct {
	Dir     string   // report directory; runs go to Dir/runs/NNN
	Command []string // the agent's command, for the report and the resume check
	Mode    string   // execution mode, for the report
	Seeds   []uint64 // one per run (see Seeds)
	// Parallel is how many runs are recorded at once (<= 0 means 1).
	Parallel  int
	Strategy  consensus.Strategy
	Consensus consensus.Options
	// Verify and Score are shell commands (sh -c) run per run with
	// DAL_RUN_INDEX, DAL_RUN_SEED, DAL_RUN_BUNDLE and DAL_RUN_EXIT_CODE
	// set; "" means none.
	Verify, Score string
	// ScoreFile is a file, relative to the workspace, in which the agent
	// writes its own quality score (one number in [0, 1]); it is read from
	// the run's bundle. Without Score and ScoreFile, a run whose agent
	// marked iterations is scored by its selected iteration.
	ScoreFile string
	// Answer is what runs vote on (the zero value: stdout).
	Answer AnswerSource
	// Shard, when set, records only its share of the runs and writes
	// shard.json instead of a report (see Shard), signed with Key (which
	// must be the key the runs' bundles are signed with).
	Shard  Shard
	Key    ed25519.PrivateKey
	Record Recorder
	// Progress gets one line per finished run (nil: none).
	Progress io.Writer
	// OnProgress, when set, is called after each finished run with the
	// counts so far (a terminal's progress bar).
	OnProgress func(done, failed, total int)
	// Level of the confidence intervals (0 means 0.95).
	Level float64
	// Labels go into the report (and shard.json) as given.
	Labels Labels
}

// Seeds derives n per-run seeds from base (see the package documentation).
func Seeds(base uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = seedrng.Derive(base, fmt.Sprintf("consistency/run/%d", i+1)).Uint64()
	}
	return out
}

// BundlePath is where run i (1-based) of an evaluation into dir is recorded.
func BundlePath(dir string, i int) string {
	return filepath.Join(dir, "runs", fmt.Sprintf("%03d", i))
}

// CheckDir creates dir (and dir/runs) and checks that files can be written
// there, so that a report directory that is not writable is reported before
// any run.
func CheckDir(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "runs"), 0o755); err != nil {
		return fmt.Errorf("cannot create the report directory %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".write-test-*")
	if err != nil {
		return fmt.Errorf("report directory %s is not writable: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// Evaluate records the runs that are not recorded yet, analyses all of them
// and writes report.json, report.md and report.html into o.Dir. Runs finished before an
// error are kept.
func Evaluate(ctx context.Context, o Options) (_ *Report, err error) {
	if len(o.Seeds) == 0 {
		return nil, errors.New("consistency: no runs requested")
	}
	if o.Record == nil {
		return nil, errors.New("consistency: no recorder")
	}
	if o.Level == 0 {
		o.Level = 0.95
	}
	par := max(o.Parallel, 1)
	if err := CheckDir(o.Dir); err != nil {
		return nil, err
	}

	if err := o.Shard.check(len(o.Seeds)); err != nil {
		return nil, err
	}
	if o.Shard.Count > 0 && len(o.Key) != ed25519.PrivateKeySize {
		return nil, errors.New("consistency: a shard needs the signing key of its runs, to sign shard.json")
	}
	if err := o.Answer.Check(); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := o.writeProgress(start, ""); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil { // the dashboard shows a stopped evaluation as stopped
			o.writeProgress(start, err.Error())
		}
	}()
	indices := o.Shard.indices(len(o.Seeds))
	n := len(indices)
	results := make([]RunReport, n)
	warnings := make([][]string, n)
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		done     int
		failed   int
	)
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for k, i := range indices {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(k, i int) {
			defer wg.Done()
			defer func() { <-sem }()
			rr, warn, kept, err := o.one(ctx, i, o.Seeds[i-1])
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
					cancel()
				}
				return
			}
			results[k], warnings[k] = rr, warn
			done++
			if !rr.Success {
				failed++
			}
			if o.Progress != nil {
				fmt.Fprintln(o.Progress, progressLine(rr, kept, done, failed, n))
				for _, w := range warn {
					fmt.Fprintf(o.Progress, "dal: warning: %s\n", w)
				}
			}
			if o.OnProgress != nil {
				o.OnProgress(done, failed, n)
			}
		}(k, i)
	}
	wg.Wait()
	if err := parent.Err(); err != nil {
		return nil, fmt.Errorf("evaluation interrupted after %d of %d runs (finished runs are kept; run again to resume): %w", done, n, err)
	}
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("evaluation interrupted after %d of %d runs (finished runs are kept; run again to resume): %w", done, n, err)
	}
	if o.Shard.Count > 0 {
		return nil, o.writeShard(results, warnings)
	}
	rep := analyse(o, results, slices.Concat(warnings...))
	if err := rep.Write(o.Dir); err != nil {
		return rep, err
	}
	return rep, nil
}

func progressLine(r RunReport, kept bool, done, failed, n int) string {
	status := "ok"
	if !r.Success {
		status = "failed"
	}
	how := fmt.Sprintf("exit %d, %d ms", r.ExitCode, r.DurationMS)
	if r.TimedOut {
		how = fmt.Sprintf("timed out, killed after %d ms", r.DurationMS)
	}
	if kept {
		how += ", kept from an earlier evaluation"
	}
	if r.Score != nil {
		how += fmt.Sprintf(", score %.3g", *r.Score)
	}
	return fmt.Sprintf("dal: run %d %s (seed %d, %s) [%d/%d done, %d failed]", r.Index, status, r.Seed, how, done, n, failed)
}

// one records (or keeps) run i and measures it.
func (o *Options) one(ctx context.Context, i int, seed uint64) (RunReport, []string, bool, error) {
	path := BundlePath(o.Dir, i)
	kept := true
	root, err := safefs.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		kept = false
		if err := o.Record(ctx, RunSpec{Index: i, Seed: seed, Bundle: path}); err != nil {
			return RunReport{}, nil, false, fmt.Errorf("run %d: %w", i, err)
		}
		root, err = safefs.Open(path)
	}
	if err != nil {
		return RunReport{}, nil, false, fmt.Errorf("run %d: %w", i, err)
	}
	defer root.Close()
	files := dirFiles(root)
	b, err := readFacts(files)
	if kept && errors.Is(err, errNoManifest) {
		return RunReport{}, nil, false, fmt.Errorf("run %d's bundle %s is incomplete (no manifest.json): remove it to record the run again", i, path)
	}
	if err != nil {
		return RunReport{}, nil, false, fmt.Errorf("run %d: bundle %s: %w (remove it to record the run again)", i, path, err)
	}
	files = files.with("logs/stdout", b.stdout)
	if kept {
		if b.env.Seed != seed {
			return RunReport{}, nil, false, fmt.Errorf("run %d's kept bundle %s was recorded with seed %d, not %d as this evaluation's: use another --report directory", i, path, b.env.Seed, seed)
		}
		if len(o.Command) > 0 && !slices.Equal(b.env.Command, o.Command) {
			return RunReport{}, nil, false, fmt.Errorf("run %d's kept bundle %s was recorded for command %q, not %q: use another --report directory", i, path, b.env.Command, o.Command)
		}
		if o.Mode != "" && b.env.Mode != "" && b.env.Mode != o.Mode {
			return RunReport{}, nil, false, fmt.Errorf("run %d's kept bundle %s was recorded in %s mode, not %s: use another --report directory", i, path, b.env.Mode, o.Mode)
		}
	}
	rel, err := filepath.Rel(o.Dir, path)
	if err != nil {
		rel = path
	}
	rr := RunReport{Index: i, Seed: seed, Bundle: filepath.ToSlash(rel), ExitCode: b.env.ExitCode, TimedOut: b.env.TimedOut,
		DurationMS: b.durationMS, Tokens: b.tokens, OutputHash: b.outputHash, Success: b.env.ExitCode == 0, StartedAt: b.env.StartedAt}
	var warn []string
	env := []string{"DAL_RUN_INDEX=" + strconv.Itoa(i), "DAL_RUN_SEED=" + strconv.FormatUint(seed, 10),
		"DAL_RUN_BUNDLE=" + path, "DAL_RUN_EXIT_CODE=" + strconv.Itoa(b.env.ExitCode)}
	if o.Verify != "" {
		_, err := shell(ctx, o.Verify, env)
		var ee *exec.ExitError
		switch {
		case err == nil:
			rr.Success = true
		case errors.As(err, &ee):
			rr.Success = false
		default:
			if ctx.Err() != nil {
				return RunReport{}, nil, false, ctx.Err()
			}
			return RunReport{}, nil, false, fmt.Errorf("run %d: verify command: %w", i, err)
		}
	}
	if o.Score != "" {
		out, err := shell(ctx, o.Score, env)
		if ctx.Err() != nil {
			return RunReport{}, nil, false, ctx.Err()
		}
		s, perr := parseScore("the score command", out, err)
		if perr != nil {
			warn = append(warn, fmt.Sprintf("run %d has no score: %v", i, perr))
		} else {
			rr.Score = &s
		}
	} else if o.ScoreFile != "" {
		s, err := scoreFile(files, o.ScoreFile)
		if err != nil {
			warn = append(warn, fmt.Sprintf("run %d has no score: %v", i, err))
		} else {
			rr.Score = &s
		}
	} else if s, ok := iterationScore(files); ok {
		rr.Score = &s
	}
	if rr.Success {
		a, err := o.answerOf(ctx, files, env)
		if ctx.Err() != nil {
			return RunReport{}, nil, false, ctx.Err()
		}
		if err != nil {
			rr.Success = false
			warn = append(warn, fmt.Sprintf("run %d failed: it has no answer: %v", i, err))
		} else {
			rr.Answer, rr.AnswerHash = shorten(a.text, answerShown), a.hash
		}
	}
	return rr, warn, kept, nil
}

func shell(ctx context.Context, script string, env []string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = io.Discard
	err := cmd.Run()
	return out.Bytes(), err
}

// scoreFile reads the score the agent wrote to rel (workspace-relative)
// from the run's bundle.
func scoreFile(files runFiles, rel string) (float64, error) {
	clean, err := workspaceRel(rel)
	if err != nil {
		return 0, fmt.Errorf("the score file %s is not inside the workspace", rel)
	}
	b, err := files("fs-diff/files/" + filepath.ToSlash(clean))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("the agent did not write the score file %s", rel)
	}
	if err != nil {
		return 0, err
	}
	return parseScore("the score file "+rel, b, nil)
}

// iterationScore is the quality of the iteration the run selected, when
// its agent marked iterations.
func iterationScore(files runFiles) (float64, bool) {
	b, err := files("iterations/selection.json")
	if err != nil {
		return 0, false
	}
	var sel iterate.Selection
	if json.Unmarshal(b, &sel) != nil {
		return 0, false
	}
	return sel.Scored()
}

// parseScore reads a score command's output or a score file: one number
// in [0, 1].
func parseScore(what string, out []byte, runErr error) (float64, error) {
	if runErr != nil {
		return 0, fmt.Errorf("%s failed (%v)", what, runErr)
	}
	text := strings.TrimSpace(string(out))
	s, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsNaN(s) {
		if len(text) > 40 {
			text = text[:40] + "..."
		}
		return 0, fmt.Errorf("%s gave %q, not a number in [0, 1]", what, text)
	}
	if s < 0 || s > 1 {
		return 0, fmt.Errorf("%s gave %v, outside [0, 1]", what, s)
	}
	return s, nil
}

type bundleEnv struct {
	Command    []string  `json:"command"`
	Mode       string    `json:"mode"`
	Seed       uint64    `json:"seed"`
	ExitCode   int       `json:"exit_code"`
	TimedOut   bool      `json:"timed_out"`
	StartedAt  time.Time `json:"started_at"`
	DalVersion string    `json:"dal_version"`
}

type bundleFacts struct {
	env        bundleEnv
	durationMS int64
	tokens     int64
	outputHash string
	stdout     []byte // logs/stdout (readFacts only)
}

// runFiles reads a file of a run's bundle by its slash-separated path
// relative to the bundle. A file the bundle does not have is an error
// that errors.Is fs.ErrNotExist. No symbolic link is followed: a bundle
// is written by the agent's run, or comes from another machine.
type runFiles func(rel string) ([]byte, error)

// dirFiles reads the files of the bundle directory root: a run this
// evaluation recorded or keeps, not verified.
func dirFiles(root *safefs.Dir) runFiles {
	return func(rel string) ([]byte, error) {
		f, err := root.Open(rel)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if fi, err := f.Stat(); err != nil {
			return nil, err
		} else if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s is not a regular file", rel)
		}
		return io.ReadAll(f)
	}
}

// bundleFiles reads the files that an opened, verified bundle lists.
func bundleFiles(b *bundle.Bundle) runFiles { return b.ReadFile }

// with answers rel with data (read already) and everything else from
// files.
func (files runFiles) with(rel string, data []byte) runFiles {
	return func(r string) ([]byte, error) {
		if r == rel {
			return data, nil
		}
		return files(r)
	}
}

// metrics is what a run's manifest says of its cost.
type metrics struct {
	DurationMS   int64 `json:"duration_ms"`
	TokensInput  int64 `json:"tokens_input"`
	TokensOutput int64 `json:"tokens_output"`
}

// errNoManifest: a bundle directory without a manifest.json, which a
// bundle has once it is complete.
var errNoManifest = errors.New("the bundle has no manifest.json")

// readFacts reads a run's env.json, the metrics of its manifest.json
// and its stdout, which it hashes.
func readFacts(files runFiles) (bundleFacts, error) {
	var f bundleFacts
	var man struct {
		Metrics metrics `json:"metrics"`
	}
	if err := readJSON(files, "manifest.json", &man); errors.Is(err, fs.ErrNotExist) {
		return f, errNoManifest
	} else if err != nil {
		return f, err
	}
	if err := readJSON(files, "env.json", &f.env); err != nil {
		return f, err
	}
	f.durationMS = man.Metrics.DurationMS
	f.tokens = man.Metrics.TokensInput + man.Metrics.TokensOutput
	out, err := files("logs/stdout")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return f, err
	}
	f.stdout = out
	f.outputHash = digest.Bytes(out)
	return f, nil
}

// openedFacts reads what readFacts does from a bundle that bundle.Open
// verified: the metrics from its parsed manifest and the hash of stdout
// from the manifest's list of files (which Open checked against the
// file), so that nothing is parsed or hashed twice.
func openedFacts(b *bundle.Bundle, files runFiles) (bundleFacts, error) {
	var f bundleFacts
	if err := readJSON(files, "env.json", &f.env); err != nil {
		return f, err
	}
	if m := b.Manifest.Metrics; m != nil {
		f.durationMS, f.tokens = m.DurationMS, m.TokensInput+m.TokensOutput
	}
	const stdout = "logs/stdout"
	if h, ok := b.Manifest.Dal.Files[stdout]; ok {
		f.outputHash = h
	} else if _, link := b.Manifest.Dal.Symlinks[stdout]; link {
		return f, fmt.Errorf("the bundle's %s is a symbolic link, not the run's output", stdout)
	} else {
		f.outputHash = digest.Bytes(nil)
	}
	return f, nil
}

func readJSON(files runFiles, rel string, v any) error {
	data, err := files(rel)
	if err != nil {
		return fmt.Errorf("bundle file: %w", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("bundle file %s: %w", rel, err)
	}
	return nil
}
