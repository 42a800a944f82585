package consistency

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/consistency/consensus"
)

// BenchmarkAnalyse10kRecordedRuns is the issue's "analysis of 10,000
// recorded runs": Evaluate over 10,000 runs already recorded (each a bundle
// directory on disk, kept from an earlier evaluation), so it reads every
// bundle's env.json, manifest and stdout, computes consensus, variance and
// reliability, and writes report.json, report.md and report.html.
func BenchmarkAnalyse10kRecordedRuns(b *testing.B) {
	const n = 10000
	agent := func(i int, seed uint64) (int, string, int64, int64) {
		exit := 0
		if seed%5 == 0 {
			exit = 1
		}
		return exit, []string{"a\n", "b\n"}[i%7/6], 900 + int64(seed%200), 1500 + int64(seed%300)
	}
	o := Options{Dir: b.TempDir(), Command: []string{"agent"}, Mode: "strict", Seeds: Seeds(7, n),
		Strategy: consensus.Majority, Record: fakeRecorder(agent, nil), Parallel: 4}
	if _, err := Evaluate(context.Background(), o); err != nil {
		b.Fatal(err)
	}
	o.Record = func(context.Context, RunSpec) error { return errors.New("a kept run was recorded again") }
	defer reportCPU(b)()
	for b.Loop() {
		rep, err := Evaluate(context.Background(), o)
		if err != nil {
			b.Fatal(err)
		}
		if rep.Runs != n {
			b.Fatalf("%d runs", rep.Runs)
		}
	}
}

// BenchmarkMerge10kRunsFrom10Shards is the issue's "merge of 10,000 runs
// from 10 shards": Merge of 10 shard directories of 1,000 signed bundles
// each (every shard.json verified, every bundle opened and verified,
// checked against its shard's record, linked into the output) and the
// report written. Its baseline, measured in the same run, is "open":
// bundle.Open (signature and file hashes) of the same 10,000 bundles one
// after the other, which merge does on every CPU.
//
// Each merge writes a new directory and the outputs are removed only at
// the end: removing 10,000 links between merges would make the next
// merge's links slow to create on a filesystem that does not reuse an
// inode for seconds after it is freed (ext4 without a journal scans past
// them), which is the benchmark measuring itself.
func BenchmarkMerge10kRunsFrom10Shards(b *testing.B) {
	const n, k = 10000, 10
	agent := mixedAgent
	root := b.TempDir()
	var dirs []string
	for s := 1; s <= k; s++ {
		dir := filepath.Join(root, fmt.Sprintf("shard%d", s))
		o := evalOptions(dir, n, agent, defaultEnv)
		o.Score, o.Parallel, o.Shard = "", 8, Shard{Index: s, Count: k}
		if _, err := Evaluate(context.Background(), o); err != nil {
			b.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	b.Run("open", func(b *testing.B) {
		for b.Loop() {
			for _, d := range dirs {
				runs, _ := filepath.Glob(filepath.Join(d, "runs", "*"))
				for _, r := range runs {
					bb, err := bundle.Open(r, bundle.OpenOptions{})
					if err != nil {
						b.Fatal(err)
					}
					bb.Close()
				}
			}
		}
	})
	i := 0 // across calls of the sub-benchmark: each merge needs a new directory
	b.Run("merge", func(b *testing.B) {
		defer reportCPU(b)()
		for b.Loop() {
			i++
			out := filepath.Join(root, fmt.Sprintf("merged%d", i))
			rep, err := Merge(context.Background(), dirs, out, MergeOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if rep.Runs != n {
				b.Fatalf("%d runs", rep.Runs)
			}
		}
	})
}

// reportCPU reports the process's CPU time (user + system) per operation
// as cpu-s/op when the returned function runs: on a shared machine wall
// time depends on the other processes, CPU time much less.
func reportCPU(b *testing.B) func() {
	var before syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	return func() {
		var after syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &after)
		cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
		b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	}
}
