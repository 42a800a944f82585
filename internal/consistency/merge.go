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
	"os"
	"path"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"syscall"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/safefs"
)

// MergeOptions tune Merge.
type MergeOptions struct {
	// Key, when set, is the only key the run bundles may be signed with;
	// otherwise each bundle's signature is checked under the key its
	// manifest names (intact, but not proof of who recorded it).
	Key ed25519.PublicKey
	// Trust, when set, is the set of keys a shard may be signed with
	// (dal-exec's --key, trusted-keys file, --trust-signer): a shard
	// signed by any other key is refused, as replay refuses a bundle.
	Trust *bundle.Trust
	// Parallel is how many bundles are verified at once (<= 0: one per
	// CPU).
	Parallel int
	// Copy makes out self-contained: every bundle file is hard-linked (or
	// copied) into out/runs. Without it out/runs/NNN is a symbolic link
	// (relative when it can be) to the run's bundle in its shard, so the
	// shard directories must stay where they are.
	Copy bool
}

// shardDir is one shard directory given to Merge, with its shard.json.
type shardDir struct {
	dir  string            // as given
	real string            // dir with its symbolic links resolved: where the run bundles must be
	root *safefs.Dir       // real, through which shard.json and shard.sig are read: no link is followed
	runs *safefs.Dir       // root's runs directory, in which each run's bundle is checked
	key  ed25519.PublicKey // signed shard.sig, must have signed every run's bundle
	file ShardFile
	// private is real/runs when it and the directories above it are
	// private (bundle.PrivateParent), checked once for all its bundles.
	private string
}

func (s shardDir) name() string { return fmt.Sprintf("shard %s (%s)", s.file.Shard, s.dir) }

func closeShards(shards []shardDir) {
	for _, s := range shards {
		s.runs.Close()
		s.root.Close()
	}
}

// Merge checks the shard directories dirs (each written by an evaluation
// with Options.Shard) and writes into out the report a single evaluation
// of the same runs would have written, byte for byte, with every run's
// bundle at out/runs/NNN (a symbolic link into its shard, or with
// MergeOptions.Copy a hard-linked or copied tree). It refuses, writing
// nothing, when a shard.json does not verify against its shard.sig or is
// not signed by the key of its runs (or by MergeOptions.Key), when the
// shards are not the shards of one evaluation (command, mode, seeds,
// strategy, answer source, verify and score commands, dal version), when
// a shard is missing or given twice, when a run is missing, duplicated or
// outside its shard, when a shard directory holds a symbolic link where
// shard.json, shard.sig, runs or a run's bundle should be, or when a
// run's bundle is not intact (head, signature, files) or does not match its
// shard's record (seed for its index, command, mode, dal version, exit
// code, duration, tokens, stdout, answer). out must not exist or be an
// empty directory.
//
// The verify, score and answer commands' results come from shard.json:
// merge does not run them again (a score may come from a paid judge).
//
// Each run's bundle is opened endorsed by its head in shard.json
// (bundle.Endorsement), whose signature shard.sig covers, so its own
// manifest.sig is not verified again; a shard file without heads (an
// earlier dal's) has every run's signature verified.
//
// Cost: one bundle.Open per run (head digest, schema, every file
// hashed), on MergeOptions.Parallel CPUs, and one symbolic link per run;
// docs/benchmarks.md has the figures.
func Merge(ctx context.Context, dirs []string, out string, mo MergeOptions) (*Report, error) {
	if len(dirs) == 0 {
		return nil, errors.New("merge: no shard directories given: name the --report directories of the shards")
	}
	if err := checkEmptyOut(out); err != nil {
		return nil, err
	}
	shards, err := readShards(dirs, mo)
	if err != nil {
		return nil, err
	}
	defer closeShards(shards)
	runs, warnings, err := collectRuns(shards)
	if err != nil {
		return nil, err
	}
	dst, err := createOut(out)
	if err != nil {
		return nil, err
	}
	// The links are made while the bundles are verified: a link per run
	// is an inode to allocate, work of the filesystem that one CPU does
	// for one directory at a time. A copy reads the bundles, so it waits
	// for their verification.
	linked := make(chan error, 1)
	if !mo.Copy {
		go func() { linked <- linkRuns(ctx, shards, out) }()
	}
	err = verifyRuns(ctx, shards, mo)
	if !mo.Copy {
		if lerr := <-linked; err == nil {
			err = lerr
		}
	} else if err == nil {
		err = copyRuns(shards, out)
	}
	var rep *Report
	if err == nil {
		rep = analyse(shards[0].file.Evaluation.options(), runs, warnings)
		err = rep.Write(out)
	}
	if err != nil {
		dst.discard()
		return nil, err
	}
	return rep, nil
}

// checkEmptyOut refuses an out that holds anything.
func checkEmptyOut(out string) error {
	ents, err := os.ReadDir(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("merge: %s: %w", out, err)
	case len(ents) > 0:
		return fmt.Errorf("%s is not empty: merge into a new directory", out)
	}
	return nil
}

// readShards reads and verifies every shard.json and checks that they are
// the shards of one evaluation, each given once, none missing. On success
// the caller closes the shards (closeShards).
func readShards(dirs []string, mo MergeOptions) (shards []shardDir, err error) {
	defer func() {
		if err != nil {
			closeShards(shards)
		}
	}()
	// Each shard file is read and decoded on a CPU of its own (a shard
	// of 1,000 runs is ~0.5 MB of JSON); the error is the first
	// directory's, whatever the scheduling.
	read := make([]shardDir, len(dirs))
	errs := make([]error, len(dirs))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for k, d := range dirs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			read[k], errs[k] = readShard(d, mo)
		})
	}
	wg.Wait()
	for k := range dirs {
		if errs[k] == nil {
			shards = append(shards, read[k])
		}
	}
	for _, err := range errs {
		if err != nil {
			return shards, err
		}
	}
	first := shards[0]
	seen := map[int]shardDir{}
	for _, s := range shards {
		if s.file.DalVersion != first.file.DalVersion {
			return shards, fmt.Errorf("%s was run by dal %s, %s by dal %s: run every shard with the same dal", s.name(), s.file.DalVersion, first.name(), first.file.DalVersion)
		}
		if s.file.Shard.Count != first.file.Shard.Count {
			return shards, fmt.Errorf("%s is one of %d shards, %s one of %d: merge the shards of one evaluation", s.name(), s.file.Shard.Count, first.name(), first.file.Shard.Count)
		}
		if field := differs(first.file.Evaluation, s.file.Evaluation); field != "" {
			return shards, fmt.Errorf("%s and %s differ in %s: they are not shards of one evaluation", s.name(), first.name(), field)
		}
		if prev, dup := seen[s.file.Shard.Index]; dup {
			return shards, fmt.Errorf("%s is given twice (%s and %s): give each shard once", s.name(), prev.dir, s.dir)
		}
		seen[s.file.Shard.Index] = s
	}
	for k := 1; k <= first.file.Shard.Count; k++ {
		if _, ok := seen[k]; !ok {
			return shards, fmt.Errorf("shard %d/%d is missing: give the directories of all %d shards", k, first.file.Shard.Count, first.file.Shard.Count)
		}
	}
	return shards, nil
}

// Size limits of the shard files merge reads whole.
const (
	maxShardFileBytes = 256 << 20
	maxShardSigBytes  = 1 << 10
)

// readShard reads d/shard.json and checks it against d/shard.sig (and
// key, when given). d itself is the user's path and may be a link; nothing
// inside it is followed.
func readShard(d string, mo MergeOptions) (shardDir, error) {
	key := mo.Key
	s := shardDir{dir: d}
	notShard := func(err error) error {
		return fmt.Errorf("%s holds no readable %s (%v): give directories written by dal-exec consistency --shard K/N --report DIR", d, ShardFileName, err)
	}
	real, err := filepath.EvalSymlinks(d)
	if err != nil {
		return s, notShard(errors.Unwrap(err))
	}
	if s.root, err = safefs.Open(real); err != nil {
		return s, notShard(errors.Unwrap(err))
	}
	s.real = real
	data, err := readShardEntry(s.root, ShardFileName, maxShardFileBytes)
	if err != nil {
		s.root.Close()
		return s, err
	}
	var f ShardFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		s.root.Close()
		return s, fmt.Errorf("%s/%s is not a shard file (%v): it was modified or written by another dal", d, ShardFileName, err)
	}
	s.file = f
	err = func() error {
		if f.SchemaVersion != shardSchemaVersion {
			return fmt.Errorf("%s/%s has format version %d, this dal reads %d: merge with the dal that ran the shards", d, ShardFileName, f.SchemaVersion, shardSchemaVersion)
		}
		if err := f.Shard.check(len(f.Evaluation.Seeds)); err != nil || f.Shard.Count == 0 {
			return fmt.Errorf("%s/%s names no valid shard (%s): it was modified", d, ShardFileName, f.Shard)
		}
		pub, err := decodeKey(f.PublicKey)
		if err != nil {
			return fmt.Errorf("%s: its %s's public_key %v: it was modified", s.name(), ShardFileName, err)
		}
		sigText, err := readShardEntry(s.root, ShardSigFileName, maxShardSigBytes)
		if err != nil {
			return err
		}
		sig, err := decodeSig(sigText)
		if err != nil {
			return fmt.Errorf("%s: its %s %v: it was modified; run the shard again", s.name(), ShardSigFileName, err)
		}
		if !ed25519.Verify(pub, data, sig) {
			return fmt.Errorf("%s: %s does not verify %s (one of the two was changed after the shard ran): merge the files the shard wrote, or run the shard again", s.name(), ShardSigFileName, ShardFileName)
		}
		if key != nil && !pub.Equal(key) {
			return fmt.Errorf("%s: %s is signed by key %s, not by the key given with --key: it was not recorded with that key", s.name(), ShardFileName, f.PublicKey)
		}
		if _, ok := mo.Trust.Lookup(pub); mo.Trust != nil && !ok {
			fp := bundle.Fingerprint(pub)
			return fmt.Errorf("%s: %s is signed by key %s, which you do not trust: merge with --key naming the key the shards ran with (or add it to %s), or accept it for this merge with %s %s",
				s.name(), ShardFileName, fp, bundle.DefaultTrustedKeysPath(), bundle.TrustSignerFlag, fp)
		}
		s.key = pub
		if runs := filepath.Join(real, "runs"); bundle.PrivateParent(runs) {
			s.private = runs
		}
		if s.runs, err = s.root.Sub("runs"); errors.Is(err, safefs.ErrSymlink) {
			return fmt.Errorf("%s: its runs directory is a symbolic link: merge follows no link inside a shard directory; give the directory the shard wrote", s.name())
		} else if err != nil {
			return fmt.Errorf("%s: its runs directory is not readable (%v): give the directory the shard wrote", s.name(), errors.Unwrap(err))
		}
		return nil
	}()
	if err != nil {
		s.root.Close()
	}
	return s, err
}

// readShardEntry reads the regular file name of a shard directory: a
// symbolic link (merge reads directories someone else wrote), a fifo or a
// file larger than limit is refused.
func readShardEntry(root *safefs.Dir, name string, limit int64) ([]byte, error) {
	f, err := root.Open(name)
	switch {
	case errors.Is(err, safefs.ErrSymlink):
		return nil, fmt.Errorf("%s is a symbolic link, not the shard's %s: merge follows no link inside a shard directory; give the directory the shard wrote", root.Join(name), name)
	case errors.Is(err, fs.ErrNotExist) && name == ShardFileName:
		return nil, fmt.Errorf("%s holds no %s: give directories written by dal-exec consistency --shard K/N --report DIR", root.Name(), name)
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s holds no %s: its %s is not signed (written by another dal, or modified); run the shard again", root.Name(), name, ShardFileName)
	case err != nil:
		return nil, fmt.Errorf("%s is not readable (%v): give the directory the shard wrote", root.Join(name), errors.Unwrap(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errors.New("not a regular file")
	} else if err == nil && fi.Size() > limit {
		err = fmt.Errorf("larger than %d bytes", limit)
	}
	var data []byte
	if err == nil {
		data, err = io.ReadAll(io.LimitReader(f, limit))
	}
	if err != nil {
		return nil, fmt.Errorf("%s is not readable (%v): give the directory the shard wrote", root.Join(name), err)
	}
	return data, nil
}

// differs names the first field in which two evaluations differ, "" when
// none.
func differs(a, b Evaluation) string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	names := map[string]string{"Command": "command", "Mode": "mode", "Seeds": "seeds (--seed, --seeds or --runs)",
		"Strategy": "strategy", "Threshold": "threshold", "Exclude": "outlier exclusion", "Cutoff": "outlier cutoff",
		"Metrics": "outlier metrics", "Level": "confidence level", "Verify": "verify command", "Score": "score command",
		"ScoreFile": "score file", "Answer": "answer source", "Labels": "labels (--label)"}
	for i := range va.NumField() {
		f := va.Type().Field(i).Name
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			if n, ok := names[f]; ok {
				return n
			}
			return f
		}
	}
	return ""
}

// collectRuns puts the shards' runs in index order and checks that every
// run is there once, in its own shard.
func collectRuns(shards []shardDir) ([]RunReport, []string, error) {
	n := len(shards[0].file.Evaluation.Seeds)
	runs := make([]RunReport, n)
	warns := make([][]string, n)
	from := make([]*shardDir, n)
	for k := range shards {
		s := &shards[k]
		want := s.file.Shard.indices(n)
		got := map[int]bool{}
		for _, r := range s.file.Runs {
			if r.Index < 1 || r.Index > n || (r.Index-1)%s.file.Shard.Count != s.file.Shard.Index-1 {
				return nil, nil, fmt.Errorf("%s lists run %d, which is not one of its runs: the shard file was modified", s.name(), r.Index)
			}
			if got[r.Index] {
				return nil, nil, fmt.Errorf("%s lists run %d twice: the shard file was modified", s.name(), r.Index)
			}
			got[r.Index] = true
			if r.Bundle != filepath.ToSlash(filepath.Join("runs", runDirName(r.Index))) {
				return nil, nil, fmt.Errorf("%s: run %d's bundle is at %q, not runs/%s: the shard file was modified", s.name(), r.Index, r.Bundle, runDirName(r.Index))
			}
			runs[r.Index-1], warns[r.Index-1], from[r.Index-1] = r.RunReport, r.Warnings, s
		}
		for _, i := range want {
			if !got[i] {
				return nil, nil, fmt.Errorf("%s lacks run %d: run the shard again with the same command to record it", s.name(), i)
			}
		}
	}
	return runs, slices.Concat(warns...), nil
}

// verifyRuns opens every run's bundle (signature, files) and checks it
// against its shard's record, in parallel; the error is the one of the
// lowest run index, so that it does not depend on scheduling.
func verifyRuns(ctx context.Context, shards []shardDir, mo MergeOptions) error {
	type job struct {
		s *shardDir
		r *ShardRun
	}
	var jobs []job
	for k := range shards {
		for j := range shards[k].file.Runs {
			jobs = append(jobs, job{&shards[k], &shards[k].file.Runs[j]})
		}
	}
	slices.SortFunc(jobs, func(a, b job) int { return a.r.Index - b.r.Index })
	errs := make([]error, len(jobs))
	par := mo.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				errs[k] = verifyRun(ctx, jobs[k].s, jobs[k].r, mo)
			}
		}()
	}
	for k := range jobs {
		if ctx.Err() != nil {
			break
		}
		next <- k
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// verifyRun checks one run's bundle against the shard's record of it. The
// bundle is read only through bundle.Open's verified view: its manifest's
// metrics and file hashes, and the files it lists, never through a link.
func verifyRun(ctx context.Context, s *shardDir, r *ShardRun, mo MergeOptions) error {
	e := s.file.Evaluation
	// A shard is input from anywhere: its runs directory and the run's
	// directory must be its own, not links that merge would follow (and
	// copy from) elsewhere.
	fi, err := s.runs.Lstat(path.Base(r.Bundle)) // r.Bundle is runs/NNN (collectRuns)
	switch {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s, run %d: %s is a symbolic link, not the run's bundle: merge follows no link inside a shard directory", s.name(), r.Index, r.Bundle)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s, run %d: its bundle %s is missing: run the shard again with the same command to record it", s.name(), r.Index, r.Bundle)
	case err != nil:
		return fmt.Errorf("%s, run %d: %v", s.name(), r.Index, err)
	case !fi.IsDir():
		return fmt.Errorf("%s, run %d: %s is not a bundle directory: the shard was modified", s.name(), r.Index, r.Bundle)
	}
	dir := filepath.Join(s.real, filepath.FromSlash(r.Bundle))
	opts := bundle.OpenOptions{TrustedKey: mo.Key, PrivateParent: s.private}
	if r.Head != "" {
		opts.Endorsed = &bundle.Endorsement{Key: s.key, Head: r.Head}
	}
	b, err := bundle.Open(dir, opts)
	// A head that is not the one the shard lists fails the merge; the
	// bundle is opened in full all the same, so that the message can say
	// what it is instead (another run's bundle, another evaluation's)
	// when the checks below find it.
	var notListed error
	if errors.Is(err, bundle.ErrNotEndorsed) {
		notListed = fmt.Errorf("%s, run %d: %v: it is not the bundle the shard recorded; record the run again (remove %s and run the shard again)", s.name(), r.Index, err, dir)
		if b, err = bundle.Open(dir, bundle.OpenOptions{TrustedKey: mo.Key}); err != nil {
			return notListed
		}
	}
	if errors.Is(err, bundle.ErrUntrusted) {
		return fmt.Errorf("%s, run %d: %v", s.name(), r.Index, err)
	}
	if err != nil {
		return fmt.Errorf("%s, run %d: %v: record the run again (remove %s and run the shard again)", s.name(), r.Index, err, dir)
	}
	defer b.Close()
	if b.Dir != dir { // replaced by a link since the check above
		return fmt.Errorf("%s, run %d: %s is a symbolic link (or lies below one), not the run's bundle: merge follows no link inside a shard directory", s.name(), r.Index, r.Bundle)
	}
	if !b.PublicKey.Equal(s.key) {
		return fmt.Errorf("%s, run %d: the bundle is signed by key %s, the shard's %s by key %s: record every run of a shard with one --key", s.name(), r.Index, b.Manifest.Dal.PublicKey, ShardFileName, s.file.PublicKey)
	}
	files := bundleFiles(b)
	f, err := openedFacts(b, files)
	if err != nil {
		return fmt.Errorf("%s, run %d: %v", s.name(), r.Index, err)
	}
	bad := func(what string, got, want any) error {
		return fmt.Errorf("%s, run %d: the bundle's %s is %v, the shard's record says %v: the shard was modified or mixes two evaluations", s.name(), r.Index, what, got, want)
	}
	switch {
	case f.env.Seed != e.Seeds[r.Index-1]:
		return fmt.Errorf("%s, run %d: the bundle was recorded with seed %d, but run %d's seed is %d: it is another run's bundle", s.name(), r.Index, f.env.Seed, r.Index, e.Seeds[r.Index-1])
	case r.Seed != f.env.Seed:
		return bad("seed", f.env.Seed, r.Seed)
	case !slices.Equal(f.env.Command, e.Command):
		return fmt.Errorf("%s, run %d: the bundle was recorded for command %q, the evaluation's is %q: it belongs to another evaluation", s.name(), r.Index, f.env.Command, e.Command)
	case e.Mode != "" && f.env.Mode != e.Mode:
		return fmt.Errorf("%s, run %d: the bundle was recorded in %s mode, the evaluation in %s mode: it belongs to another evaluation", s.name(), r.Index, f.env.Mode, e.Mode)
	case f.env.DalVersion != "" && f.env.DalVersion != s.file.DalVersion:
		return fmt.Errorf("%s, run %d: the bundle was recorded by dal %s, the shard by dal %s: run every shard with one dal", s.name(), r.Index, f.env.DalVersion, s.file.DalVersion)
	case f.env.ExitCode != r.ExitCode:
		return bad("exit code", f.env.ExitCode, r.ExitCode)
	case f.env.TimedOut != r.TimedOut:
		return bad("timeout", f.env.TimedOut, r.TimedOut)
	case !f.env.StartedAt.Equal(r.StartedAt):
		return bad("start time", f.env.StartedAt, r.StartedAt)
	case f.durationMS != r.DurationMS:
		return bad("duration", f.durationMS, r.DurationMS)
	case f.tokens != r.Tokens:
		return bad("token count", f.tokens, r.Tokens)
	case f.outputHash != r.OutputHash:
		return bad("stdout hash", f.outputHash, r.OutputHash)
	case e.Verify == "" && r.Success && f.env.ExitCode != 0:
		return bad("exit code", f.env.ExitCode, "success")
	}
	if r.Success && e.Answer.Command == "" {
		o := e.options()
		a, err := o.answerOf(ctx, files, nil)
		if err != nil {
			return fmt.Errorf("%s, run %d: the shard's record has an answer, the bundle none (%v): the shard was modified", s.name(), r.Index, err)
		}
		if a.hash != r.AnswerHash {
			return bad("answer", a.hash, r.AnswerHash)
		}
	}
	return notListed
}

// runDirName is run i's directory under runs/.
func runDirName(i int) string { return filepath.Base(BundlePath("", i)) }

// outDir is the merge's output directory while it is written.
type outDir struct {
	path    string
	created bool // by the merge, rather than given empty
}

// createOut creates out and out/runs.
func createOut(out string) (*outDir, error) {
	d := &outDir{path: out}
	if _, err := os.Stat(out); errors.Is(err, fs.ErrNotExist) {
		d.created = true
	}
	if err := os.MkdirAll(filepath.Join(out, "runs"), 0o755); err != nil {
		return nil, fmt.Errorf("cannot create the report directory %s: %w", out, err)
	}
	return d, nil
}

// discard removes what the merge wrote: out itself when the merge created
// it, else its contents.
func (d *outDir) discard() {
	if d.created {
		os.RemoveAll(d.path)
		return
	}
	ents, _ := os.ReadDir(d.path)
	for _, e := range ents {
		os.RemoveAll(filepath.Join(d.path, e.Name()))
	}
}

// linkRuns makes out/runs/NNN a symbolic link to each run's bundle in its
// shard, relative when it can be, so that moving the shards and out
// together keeps the links.
func linkRuns(ctx context.Context, shards []shardDir, out string) error {
	runs, err := safefs.Open(filepath.Join(out, "runs"))
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	defer runs.Close()
	from, err := filepath.Abs(runs.Name())
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	for _, s := range shards {
		to, err := filepath.Abs(s.dir)
		if err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		if rel, err := filepath.Rel(from, to); err == nil {
			to = rel
		}
		for _, r := range s.file.Runs {
			if err := ctx.Err(); err != nil {
				return err
			}
			name := path.Base(r.Bundle)
			if err := runs.Symlink(filepath.Join(to, "runs", name), name); err != nil {
				return fmt.Errorf("merge: placing run %d's bundle into %s: %w", r.Index, out, err)
			}
		}
	}
	return nil
}

// copyRuns recreates every run's bundle at out/runs/NNN with linkTree.
func copyRuns(shards []shardDir, out string) error {
	for _, s := range shards {
		for _, r := range s.file.Runs {
			rel := filepath.FromSlash(r.Bundle)
			if err := linkTree(filepath.Join(s.real, rel), filepath.Join(out, rel)); err != nil {
				return fmt.Errorf("merge: placing run %d's bundle into %s: %w", r.Index, out, err)
			}
		}
	}
	return nil
}

// linkTree recreates the tree src at dst (which must not exist): files as
// hard links, or copies where links are not possible; symbolic links as
// links; nothing is followed, src itself included.
func linkTree(src, dst string) error {
	root := src
	if fi, err := os.Lstat(root); err != nil {
		return err
	} else if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", root)
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.Mkdir(to, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case d.Type().IsRegular():
			if err := os.Link(p, to); err == nil {
				return nil
			} else if !errors.Is(err, syscall.EXDEV) && !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.EMLINK) {
				return err
			}
			return copyFile(p, to)
		}
		return fmt.Errorf("%s is neither a file, a directory nor a symbolic link", p)
	})
}

func copyFile(from, to string) error {
	in, err := os.OpenFile(from, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
