package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkToolsUnderTheLayer: the tools coding agents run, timed as a
// user sees them (wall time of the whole command, start-up included)
// bare, under `dal-exec run --mode default` (no syscall layer) and under
// `dal-exec run --mode strict`, interleaved in each round so that the
// machine's load falls on all three alike. It reports the medians
// (bare-ms, default-ms, strict-ms) and the strict run's ratios to the
// other two (x-default, x-bare): issue 37's targets are 1.3x default for
// find, grep -r and git status, and 1.5x for python3's start-up.
//
//   - find: `find /usr/lib -type f | wc -l`, a stat of every file;
//   - grep: `grep -rl zstd /usr/share/doc`, a stat and a read of every file;
//   - git_status: `git status --porcelain` in a repository of 10,000
//     committed files in 100 directories, made for the benchmark;
//   - python: `python3 -c pass`, the interpreter's start-up.
func BenchmarkToolsUnderTheLayer(b *testing.B) {
	repo := tenThousandFileRepo(b)
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		python = "python3"
	}
	for _, w := range []struct {
		name string
		dir  string
		argv []string
	}{
		{"find", b.TempDir(), []string{"sh", "-c", "find /usr/lib -type f | wc -l"}},
		{"grep", b.TempDir(), []string{"sh", "-c", "grep -rl zstd /usr/share/doc | wc -l"}},
		{"git_status", repo, []string{"git", "status", "--porcelain"}},
		{"python", b.TempDir(), []string{python, "-c", "pass"}},
	} {
		b.Run(w.name, func(b *testing.B) {
			var bare, plain, strict []time.Duration
			for b.Loop() {
				bare = append(bare, timedTool(b, w.dir, w.argv))
				plain = append(plain, timedTool(b, w.dir, append([]string{bin.exec, "run", "--mode", "default", "--"}, w.argv...)))
				strict = append(strict, timedTool(b, w.dir, append([]string{bin.exec, "run", "--mode", "strict", "--"}, w.argv...)))
			}
			mb, mp, ms := median(bare), median(plain), median(strict)
			b.ReportMetric(float64(mb)/1e6, "bare-ms")
			b.ReportMetric(float64(mp)/1e6, "default-ms")
			b.ReportMetric(float64(ms)/1e6, "strict-ms")
			b.ReportMetric(float64(ms)/float64(mp), "x-default")
			b.ReportMetric(float64(ms)/float64(mb), "x-bare")
		})
	}
}

// timedTool runs argv in dir and returns its wall time; a failure ends
// the benchmark.
func timedTool(b *testing.B, dir string, argv []string) time.Duration {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		b.Fatalf("%v: %v\n%s", argv, err, tail(string(out), 20))
	}
	return d
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// tenThousandFileRepo makes a git repository of 10,000 committed files,
// 100 in each of 100 directories, and returns its path.
func tenThousandFileRepo(b *testing.B) string {
	repo := b.TempDir()
	for d := range 100 {
		dir := filepath.Join(repo, fmt.Sprintf("d%02d", d))
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 100 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d.txt", f)), fmt.Appendf(nil, "%d %d\n", d, f), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, argv := range [][]string{
		{"git", "init", "-q"},
		// 10,000 loose objects would start an automatic gc in the
		// background, still writing into .git while the benchmark runs
		// (and when its directory is removed).
		{"git", "config", "gc.auto", "0"},
		{"git", "config", "maintenance.auto", "false"},
		{"git", "add", "."},
		{"git", "-c", "user.name=dal", "-c", "user.email=dal@example.com", "commit", "-q", "-m", "10,000 files"},
	} {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %v\n%s", argv, err, out)
		}
	}
	return repo
}
