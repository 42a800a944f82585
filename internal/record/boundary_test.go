package record

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/dal-runtime/dal/internal/boundary"
	"github.com/dal-runtime/dal/internal/golden"
	"github.com/dal-runtime/dal/internal/runner"
	"github.com/dal-runtime/dal/internal/sysvirt"
	"github.com/dal-runtime/dal/internal/wire"
)

// TestBoundaryGolden pins syscalls.json byte for byte (as the bundle
// writer encodes it) for a strict recording whose syscall layer counted
// something of every kind, escapes included, and for one with the layer
// off and nothing traced.
func TestBoundaryGolden(t *testing.T) {
	layer := &sysvirt.Counts{
		Processes: 3,
		Unpatched: 1,
		Served:    map[sysvirt.Category]int64{"clock": 120, "sleep": 4, "wait": 2, "random": 7, "at_random": 3, "deadline": 1, "timer": 5, "file_times": 9},
		Real:      map[sysvirt.Reason]int64{"cpu_clock": 2, "sleep_threaded": 1, "wait_outstanding": 1, "other_clock": 1, "clock_adjust": 1},
		Escapes:   map[sysvirt.Category]int64{"clock": 1, "sleep": 2, "timer": 1, "random": 1},
		Calls:     map[string]int64{"clock_gettime": 40, "getrandom": 7, "newfstatat": 9, "nanosleep": 4},
		Injected:  map[string]int64{"mmap": 3, "mprotect": 3},
		Notes:     []string{"a process dal was not tracing made a clock or random call: it got a real value"},
	}
	cases := []struct {
		name string
		in   boundaryInput
	}{
		{"strict", boundaryInput{
			trace: &runner.Trace{Tracing: true,
				Syscalls: map[string]uint64{"read": 100, "clock_gettime": 2, "getrandom": 1, "openat": 12, "execve": 3, "mmap": 20, "mprotect": 8},
				Events:   []wire.TraceEvent{{Kind: "exec", PID: 2, Detail: "/usr/bin/python3"}, {Kind: "connect", PID: 2, Detail: "203.0.113.7:443"}}},
			mode:    "strict",
			virt:    layer,
			virtCfg: sysvirt.Config{Clock: true, Random: true, Seed: 1},
		}},
		{"untraced", boundaryInput{mode: "default", trace: &runner.Trace{Reason: "dald could not load its eBPF programs"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.MarshalIndent(newBoundary(c.in), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "testdata/syscalls-"+c.name+".json", append(b, '\n'))
		})
	}
}

// TestSyscallLayerFormatMatchesCounts: syscalls.json's syscall_layer
// (package boundary, a format importing nothing of dal) has every field
// of sysvirt.Counts with the same JSON name, so that a count the layer
// adds cannot be dropped from the file unnoticed.
func TestSyscallLayerFormatMatchesCounts(t *testing.T) {
	t.Parallel()
	fields := func(v any) []string {
		var out []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			f := rt.Field(i)
			out = append(out, f.Name+" "+f.Tag.Get("json")+" "+f.Type.Kind().String())
		}
		return out
	}
	if got, want := fields(boundary.SyscallLayer{}), fields(sysvirt.Counts{}); !reflect.DeepEqual(got, want) {
		t.Fatalf("boundary.SyscallLayer has fields %q, sysvirt.Counts %q: add the new ones to both and to syscallLayer", got, want)
	}
	v := &sysvirt.Counts{Processes: 2, Unpatched: 1, Served: map[sysvirt.Category]int64{sysvirt.Clock: 3},
		Real: map[sysvirt.Reason]int64{sysvirt.CPUClock: 4}, Escapes: map[sysvirt.Category]int64{sysvirt.Stall: 5},
		Calls: map[string]int64{"nanosleep": 6}, Injected: map[string]int64{"mmap": 7}, Notes: []string{"b", "a"}}
	a, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(syscallLayer(v))
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Fatalf("syscall_layer is written\n%s\nnot as sysvirt.Counts\n%s", b, a)
	}
}
