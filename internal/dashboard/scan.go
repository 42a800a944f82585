package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dal-runtime/dal/internal/consistency"
)

// Limits of what Scan reads.
const (
	maxReportBytes   = 64 << 20
	maxProgressBytes = 1 << 20
	maxDepth         = 8
)

// Problem is a file Scan could not use, with one sentence saying what is
// wrong and what to do.
type Problem struct {
	Path    string `json:"path"`
	Problem string `json:"problem"`
}

// found is one evaluation directory and what it holds.
type found struct {
	dir      string
	report   *consistency.Report
	shard    *consistency.ShardFile
	progress *consistency.Progress
	running  bool                    // evaluation.json is newer than its report or shard file
	runs     []consistency.RunReport // of a running evaluation: its finished runs so far
}

type cached struct {
	size  int64
	mtime time.Time
	value any
	err   error
}

// scanner keeps what it parsed between scans.
type scanner struct {
	roots  []string
	files  map[string]cached                           // path -> parsed report, shard or progress file
	peeked map[string]map[string]consistency.RunReport // running dir -> run dir name -> run
	// changed: the last scan read a file anew, found a new run or lost
	// one, or found a file gone.
	changed bool
	last    string // the directories found by the scan before
}

func newScanner(roots []string) *scanner {
	return &scanner{roots: roots, files: map[string]cached{}, peeked: map[string]map[string]consistency.RunReport{}}
}

// CheckRoots refuses a root that is not a directory, in one sentence.
func CheckRoots(roots []string) error {
	if len(roots) == 0 {
		return errors.New("no directories given: name the directories that hold your evaluations' --report directories, e.g. dal-exec dashboard evals")
	}
	for _, r := range roots {
		fi, err := os.Stat(r)
		if err != nil {
			return fmt.Errorf("%s cannot be read (%v): give directories that hold evaluations", r, errors.Unwrap(err))
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory: give the directories that hold evaluations (their --report directories, or a parent of them)", r)
		}
	}
	return nil
}

// scan walks the roots.
func (s *scanner) scan() ([]found, []Problem) {
	var out []found
	var problems []Problem
	seen := map[string]bool{}
	live := map[string]bool{}
	s.changed = false
	for _, root := range s.roots {
		s.walk(root, 0, seen, live, &out, &problems)
	}
	for p := range s.files {
		if !live[p] {
			delete(s.files, p)
			s.changed = true
		}
	}
	for d := range s.peeked {
		if !live[d] {
			delete(s.peeked, d)
			s.changed = true
		}
	}
	var dirs strings.Builder
	for _, f := range out {
		fmt.Fprintf(&dirs, "%s %t %d\n", f.dir, f.running, len(f.runs))
	}
	if dirs.String() != s.last {
		s.last, s.changed = dirs.String(), true
	}
	return out, problems
}

func (s *scanner) walk(dir string, depth int, seen, live map[string]bool, out *[]found, problems *[]Problem) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if depth == 0 {
			*problems = append(*problems, Problem{dir, fmt.Sprintf("cannot be read (%v): the directory was removed or is not readable", errors.Unwrap(err))})
		}
		return
	}
	names := map[string]fs.DirEntry{}
	for _, e := range ents {
		names[e.Name()] = e
	}
	if _, isBundle := names["manifest.json"]; isBundle && depth > 0 {
		return // a run's bundle, not an evaluation
	}
	_, hasReport := names["report.json"]
	_, hasShard := names[consistency.ShardFileName]
	_, hasProgress := names[consistency.ProgressFileName]
	isEval := hasReport || hasShard || hasProgress
	if isEval {
		if f, ok := s.evaluation(dir, names, live, problems); ok && !seen[dir] {
			seen[dir] = true
			*out = append(*out, f)
		}
	}
	if depth >= maxDepth {
		return
	}
	for _, e := range ents {
		// No link is followed, nothing hidden is read, and an
		// evaluation's runs are its bundles.
		if !e.IsDir() || e.Type()&fs.ModeSymlink != 0 || strings.HasPrefix(e.Name(), ".") || (isEval && e.Name() == "runs") {
			continue
		}
		s.walk(filepath.Join(dir, e.Name()), depth+1, seen, live, out, problems)
	}
}

// evaluation reads what dir holds.
func (s *scanner) evaluation(dir string, names map[string]fs.DirEntry, live map[string]bool, problems *[]Problem) (found, bool) {
	f := found{dir: dir}
	var reportTime, progressTime time.Time
	if _, ok := names["report.json"]; ok {
		p := filepath.Join(dir, "report.json")
		live[p] = true
		v, mt, err := s.read(p, maxReportBytes, parseReport)
		if err != nil {
			*problems = append(*problems, Problem{p, err.Error()})
		} else {
			f.report, reportTime = v.(*consistency.Report), mt
		}
	}
	if _, ok := names[consistency.ShardFileName]; ok && f.report == nil {
		p := filepath.Join(dir, consistency.ShardFileName)
		live[p] = true
		v, mt, err := s.read(p, maxReportBytes, parseShard)
		if err != nil {
			*problems = append(*problems, Problem{p, err.Error()})
		} else {
			f.shard, reportTime = v.(*consistency.ShardFile), mt
		}
	}
	if _, ok := names[consistency.ProgressFileName]; ok {
		p := filepath.Join(dir, consistency.ProgressFileName)
		live[p] = true
		v, mt, err := s.read(p, maxProgressBytes, parseProgress)
		if err != nil {
			*problems = append(*problems, Problem{p, err.Error()})
		} else {
			f.progress, progressTime = v.(*consistency.Progress), mt
		}
	}
	// evaluation.json is written when an evaluation starts, the report or
	// shard file when it ends: a newer evaluation.json is a running (or
	// stopped) evaluation.
	if f.progress != nil && (f.report == nil && f.shard == nil || progressTime.After(reportTime)) {
		f.running = true
		live[dir] = true
		f.runs = s.peek(dir)
	}
	return f, f.report != nil || f.shard != nil || f.running
}

// peek reads the finished runs of the running evaluation in dir.
func (s *scanner) peek(dir string) []consistency.RunReport {
	known := s.peeked[dir]
	if known == nil {
		known = map[string]consistency.RunReport{}
		s.peeked[dir] = known
	}
	ents, err := os.ReadDir(filepath.Join(dir, "runs"))
	if err != nil {
		return nil
	}
	var runs []consistency.RunReport
	for _, e := range ents {
		if !e.IsDir() || e.Type()&fs.ModeSymlink != 0 {
			continue
		}
		i, err := strconv.Atoi(e.Name())
		if err != nil || i < 1 {
			continue
		}
		r, ok := known[e.Name()]
		if !ok {
			// A bundle is published (renamed into place) only when
			// complete: one without manifest.json is not there yet.
			r, err = consistency.PeekRun(filepath.Join(dir, "runs", e.Name()), i)
			if err != nil {
				continue
			}
			known[e.Name()] = r
			s.changed = true
		}
		runs = append(runs, r)
	}
	slices.SortFunc(runs, func(a, b consistency.RunReport) int { return a.Index - b.Index })
	return runs
}

// read parses the file p with parse, again only when its size or
// modification time changed.
func (s *scanner) read(p string, limit int64, parse func(string, []byte) (any, error)) (any, time.Time, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("cannot be read (%v)", errors.Unwrap(err))
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, time.Time{}, errors.New("is a symbolic link: the dashboard follows no link inside the directories it shows; put the file itself there")
	}
	if c, ok := s.files[p]; ok && c.size == fi.Size() && c.mtime.Equal(fi.ModTime()) {
		return c.value, c.mtime, c.err
	}
	data, err := readRegular(p, limit)
	var v any
	if err == nil {
		v, err = parse(filepath.Base(p), data)
	}
	s.files[p] = cached{size: fi.Size(), mtime: fi.ModTime(), value: v, err: err}
	s.changed = true
	return v, fi.ModTime(), err
}

// readRegular reads the regular file p, following no link, up to limit
// bytes.
func readRegular(p string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot be read (%v)", errors.Unwrap(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, fmt.Errorf("cannot be read (%v)", err)
	case !fi.Mode().IsRegular():
		return nil, errors.New("is not a regular file: remove it, or move it out of the directories the dashboard shows")
	case fi.Size() > limit:
		return nil, fmt.Errorf("is larger than %d MB, more than any evaluation writes: it is not one of dal's files; move it out of the directories the dashboard shows", limit>>20)
	}
	return io.ReadAll(io.LimitReader(f, limit))
}

func jsonProblem(name string, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("is not valid JSON (%v): it was cut short or modified; run the evaluation (or the merge) again to rewrite it", err)
	}
	return fmt.Errorf("is not a %s dal writes (%v): it was modified or written by another tool", name, err)
}

// parseReport reads report.json: a consistency report of a format this
// dal reads, whose runs are consistent with its counts.
func parseReport(name string, data []byte) (any, error) {
	var r consistency.Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, jsonProblem(name, err)
	}
	// One decoding: what another tool's JSON lacks is left zero.
	for _, f := range []struct {
		field   string
		missing bool
	}{{"schema_version", r.SchemaVersion == 0}, {"consensus", r.Consensus.Strategy == ""}, {"individual_runs", r.IndividualRuns == nil}} {
		if f.missing {
			return nil, fmt.Errorf("is not a dal consistency report (it has no %s): another tool wrote it; move it out of the directories the dashboard shows", f.field)
		}
	}
	switch {
	case r.SchemaVersion < 1 || r.SchemaVersion > consistency.SchemaVersion:
		return nil, fmt.Errorf("has report format %d, this dal reads 1 to %d: open it with a newer dal-exec dashboard", r.SchemaVersion, consistency.SchemaVersion)
	case r.Runs != len(r.IndividualRuns):
		return nil, fmt.Errorf("says %d runs but lists %d: it was modified; run the evaluation again to rewrite it", r.Runs, len(r.IndividualRuns))
	case r.Variance.SuccessRate.N != len(r.IndividualRuns):
		return nil, fmt.Errorf("has a success rate over %d runs but lists %d: it was modified; run the evaluation again to rewrite it", r.Variance.SuccessRate.N, len(r.IndividualRuns))
	}
	for k, run := range r.IndividualRuns {
		if run.Index < 1 || run.DurationMS < 0 || run.Tokens < 0 || (run.Score != nil && !(*run.Score >= 0 && *run.Score <= 1)) {
			return nil, fmt.Errorf("has an impossible run (entry %d: index %d, duration %d ms, %d tokens): it was modified; run the evaluation again to rewrite it", k+1, run.Index, run.DurationMS, run.Tokens)
		}
	}
	return &r, nil
}

func parseShard(name string, data []byte) (any, error) {
	var f consistency.ShardFile
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&f); err != nil {
		return nil, jsonProblem(name, err)
	}
	if f.Shard.Count < 1 || f.Shard.Index < 1 || f.Shard.Index > f.Shard.Count || len(f.Evaluation.Seeds) == 0 {
		return nil, errors.New("names no valid shard of an evaluation: it was modified or written by another tool; run the shard again")
	}
	return &f, nil
}

func parseProgress(name string, data []byte) (any, error) {
	var p consistency.Progress
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, jsonProblem(name, err)
	}
	if p.SchemaVersion != 1 || p.EvaluationID == "" || p.Runs < 1 {
		return nil, errors.New("is not an evaluation.json this dal writes (no evaluation_id or runs): it was modified or written by another dal; run the evaluation again")
	}
	return &p, nil
}
