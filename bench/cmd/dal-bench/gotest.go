package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/dal-runtime/dal/bench"
)

// benchRuns is what a Go benchmark binary printed: for each benchmark
// (its name without the -GOMAXPROCS suffix), one map of unit to value per
// run, "ns/op" included.
type benchRuns map[string][]map[string]float64

// values returns one benchmark's figure in unit over its runs; nil when
// the benchmark did not print it.
func (r benchRuns) values(name, unit string) bench.Values {
	var v bench.Values
	for _, run := range r[name] {
		if x, ok := run[unit]; ok {
			v = append(v, x)
		}
	}
	return v
}

var procsSuffix = regexp.MustCompile(`-\d+$`)

// parseBench reads `go test -bench` output: "BenchmarkX/sub-2  N  V unit  V unit ...".
func parseBench(out []byte) benchRuns {
	r := benchRuns{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		run := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				run[f[i+1]] = v
			}
		}
		name := procsSuffix.ReplaceAllString(f[0], "")
		r[name] = append(r[name], run)
	}
	return r
}

// testBinary compiles the tests of pkg (a ./path) into dir, once per run
// of dal-bench, so several benchmark invocations share one build.
func testBinary(dir, pkg string) (string, error) {
	bin := filepath.Join(dir, strings.ReplaceAll(strings.Trim(pkg, "./"), "/", "-")+".test")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	cmd := exec.Command("go", "test", "-c", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("the tests of %s do not build: %s", pkg, firstLines(out, 3))
	}
	return bin, nil
}

// runBench runs the benchmarks of a compiled test binary that match
// pattern, in the package's directory (tests read testdata/ from there).
// A benchmark that fails is an error carrying the end of its output; the
// runs printed before it are returned too.
func runBench(bin, pkg, pattern, benchtime string, count int) (benchRuns, error) {
	cmd := exec.Command(bin, "-test.run", "^$", "-test.bench", pattern, "-test.benchtime", benchtime,
		"-test.count", strconv.Itoa(count))
	cmd.Dir = pkg
	out, err := cmd.CombinedOutput()
	runs := parseBench(out)
	if err != nil {
		return runs, fmt.Errorf("%s -bench %s: %v: %s", pkg, pattern, err, lastLines(out, 4))
	}
	if len(runs) == 0 {
		return runs, fmt.Errorf("%s -bench %s printed no results: %s", pkg, pattern, lastLines(out, 4))
	}
	return runs, nil
}

func firstLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[:min(n, len(lines))], " / ")
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " / ")
}

// notMeasured is the figure for something that could not be measured.
func notMeasured(name string, why any) bench.Figure {
	return bench.Figure{Name: name, Value: fmt.Sprintf("not measured: %v", why)}
}

// packages names the Debian package that provides each optional tool.
var packages = map[string]string{
	"faketime": "faketime", "libfaketime": "faketime", "strace": "strace", "promtool": "prometheus",
	"node": "nodejs", "python3": "python3", "dd": "coreutils", "taskset": "util-linux",
}

// missingTool is the figure for a comparison whose optional tool is not
// installed: "not measured: install X", never a number.
func missingTool(name, tool string) bench.Figure {
	pkg := packages[tool]
	if pkg == "" {
		pkg = tool
	}
	return bench.Figure{Name: name, Value: fmt.Sprintf("not measured: install %s (apt-get install %s)", tool, pkg), Install: tool}
}
