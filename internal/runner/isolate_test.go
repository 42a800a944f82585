package runner

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/sysvirt"
	"github.com/dal-runtime/dal/vclock"
)

// TestVirtualConfig: strict mode serves clocks and randomness, seeded
// randomness, logged and default nothing; the epoch and quantum are the
// spec's when set, the virtual clock's defaults otherwise.
func TestVirtualConfig(t *testing.T) {
	d := vclock.DefaultConfig()
	for _, c := range []struct {
		mode          string
		clock, random bool
	}{{"strict", true, true}, {"seeded", false, true}, {"logged", false, false}, {"default", false, false}} {
		got := VirtualConfig(&Spec{Mode: c.mode, Seed: 42})
		want := sysvirt.Config{Clock: c.clock, Random: c.random, Seed: 42, EpochNS: d.EpochNS, MonoNS: d.MonoNS, QuantumNS: d.QuantumNS}
		if got != want {
			t.Errorf("%s: %+v, want %+v", c.mode, got, want)
		}
		if got.Enabled() != (c.clock || c.random) {
			t.Errorf("%s: Enabled() = %v", c.mode, got.Enabled())
		}
	}
	epoch := time.Date(2030, 6, 1, 12, 0, 0, 5, time.UTC)
	got := VirtualConfig(&Spec{Mode: "strict", Epoch: epoch, Quantum: 3 * time.Microsecond})
	if got.EpochNS != epoch.UnixNano() || got.QuantumNS != 3000 || got.MonoNS != d.MonoNS {
		t.Errorf("the spec's epoch and quantum: %+v", got)
	}
}

// TestIsolatedConfig: an isolated run's sandbox is direct, under the
// mode's syscall layer, staged in the run's directory; the early one
// pins the agent to the run's CPUs and is named its directory later.
func TestIsolatedConfig(t *testing.T) {
	spec := &Spec{Mode: "seeded", Seed: 9, CPUs: []int{1}}
	cfg := isolated(spec, "/tmp/dal-run-x")
	if !cfg.Direct || cfg.Staging != "/tmp/dal-run-x/sandbox" || cfg.Virtual != VirtualConfig(spec) {
		t.Errorf("isolated: %+v", cfg)
	}
	early := earlyConfig(spec)
	if early.Staging != "" || !reflect.DeepEqual(early.CPUs, []int{1}) || !early.Direct {
		t.Errorf("early: staging %q, CPUs %v, direct %v", early.Staging, early.CPUs, early.Direct)
	}
}

// TestEarlySandboxFits: a sandbox started ahead is taken only by a run
// with the same streams and CPUs.
func TestEarlySandboxFits(t *testing.T) {
	in, out, errw := strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}
	e := &earlySandbox{stdin: in, stdout: out, stderr: errw, cpus: []int{0}}
	if !e.fits(&Spec{Stdin: in, Stdout: out, Stderr: errw, CPUs: []int{0}}) {
		t.Error("the same streams and CPUs do not fit")
	}
	for name, s := range map[string]*Spec{
		"stdout":   {Stdin: in, Stdout: &bytes.Buffer{}, Stderr: errw, CPUs: []int{0}},
		"stderr":   {Stdin: in, Stdout: out, Stderr: out, CPUs: []int{0}},
		"cpus":     {Stdin: in, Stdout: out, Stderr: errw, CPUs: []int{1}},
		"unpinned": {Stdin: in, Stdout: out, Stderr: errw},
	} {
		if e.fits(s) {
			t.Errorf("another %s fits", name)
		}
	}
}

// TestReplaceVars: set variables replace in place, new ones come last,
// sorted; dropped ones go.
func TestReplaceVars(t *testing.T) {
	env := []string{"B=1", "DAL_SESSION_TOKEN=secret", "A=2", "C=3=3"}
	set := map[string]string{"A": "new", "Z": "z", "M": "m"}
	got := replaceVars(env, set, map[string]bool{"DAL_SESSION_TOKEN": true})
	want := []string{"B=1", "A=new", "C=3=3", "M=m", "Z=z"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("replaceVars = %q, want %q", got, want)
	}
	if len(set) != 3 {
		t.Errorf("replaceVars changed its argument: %v", set)
	}
	if m := envMap(got); m["C"] != "3=3" || m["A"] != "new" || len(m) != 5 {
		t.Errorf("envMap = %v", m)
	}
}

// TestWriteToken: the token file is the owner's alone, and a link planted
// where it goes is replaced, never written through.
func TestWriteToken(t *testing.T) {
	staging := filepath.Join(t.TempDir(), "staging")
	p, err := writeToken(staging, "tok1")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "tok1\n" {
		t.Fatalf("token file: %q %v", b, err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o400 {
		t.Errorf("token file mode %v, want 0400", fi.Mode().Perm())
	}
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, p); err != nil {
		t.Fatal(err)
	}
	if _, err := writeToken(staging, "tok2"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the token was written through a link: the victim holds %q", b)
	}
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the token file is not a regular file: %v %v", fi, err)
	}
}
