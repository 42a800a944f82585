package sandbox

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// goRandSource prints three 16-byte draws of crypto/rand, which Go 1.24+
// takes from the vDSO's getrandom when there is one.
const goRandSource = `package main

import (
	"crypto/rand"
	"fmt"
)

func main() {
	for range 3 {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			panic(err)
		}
		fmt.Printf("%x\n", b)
	}
}
`

// TestVirtVDSODrawsTheSupervisorsStream: a Go program (CGO_ENABLED=0)
// draws from dal's vDSO the bytes the supervisor serves without it, in
// the same order, and a seed change changes them.
func TestVirtVDSODrawsTheSupervisorsStream(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(goRandSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module gorand\n\ngo 1.24\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "gorand")
	// The go tool of the toolchain that built this test, not one on PATH:
	// the rootless run (e2e/rootless_test.go) has only /usr/local/bin,
	// /usr/bin and /bin there.
	//lint:ignore SA1019 the build's GOROOT is what is wanted: the test runs where it was built.
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(v loopVariant) string {
		cfg := newConfig(t, nil)
		cfg.Binds = []string{dir}
		cfg.Virtual = v.virt
		c, err := Command(cfg, []string{bin}, []string{"PATH=/usr/bin:/bin"}, cfg.Workspace)
		if err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		c.Stdout, c.Stderr = &out, &errb
		if err := c.Start(); err != nil {
			c.Close()
			t.Fatal(err)
		}
		if err := c.Wait(); err != nil {
			t.Fatalf("%s: %v\n%s", v.name, err, errb.String())
		}
		return out.String()
	}
	fast, slow := run(layered), run(slowLayer)
	reseeded := layered
	reseeded.virt.Seed = 2
	other := run(reseeded)
	if len(fast) != 3*33 || fast != slow || fast == other {
		t.Errorf("crypto/rand through dal's vDSO:\n%s\nthrough the supervisor:\n%s\nwith another seed:\n%s", fast, slow, other)
	}
}
