package runner

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// passEnv is the allowlist of variables an agent inherits from dal-exec's
// environment; everything else is scrubbed unless --keep-env names it.
var passEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "DAL_SHIM_DEBUG"}

// Env is the environment an agent starts with, in a stable order.
type Env map[string]string

// List returns "K=V" pairs sorted by name.
func (e Env) List() []string {
	out := make([]string, 0, len(e))
	for k, v := range e {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// keep copies the allowlisted and kept variables from parent. A kept name
// ending in "*" keeps every variable with that prefix.
func keep(parent []string, kept []string) Env {
	env := Env{}
	want := func(name string) bool {
		for _, k := range append(passEnv, kept...) {
			if k == name || (strings.HasSuffix(k, "*") && strings.HasPrefix(name, strings.TrimSuffix(k, "*"))) {
				return true
			}
		}
		return false
	}
	for _, kv := range parent {
		k, v, ok := strings.Cut(kv, "=")
		if ok && want(k) {
			env[k] = v
		}
	}
	return env
}

// guardRails sets the variables of docs/design.md §5 and the shim hooks. It
// returns the names it set, for env.json.
func guardRails(env Env, spec *Spec, sess session, shimPython, shimNode string) []string {
	deterministic := "1"
	if spec.Mode == "default" {
		deterministic = "0"
	}
	set := map[string]string{
		"AGENT_DETERMINISTIC":     deterministic,
		"AGENT_EXECUTION_MODE":    spec.Mode,
		"AGENT_SEED":              strconv.FormatUint(spec.Seed, 10),
		"AGENT_CLOCK_FILE":        sess.clockFile,
		"DAL_SOCKET":              sess.socket,
		"DAL_SESSION":             sess.id,
		"DAL_STREAM":              "0",
		"GOMAXPROCS":              strconv.Itoa(max(1, len(spec.CPUs))),
		"PYTHONHASHSEED":          strconv.FormatUint(spec.Seed%4294967296, 10),
		"PYTHONDONTWRITEBYTECODE": "1",
		"UV_THREADPOOL_SIZE":      "1",
		"JAVA_TOOL_OPTIONS":       "-XX:ActiveProcessorCount=1",
		"OMP_NUM_THREADS":         "1",
		"OPENBLAS_NUM_THREADS":    "1",
		"MKL_NUM_THREADS":         "1",
		"TZ":                      "UTC",
		"LC_ALL":                  "C.UTF-8",
		"SOURCE_DATE_EPOCH":       strconv.FormatInt(spec.Epoch.Unix(), 10),
	}
	if len(spec.CPUs) == 0 {
		set["GOMAXPROCS"] = strconv.Itoa(max(1, hostCPUs()))
	}
	for k, v := range spec.Env {
		set[k] = v
	}
	// Prepend the shims to whatever the user kept.
	set["PYTHONPATH"] = joinNonEmpty(string(filepath.ListSeparator), shimPython, env["PYTHONPATH"])
	set["NODE_OPTIONS"] = joinNonEmpty(" ", "--require "+quoteNodeOpt(shimNode), env["NODE_OPTIONS"])
	names := make([]string, 0, len(set))
	for k, v := range set {
		env[k] = v
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}

// quoteNodeOpt quotes a path for NODE_OPTIONS, which splits on spaces and
// honours double quotes.
func quoteNodeOpt(p string) string {
	if !strings.ContainsAny(p, " \"\\") {
		return p
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(p) + `"`
}

func hostCPUs() int {
	n, err := allowedCPUs()
	if err != nil {
		return 1
	}
	return len(n)
}

// ParseCPUs parses a CPU list like "0", "0-3,6" or "all" (nil: no pinning).
func ParseCPUs(text string) ([]int, error) {
	if text == "all" {
		return nil, nil
	}
	seen := map[int]bool{}
	var out []int
	for _, part := range strings.Split(text, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 0 || b < a || b > 4095 {
			return nil, fmt.Errorf("cpu list %q is not like 0, 0-3,6 or all", text)
		}
		for c := a; c <= b; c++ {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	sort.Ints(out)
	return out, nil
}

// CPUsFlag is the CPUs --cpus (or DAL_CPUS) names: "first" the first CPU
// dal-exec may run on (FirstCPU), else a list for ParseCPUs.
func CPUsFlag(text string) ([]int, error) {
	if text == "first" {
		return FirstCPU()
	}
	return ParseCPUs(text)
}

// FirstCPU returns the first CPU dal-exec may run on, the default pin.
func FirstCPU() ([]int, error) {
	cpus, err := allowedCPUs()
	if err != nil || len(cpus) == 0 {
		return nil, fmt.Errorf("read the allowed CPUs: %v", err)
	}
	return cpus[:1], nil
}

// Allowlisted reports whether name is passed through to every agent.
func Allowlisted(name string) bool {
	for _, k := range passEnv {
		if k == name {
			return true
		}
	}
	return false
}
