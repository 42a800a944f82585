package runner

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestEnvList(t *testing.T) {
	e := Env{"PATH": "/bin", "A": "x=y", "HOME": ""}
	want := []string{"A=x=y", "HOME=", "PATH=/bin"}
	if got := e.List(); !reflect.DeepEqual(got, want) {
		t.Errorf("List() = %q, want %q (sorted, values whole)", got, want)
	}
	if got := (Env{}).List(); len(got) != 0 {
		t.Errorf("an empty Env lists %q", got)
	}
}

// TestKeep: the agent inherits the allowlist and what --keep-env names
// (a trailing * keeps a prefix), nothing else.
func TestKeep(t *testing.T) {
	parent := []string{
		"PATH=/usr/bin", "HOME=/root", "TERM=xterm", "DAL_SHIM_DEBUG=1",
		"AWS_SECRET_ACCESS_KEY=hunter2", "OPENAI_API_KEY=sk-1", "OPENAI_BASE=https://x",
		"MY_VAR=a=b", "MY_VARIANT=c", "LD_PRELOAD=/evil.so", "noequals",
	}
	cases := []struct {
		kept []string
		want Env
	}{
		{nil, Env{"PATH": "/usr/bin", "HOME": "/root", "TERM": "xterm", "DAL_SHIM_DEBUG": "1"}},
		{[]string{"MY_VAR"}, Env{"PATH": "/usr/bin", "HOME": "/root", "TERM": "xterm", "DAL_SHIM_DEBUG": "1", "MY_VAR": "a=b"}},
		{[]string{"OPENAI_*"}, Env{"PATH": "/usr/bin", "HOME": "/root", "TERM": "xterm", "DAL_SHIM_DEBUG": "1", "OPENAI_API_KEY": "sk-1", "OPENAI_BASE": "https://x"}},
		{[]string{"MY_VAR*", "noequals"}, Env{"PATH": "/usr/bin", "HOME": "/root", "TERM": "xterm", "DAL_SHIM_DEBUG": "1", "MY_VAR": "a=b", "MY_VARIANT": "c"}},
	}
	for _, c := range cases {
		if got := keep(parent, c.kept); !reflect.DeepEqual(got, c.want) {
			t.Errorf("keep(%q) = %v, want %v", c.kept, got, c.want)
		}
	}
	for _, name := range []string{"AWS_SECRET_ACCESS_KEY", "LD_PRELOAD"} {
		if _, ok := keep(parent, nil)[name]; ok {
			t.Errorf("%s passed through without --keep-env", name)
		}
	}
}

func TestAllowlisted(t *testing.T) {
	for _, name := range passEnv {
		if !Allowlisted(name) {
			t.Errorf("%s is on the allowlist but Allowlisted says no", name)
		}
	}
	for _, name := range []string{"LD_PRELOAD", "PATH2", "path", ""} {
		if Allowlisted(name) {
			t.Errorf("Allowlisted(%q) = true", name)
		}
	}
}

// TestGuardRails: the variables of docs/design.md §5 by mode, what the
// spec adds over them, and the shims put first on the paths the user kept.
func TestGuardRails(t *testing.T) {
	sess := session{id: "s1", socket: "/run/dal/dald.sock", clockFile: "/tmp/run/clock.json"}
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, mode := range Modes {
		t.Run(mode, func(t *testing.T) {
			env := Env{"PYTHONPATH": "/user/lib", "NODE_OPTIONS": "--max-old-space-size=100", "PATH": "/bin"}
			spec := &Spec{Mode: mode, Seed: 1<<32 + 7, Epoch: epoch, CPUs: []int{2, 3},
				Env: map[string]string{"HTTPS_PROXY": "http://127.0.0.1:1", "TZ": "Europe/Paris"}}
			names := guardRails(env, spec, sess, "/shim/py", "/shim/node dir/hook.js")
			want := map[string]string{
				"AGENT_DETERMINISTIC":  "1",
				"AGENT_EXECUTION_MODE": mode,
				"AGENT_SEED":           strconv.FormatUint(1<<32+7, 10),
				"AGENT_CLOCK_FILE":     "/tmp/run/clock.json",
				"DAL_SOCKET":           "/run/dal/dald.sock",
				"DAL_SESSION":          "s1",
				"DAL_STREAM":           "0",
				"GOMAXPROCS":           "2",
				"PYTHONHASHSEED":       "7", // the seed mod 2^32
				"SOURCE_DATE_EPOCH":    strconv.FormatInt(epoch.Unix(), 10),
				"LC_ALL":               "C.UTF-8",
				"TZ":                   "Europe/Paris", // the spec's own variables come last
				"HTTPS_PROXY":          "http://127.0.0.1:1",
				"PYTHONPATH":           "/shim/py:/user/lib",
				"NODE_OPTIONS":         `--require "/shim/node dir/hook.js" --max-old-space-size=100`,
				"PATH":                 "/bin",
			}
			if mode == "default" {
				want["AGENT_DETERMINISTIC"] = "0"
			}
			for k, v := range want {
				if env[k] != v {
					t.Errorf("%s=%q, want %q", k, env[k], v)
				}
			}
			if !slices.IsSorted(names) {
				t.Errorf("names not sorted: %q", names)
			}
			for _, k := range names {
				if _, ok := env[k]; !ok {
					t.Errorf("%s reported as set but not in the environment", k)
				}
			}
			if slices.Contains(names, "PATH") {
				t.Error("PATH, which the user kept, is reported as a guard rail")
			}
			if !slices.Contains(names, "HTTPS_PROXY") || !slices.Contains(names, "PYTHONPATH") {
				t.Errorf("names %q miss the spec's variables or the shim paths", names)
			}
		})
	}
}

// TestGuardRailsEmptyPaths: without a user's PYTHONPATH or NODE_OPTIONS
// the shims' are alone, with no stray separator.
func TestGuardRailsEmptyPaths(t *testing.T) {
	env := Env{}
	guardRails(env, &Spec{Mode: "strict"}, session{}, "/shim/py", "/shim/hook.js")
	if env["PYTHONPATH"] != "/shim/py" || env["NODE_OPTIONS"] != "--require /shim/hook.js" {
		t.Errorf("PYTHONPATH=%q NODE_OPTIONS=%q", env["PYTHONPATH"], env["NODE_OPTIONS"])
	}
	if n, err := strconv.Atoi(env["GOMAXPROCS"]); err != nil || n < 1 || n != max(1, hostCPUs()) {
		t.Errorf("unpinned GOMAXPROCS=%q, want the CPUs dal-exec may use (%d)", env["GOMAXPROCS"], hostCPUs())
	}
}

func TestQuoteNodeOpt(t *testing.T) {
	cases := map[string]string{
		"/a/b.js":      "/a/b.js",
		"/a b/c.js":    `"/a b/c.js"`,
		`/a"b/c.js`:    `"/a\"b/c.js"`,
		`/a\b c/d.js`:  `"/a\\b c/d.js"`,
		`/x\"y z/e.js`: `"/x\\\"y z/e.js"`,
	}
	for in, want := range cases {
		if got := quoteNodeOpt(in); got != want {
			t.Errorf("quoteNodeOpt(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestJoinNonEmpty(t *testing.T) {
	if got := joinNonEmpty(":", "", "a", "", "b", ""); got != "a:b" {
		t.Errorf("got %q", got)
	}
	if got := joinNonEmpty(":", "", ""); got != "" {
		t.Errorf("got %q", got)
	}
}

func TestParseCPUs(t *testing.T) {
	good := map[string][]int{
		"0":         {0},
		"3,1":       {1, 3},
		"0-3,6":     {0, 1, 2, 3, 6},
		"2-4,3-5,4": {2, 3, 4, 5},
		"4095":      {4095},
		"all":       nil,
	}
	for in, want := range good {
		got, err := ParseCPUs(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseCPUs(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1", "3-1", "0-4096", "1,,2", "1-", "0x1", "first", " 1"} {
		if got, err := ParseCPUs(in); err == nil || !strings.Contains(err.Error(), "is not like 0, 0-3,6 or all") {
			t.Errorf("ParseCPUs(%q) = %v, %v; want the usage error", in, got, err)
		}
	}
}

// TestCPUsFlag: "first" is the first CPU dal-exec may run on, anything
// else a list.
func TestCPUsFlag(t *testing.T) {
	allowed, err := allowedCPUs()
	if err != nil || len(allowed) == 0 {
		t.Fatalf("allowed CPUs: %v %v", allowed, err)
	}
	got, err := CPUsFlag("first")
	if err != nil || !reflect.DeepEqual(got, allowed[:1]) {
		t.Errorf("CPUsFlag(first) = %v, %v; want %v", got, err, allowed[:1])
	}
	if got, err := CPUsFlag("1-2"); err != nil || !reflect.DeepEqual(got, []int{1, 2}) {
		t.Errorf("CPUsFlag(1-2) = %v, %v", got, err)
	}
	if _, err := CPUsFlag("second"); err == nil {
		t.Error("CPUsFlag(second) accepted")
	}
}
