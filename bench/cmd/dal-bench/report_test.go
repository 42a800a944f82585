package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dal-runtime/dal/bench"
	"github.com/dal-runtime/dal/internal/golden"
)

// fixture is a report's input: figures of every kind (a ratio with its
// spread, a throughput, a missing tool, a target) and fidelity runs, one
// of them drifted.
func fixture() ([]bench.Figure, machine) {
	figs := []bench.Figure{
		{Name: "process start: true", Value: "+6.6 ms", Ratio: 10.5, RatioMin: 9.8, RatioMax: 12.1, Repeats: 25, Cost: bench.CostTime,
			Baseline: "bare command", Target: "under 15 ms added", Verdict: "meets", Detail: "n=25"},
		{Name: "node Date.now: dal shim vs libfaketime", Value: "dal 2.2 ns, libfaketime 72.5 ns", Ratio: 0.03, RatioMin: 0.029, RatioMax: 0.05, Repeats: 3,
			Cost: bench.CostTime, Baseline: "libfaketime 72.5 ns"},
		{Name: "network capture: 100 MB download", Value: "0.80x direct throughput", Ratio: 0.8, RatioMin: 0.7, RatioMax: 1.1, Repeats: 3,
			Cost: bench.CostRate, Baseline: "direct download 2669 MB/s"},
		{Name: "eBPF: kernel map memory", Value: "6.8 MiB", Ratio: 1.93, Baseline: "empty maps"},
		missingTool("syscall tracing: dd bs=1 under strace -f vs dal-exec run", "strace"),
		notMeasured("eBPF boundary tracing", `needs root "and" BTF`),
	}
	fidelityRuns = []fidelityRun{
		{Agent: "python", Seed: 7, Exact: true, Fidelity: 1, Coverage: 1, RecordS: 0.3, ReplayS: 0.2, RevertS: 0.01, RestoreS: 0, Reverted: true, BundleBytes: 15470},
		{Agent: "python", Seed: 8, Exact: true, Fidelity: 1, Coverage: 1, RecordS: 0.4, ReplayS: 0.2, RevertS: 0.01, RestoreS: 0, Reverted: true, BundleBytes: 15466},
		{Agent: "llm", Seed: 9, Exact: false, Fidelity: 0.29, Drifted: []string{"stdout", "network"}, Coverage: -1, CoverageWhy: "not observed: no BTF",
			RecordS: 0.3, ReplayS: 0.1, RevertS: 0.01, RestoreS: -1, Reverted: true, BundleBytes: 39267},
	}
	fidelityAbout = map[string]string{"python": "examples/python/agent.py", "llm": "e2e/testdata/llm_agent_urllib.py"}
	*seeds = 2
	clockRows = []clockRow{{"node", "Date.now", "faketime", bench.Values{72.3, 72.5, 73.1}}, {"node", "Date.now", "dal", bench.Values{2.1, 2.2, 4}}}
	return figs, machine{Date: "2026-01-02 03:04 UTC", CPU: "Test CPU", CPUs: 2, Kernel: "6.1.0", KernelBuild: "#1 SMP", OS: "Debian 12",
		Memory: "4.0 GiB RAM", Virtual: "a virtual machine", Go: "go1.26", Tools: []string{"python3 3.11.7", "strace not installed"}}
}

// The report is golden: the aggregate and per-run fidelity tables, the
// "where dal is slower" list (a ratio above 1 for a time, below 1 for a
// throughput, with the noise said), the missing tools and the comparisons.
// Not parallel: the report reads the run's globals.
func TestMarkdownGolden(t *testing.T) {
	figs, m := fixture()
	got := markdown(figs, m, 95*time.Second, "ok", true)
	golden.Check(t, filepath.Join("testdata", "report.golden.md"), []byte(got))
	if !strings.Contains(got, "not measured: install strace (apt-get install strace)") {
		t.Error("the missing strace is not reported as \"not measured: install strace\"")
	}
	if !strings.Contains(got, "FAILED: 2 of 3 replays exact") {
		t.Error("a drifted replay is not reported as a failure")
	}
	readme := markdown(figs, m, 95*time.Second, "ok", false)
	if strings.Contains(readme, "### Per-run outcomes") || !strings.Contains(readme, "bench/out/report.md") {
		t.Error("the README's section should leave the per-run table out and point to bench/out/report.md")
	}
	if n := inexactReplays(); n != 1 {
		t.Errorf("inexactReplays() = %d, want 1", n)
	}
}

// The Prometheus textfile is golden and passes promtool check metrics.
func TestPromGolden(t *testing.T) {
	figs, m := fixture()
	text := promText(figs, m, 95*time.Second)
	golden.Check(t, filepath.Join("testdata", "bench.golden.prom"), text)
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is needed to check the textfile: apt-get install prometheus")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
	if got := checkProm(text); got != "ok" {
		t.Errorf("checkProm = %q, want ok", got)
	}
	if got := checkProm([]byte("bad metric{\n")); !strings.HasPrefix(got, "fails") {
		t.Errorf("checkProm of a broken textfile = %q, want fails: ...", got)
	}
}

func TestSumMetric(t *testing.T) {
	t.Parallel()
	text := []byte("# HELP x\ndal_syscalls_total{category=\"clock\"} 2\ndal_syscalls_total{category=\"other\"} 5e3\ndal_syscalls_totally 9\nother 4\n")
	if got := sumMetric(text, "dal_syscalls_total"); got != 5002 {
		t.Errorf("sumMetric = %v, want 5002", got)
	}
}

// DAL_BENCH_HIDE hides an optional tool: what a machine without it reports.
func TestHiddenTools(t *testing.T) {
	t.Setenv("DAL_BENCH_HIDE", "strace,faketime")
	if _, err := lookTool("strace"); err == nil {
		t.Error("lookTool(strace) found a hidden tool")
	}
	if _, err := libfaketime(); err == nil {
		t.Error("libfaketime() found a hidden library")
	}
	if _, err := lookTool("sh"); err != nil {
		t.Errorf("lookTool(sh) = %v; only the listed tools are hidden", err)
	}
	t.Setenv("DAL_BENCH_HIDE", "")
	t.Setenv("DAL_BENCH_LIBFAKETIME", filepath.Join(t.TempDir(), "missing.so"))
	if _, err := libfaketime(); err == nil {
		t.Error("libfaketime() accepted a DAL_BENCH_LIBFAKETIME that does not exist")
	}
}

func TestTreeHash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	before, err := makeWorkspace(dir, map[string]string{"a.txt": "1\n", "b.txt": "2\n"})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("changed\n"), 0o644)
	if after, _ := treeHash(dir); after == before {
		t.Error("treeHash did not change with a file's content")
	}
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("1\n"), 0o644)
	if after, _ := treeHash(dir); after != before {
		t.Error("treeHash differs for the same tree")
	}
	os.Chmod(filepath.Join(dir, "b.txt"), 0o600)
	if after, _ := treeHash(dir); after == before {
		t.Error("treeHash did not change with a file's mode")
	}
}
