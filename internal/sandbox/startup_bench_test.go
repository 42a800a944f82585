package sandbox

import "testing"

// BenchmarkStartup prices a whole sandboxed run of /bin/true: namespaces,
// overlay, mounts, watcher, the agent's exec and the init's exit. This is
// the sandbox's share of a record's start-up.
//
//	go test ./internal/sandbox -run '^$' -bench Startup -count 10
func BenchmarkStartup(b *testing.B) {
	for _, bb := range []struct {
		name    string
		network bool
	}{
		{"private-tmp", false},
		{"private-tmp+network", true},
	} {
		b.Run(bb.name, func(b *testing.B) {
			cfg := newConfig(b, map[string]string{"in.txt": "x"})
			cfg.Network = bb.network
			for b.Loop() {
				if r := run(b, cfg, "exit 0"); r.code != 0 {
					b.Fatalf("exit %d: %s", r.code, r.stderr)
				}
			}
		})
	}
}
