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
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"syscall"

	"github.com/dal-runtime/dal/bundle"
)

// MergeOptions tune Merge.
type MergeOptions struct {
	// Key, when set, is the only key the run bundles may be signed with;
	// otherwise each bundle's signature is checked under the key its
	// manifest names (intact, but not proof of who recorded it).
	Key ed25519.PublicKey
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
	dir  string
	file ShardFile
}

func (s shardDir) name() string { return fmt.Sprintf("shard %s (%s)", s.file.Shard, s.dir) }

// Merge checks the shard directories dirs (each written by an evaluation
// with Options.Shard) and writes into out the report a single evaluation
// of the same runs would have written, byte for byte, with every run's
// bundle at out/runs/NNN (a symbolic link into its shard, or with
// MergeOptions.Copy a hard-linked or copied tree). It refuses, writing nothing, when the shards are not the
// shards of one evaluation (command, mode, seeds, strategy, answer
// source, verify and score commands, dal version), when a shard is
// missing or given twice, when a run is missing, duplicated or outside its
// shard, or when a run's bundle is not intact (signature, files) or does
// not match its shard's record (seed for its index, command, mode, dal
// version, exit code, duration, tokens, stdout, answer). out must not
// exist or be an empty directory.
//
// The verify, score and answer commands' results come from shard.json:
// merge does not run them again (a score may come from a paid judge).
func Merge(ctx context.Context, dirs []string, out string, mo MergeOptions) (*Report, error) {
	if len(dirs) == 0 {
		return nil, errors.New("merge: no shard directories given: name the --report directories of the shards")
	}
	if err := checkEmptyOut(out); err != nil {
		return nil, err
	}
	shards, err := readShards(dirs)
	if err != nil {
		return nil, err
	}
	runs, warnings, err := collectRuns(shards)
	if err != nil {
		return nil, err
	}
	if err := verifyRuns(ctx, shards, mo); err != nil {
		return nil, err
	}
	o := shards[0].file.Evaluation.options()
	rep := analyse(o, runs, warnings)
	if err := writeMerged(shards, out, rep, mo.Copy); err != nil {
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

// readShards reads every shard.json and checks that they are the shards
// of one evaluation, each given once, none missing.
func readShards(dirs []string) ([]shardDir, error) {
	var shards []shardDir
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join(d, ShardFileName))
		if err != nil {
			return nil, fmt.Errorf("%s holds no readable %s (%v): give directories written by dal-exec consistency --shard K/N --report DIR", d, ShardFileName, errors.Unwrap(err))
		}
		var f ShardFile
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			return nil, fmt.Errorf("%s/%s is not a shard file (%v): it was modified or written by another dal", d, ShardFileName, err)
		}
		if f.SchemaVersion != shardSchemaVersion {
			return nil, fmt.Errorf("%s/%s has format version %d, this dal reads %d: merge with the dal that ran the shards", d, ShardFileName, f.SchemaVersion, shardSchemaVersion)
		}
		if err := f.Shard.check(len(f.Evaluation.Seeds)); err != nil || f.Shard.Count == 0 {
			return nil, fmt.Errorf("%s/%s names no valid shard (%s): it was modified", d, ShardFileName, f.Shard)
		}
		shards = append(shards, shardDir{dir: d, file: f})
	}
	first := shards[0]
	seen := map[int]shardDir{}
	for _, s := range shards {
		if s.file.DalVersion != first.file.DalVersion {
			return nil, fmt.Errorf("%s was run by dal %s, %s by dal %s: run every shard with the same dal", s.name(), s.file.DalVersion, first.name(), first.file.DalVersion)
		}
		if s.file.Shard.Count != first.file.Shard.Count {
			return nil, fmt.Errorf("%s is one of %d shards, %s one of %d: merge the shards of one evaluation", s.name(), s.file.Shard.Count, first.name(), first.file.Shard.Count)
		}
		if field := differs(first.file.Evaluation, s.file.Evaluation); field != "" {
			return nil, fmt.Errorf("%s and %s differ in %s: they are not shards of one evaluation", s.name(), first.name(), field)
		}
		if prev, dup := seen[s.file.Shard.Index]; dup {
			return nil, fmt.Errorf("%s is given twice (%s and %s): give each shard once", s.name(), prev.dir, s.dir)
		}
		seen[s.file.Shard.Index] = s
	}
	for k := 1; k <= first.file.Shard.Count; k++ {
		if _, ok := seen[k]; !ok {
			return nil, fmt.Errorf("shard %d/%d is missing: give the directories of all %d shards", k, first.file.Shard.Count, first.file.Shard.Count)
		}
	}
	return shards, nil
}

// differs names the first field in which two evaluations differ, "" when
// none.
func differs(a, b Evaluation) string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	names := map[string]string{"Command": "command", "Mode": "mode", "Seeds": "seeds (--seed, --seeds or --runs)",
		"Strategy": "strategy", "Threshold": "threshold", "Exclude": "outlier exclusion", "Cutoff": "outlier cutoff",
		"Metrics": "outlier metrics", "Level": "confidence level", "Verify": "verify command", "Score": "score command",
		"ScoreFile": "score file", "Answer": "answer source"}
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

// verifyRun checks one run's bundle against the shard's record of it.
func verifyRun(ctx context.Context, s *shardDir, r *ShardRun, mo MergeOptions) error {
	e := s.file.Evaluation
	path := filepath.Join(s.dir, filepath.FromSlash(r.Bundle))
	// A shard is input from anywhere: its run directory must be its own,
	// not a link that merge would follow (and copy from) elsewhere.
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s, run %d: %s is a symbolic link, not the run's bundle: the shard was modified", s.name(), r.Index, r.Bundle)
	}
	b, err := bundle.Open(path, bundle.OpenOptions{TrustedKey: mo.Key})
	if errors.Is(err, bundle.ErrUntrusted) {
		return fmt.Errorf("%s, run %d: %v", s.name(), r.Index, err)
	}
	if err != nil {
		return fmt.Errorf("%s, run %d: %v: record the run again (remove %s and run the shard again)", s.name(), r.Index, err, path)
	}
	dir := b.Dir
	defer b.Close()
	f, err := readBundle(dir)
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
		a, err := o.answerOf(ctx, dir, nil)
		if err != nil {
			return fmt.Errorf("%s, run %d: the shard's record has an answer, the bundle none (%v): the shard was modified", s.name(), r.Index, err)
		}
		if a.hash != r.AnswerHash {
			return bad("answer", a.hash, r.AnswerHash)
		}
	}
	return nil
}

// runDirName is run i's directory under runs/.
func runDirName(i int) string { return filepath.Base(BundlePath("", i)) }

// writeMerged links (or copies) every bundle into out/runs and writes the
// report; on failure it removes what it wrote.
func writeMerged(shards []shardDir, out string, rep *Report, copyTrees bool) (err error) {
	created := false
	if _, statErr := os.Stat(out); errors.Is(statErr, fs.ErrNotExist) {
		created = true
	}
	if err := os.MkdirAll(filepath.Join(out, "runs"), 0o755); err != nil {
		return fmt.Errorf("cannot create the report directory %s: %w", out, err)
	}
	defer func() {
		if err == nil {
			return
		}
		if created {
			os.RemoveAll(out)
			return
		}
		ents, _ := os.ReadDir(out)
		for _, e := range ents {
			os.RemoveAll(filepath.Join(out, e.Name()))
		}
	}()
	for _, s := range shards {
		for _, r := range s.file.Runs {
			src := filepath.Join(s.dir, filepath.FromSlash(r.Bundle))
			dst := filepath.Join(out, filepath.FromSlash(r.Bundle))
			if copyTrees {
				err = linkTree(src, dst)
			} else {
				err = symlinkTo(src, dst)
			}
			if err != nil {
				return fmt.Errorf("merge: placing run %d's bundle into %s: %w", r.Index, out, err)
			}
		}
	}
	return rep.Write(out)
}

// symlinkTo makes dst a symbolic link to src: relative to dst's directory
// when both are under one root, so that moving the two together keeps it.
func symlinkTo(src, dst string) error {
	abs, err := filepath.Abs(src)
	if err != nil {
		return err
	}
	absDst, err := filepath.Abs(filepath.Dir(dst))
	if err != nil {
		return err
	}
	target := abs
	if rel, err := filepath.Rel(absDst, abs); err == nil {
		target = rel
	}
	return os.Symlink(target, dst)
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
