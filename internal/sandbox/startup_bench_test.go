package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkStartup prices a whole sandboxed run of /bin/true: namespaces,
// overlay, mounts, watcher, the agent's exec and the init's exit. This is
// the sandbox's share of a record's start-up. The +home cases add the
// private home of this process's $HOME and PATH, with dal's key directory
// covered: their ratio to the case without is its price.
//
//	go test ./internal/sandbox -run '^$' -bench Startup -count 10
func BenchmarkStartup(b *testing.B) {
	for _, bb := range []struct {
		name                  string
		network, direct, home bool
	}{
		{"private-tmp", false, false, false},
		{"private-tmp+home", false, false, true},
		{"private-tmp+network", true, false, false},
		{"direct", false, true, false},
		{"direct+home", false, true, true},
	} {
		b.Run(bb.name, func(b *testing.B) {
			cfg := newConfig(b, map[string]string{"in.txt": "x"})
			if bb.direct {
				cfg = Config{Direct: true, Staging: filepath.Join(b.TempDir(), "staging")}
			}
			cfg.Network = bb.network
			if bb.home {
				home, _ := os.UserHomeDir()
				cfgDir, _ := os.UserConfigDir()
				h := Home{Dir: home, Path: os.Getenv("PATH"), Secrets: []string{filepath.Join(cfgDir, "dal")}}
				if err := cfg.HideHome(h); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if r := run(b, cfg, "exit 0"); r.code != 0 {
					b.Fatalf("exit %d: %s", r.code, r.stderr)
				}
			}
		})
	}
}
