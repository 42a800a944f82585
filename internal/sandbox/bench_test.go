package sandbox

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// Benchmarks, reported against a plain copy of the same files measured in
// the same run:
//
//	go test ./internal/sandbox -run '^$' -bench . -benchtime 30x

// benchWorkspace makes a workspace of n files of size bytes.
func benchWorkspace(b *testing.B, n, size int) Config {
	b.Helper()
	cfg := newConfig(b, nil)
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i*7 + i>>8)
	}
	for i := range n {
		d := filepath.Join(cfg.Workspace, fmt.Sprintf("d%02d", i%32))
		os.MkdirAll(d, 0o755)
		buf[0] = byte(i)
		buf[1] = byte(i >> 8)
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d", i)), buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return cfg
}

// plainCopy copies every regular file under src to dst: the baseline.
func plainCopy(b *testing.B, src, dst string) time.Duration {
	b.Helper()
	start := time.Now()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		os.MkdirAll(filepath.Dir(out), 0o755)
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, in)
		f.Close()
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkCaptureExport: capture and export a run that created 500 files
// and modified 500.
func BenchmarkCaptureExport(b *testing.B) {
	cfg := benchWorkspace(b, 500, 4096)
	r := run(b, cfg, `for d in d*; do for f in $d/*; do echo more >> $f; echo new > $f.new; done; done`)
	if r.code != 0 {
		b.Fatal(r.stderr)
	}
	base := plainCopy(b, Upper(cfg), b.TempDir())
	var total time.Duration
	b.ResetTimer()
	for b.Loop() {
		out := b.TempDir()
		start := time.Now()
		cs, err := Capture(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if len(cs) != 1000 {
			b.Fatalf("%d changes, want 1000", len(cs))
		}
		if err := Export(cfg, cs, filepath.Join(out, "diff"), filepath.Join(out, "pre")); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total)/float64(b.N)/float64(base), "x-plain-copy")
}

// benchRevert records a run of script over cfg, then measures Revert
// (after an untimed Apply) and reports percentiles.
func benchRevert(b *testing.B, cfg Config, script string, want int) {
	r := run(b, cfg, script)
	if r.code != 0 {
		b.Fatal(r.stderr)
	}
	cs, err := Capture(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if len(cs) != want {
		b.Fatalf("%d changes, want %d", len(cs), want)
	}
	bundle := b.TempDir()
	diffDir, preDir := filepath.Join(bundle, "diff"), filepath.Join(bundle, "pre")
	if err := Export(cfg, cs, diffDir, preDir); err != nil {
		b.Fatal(err)
	}
	base := plainCopy(b, filepath.Join(preDir, "files"), b.TempDir())
	var times []time.Duration
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		if err := Apply(cfg.Workspace, diffDir, cs); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		if err := Revert(cfg.Workspace, preDir, cs); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(start))
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	pct := func(p float64) time.Duration { return times[min(len(times)-1, int(p*float64(len(times))))] }
	b.ReportMetric(float64(pct(0.50))/1e6, "p50-ms")
	b.ReportMetric(float64(pct(0.95))/1e6, "p95-ms")
	b.ReportMetric(float64(pct(0.50))/float64(base), "p50-x-plain-copy")
}

// BenchmarkRevert1000: 1,000 modified 4 KiB files.
func BenchmarkRevert1000(b *testing.B) {
	benchRevert(b, benchWorkspace(b, 1000, 4096), `for f in d*/*; do echo more >> $f; done`, 1000)
}

// BenchmarkRevertLargeWorkspace: 1 GiB in 1,024 files, 10 of them
// modified.
func BenchmarkRevertLargeWorkspace(b *testing.B) {
	benchRevert(b, benchWorkspace(b, 1024, 1<<20), `for f in d0[0-9]/f0000[0-9]; do echo more >> $f; done`, 10)
}

// BenchmarkTreeHashLarge: hashing a 1 GiB workspace (what a replay's state
// check costs), against a plain read of it.
func BenchmarkTreeHashLarge(b *testing.B) {
	cfg := benchWorkspace(b, 1024, 1<<20)
	start := time.Now()
	filepath.WalkDir(cfg.Workspace, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			f, _ := os.Open(p)
			io.Copy(io.Discard, f)
			f.Close()
		}
		return nil
	})
	base := time.Since(start)
	var total time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		if _, err := TreeHash(cfg.Workspace); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total)/float64(b.N)/float64(base), "x-plain-read")
}
