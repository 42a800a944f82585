package runenv

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/format/fsdiff"
	"github.com/dal-runtime/dal/internal/golden"
)

// TestEnvJSONGolden: env.json's bytes, every field set and none (the
// golden files were written by the types' earlier home, package record).
func TestEnvJSONGolden(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	e := Env{Version: Version, Command: []string{"python3", "agent.py"}, Cwd: ".", Workspace: "/w", Mode: "strict",
		Seed: 42, Epoch: at, QuantumNS: 1000, CPUs: []int{0}, Timeout: "1m0s",
		GuardRails: map[string]string{"DAL_SEED": "42"}, Inherited: map[string]string{"PATH": "/usr/bin"},
		Kept: map[string]string{"OLD": "sha256:00"}, KeptValues: map[string]string{"LANG": "C"}, Secrets: []string{"API_KEY"},
		Scrubbed: []string{"network.har"}, Host: Host{Hostname: "h", Kernel: "6.1", Arch: "amd64", CPUs: 2},
		Runtimes: map[string]string{"python3": "Python 3.11"}, DalVersion: "0.1.0", StartedAt: at, DurationMS: 1234,
		ExitCode: 3, TimedOut: true, SelfContained: true, Applied: true,
		DeniedWrites: []DeniedWrite{{Op: "openat", Path: "/etc/x"}},
		Uncaptured:   []fsdiff.Uncaptured{{Path: "fif\xf0", Kind: "fifo"}},
		Network: &Network{Captured: true, Proxy: "127.0.0.1:1", Mirrored: []string{"127.0.0.1:2"}, Allowed: []string{"a"},
			AllowedAddresses: []string{"10.0.0.0/8"}, Refused: []string{"r"}, RedactHeaders: []string{"X"}, RedactFields: []string{"f"},
			Blocked: []string{"b"}, NotCaptured: []string{"n"}, Ordered: true, OrderEscapes: 2}}
	got, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "env.golden.json"), append(got, '\n'))
	var empty Env
	got, err = json.MarshalIndent(empty, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "env-empty.golden.json"), append(got, '\n'))
}
