package sandbox

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkStartup prices a whole sandboxed run of /bin/true: namespaces,
// overlay, mounts, watcher, the agent's exec and the init's exit. This is
// the sandbox's share of a record's start-up. The +home cases add the
// private home of this process's $HOME and PATH, with dal's key directory
// covered: their ratio to the case without is its price; direct+tmp adds
// a run's /tmp overlay to direct.
//
//	go test ./internal/sandbox -run '^$' -bench Startup -count 10
func BenchmarkStartup(b *testing.B) {
	for _, bb := range []struct {
		name                       string
		network, direct, home, tmp bool
	}{
		{"private-tmp", false, false, false, false},
		{"private-tmp+home", false, false, true, false},
		{"private-tmp+network", true, false, false, false},
		{"direct", false, true, false, false},
		{"direct+home", false, true, true, false},
		{"direct+tmp", false, true, false, true}, // run's /tmp overlay

	} {
		b.Run(bb.name, func(b *testing.B) {
			cfg := newConfig(b, map[string]string{"in.txt": "x"})
			if bb.direct {
				cfg = Config{Direct: true, PrivateTmp: bb.tmp, Staging: filepath.Join(b.TempDir(), "staging")}
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

// BenchmarkPrivateTmpMount prices a run's /tmp overlay alone (the mounts
// mountDirectTmp makes, and their unmount), in a mount namespace of the
// benchmark's thread: direct+tmp's difference to direct, without the
// noise of a whole sandbox's start.
func BenchmarkPrivateTmpMount(b *testing.B) {
	runtime.LockOSThread() // never unlocked: the thread ends with the benchmark
	if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_FS); err != nil {
		b.Skipf("no mount namespace: %v", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		b.Fatal(err)
	}
	sp := &spec{Direct: true, PrivateTmp: true}
	for b.Loop() {
		if err := mountDirectTmp(sp); err != nil {
			b.Fatal(err)
		}
		if err := unix.Unmount("/tmp", unix.MNT_DETACH); err != nil {
			b.Fatal(err)
		}
	}
}
