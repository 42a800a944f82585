package runner

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/dal-runtime/dal/internal/wire"
)

func TestShimmed(t *testing.T) {
	for argv0, want := range map[string]bool{
		"python3": true, "/usr/bin/python3.12": true, "python": true, "node": true, "/opt/node": true,
		"nodejs": false, "bash": false, "/usr/bin/env": false, "mypython": false, "": false,
	} {
		if got := shimmed(argv0); got != want {
			t.Errorf("shimmed(%q) = %v, want %v", argv0, got, want)
		}
	}
}

// TestMayTrace: dald traces a run that asks, unless it is an embedded
// dald that nobody would read the counts of.
func TestMayTrace(t *testing.T) {
	// No running default dald: its socket's directory is empty.
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	cases := []struct {
		name string
		spec Spec
		want bool
	}{
		{"not asked", Spec{Socket: "/run/x.sock"}, false},
		{"a separate dald", Spec{TraceFromExec: 2, Socket: "/run/x.sock", TraceIfObserved: true}, true},
		{"embedded, always", Spec{TraceFromExec: 1}, true},
		{"embedded, unobserved", Spec{TraceFromExec: 1, TraceIfObserved: true}, false},
	}
	for _, c := range cases {
		if got := mayTrace(&c.spec); got != c.want {
			t.Errorf("%s: mayTrace = %v, want %v", c.name, got, c.want)
		}
	}
	// A default dald running: its socket exists.
	dir := filepath.Dir(wire.DefaultSocket())
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if fileIsSocket(wire.DefaultSocket()) {
		t.Fatal("a socket before one was made")
	}
	l, err := net.Listen("unix", wire.DefaultSocket())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !mayTrace(&Spec{TraceFromExec: 1, TraceIfObserved: true}) {
		t.Error("with a default dald running, an unobserved run is not traced")
	}
}

// TestMkdirFixedWidth: every private directory's name has the same
// length, and each is new and the owner's alone.
func TestMkdirFixedWidth(t *testing.T) {
	dir := t.TempDir()
	name := regexp.MustCompile(`^dal-run-[0-9a-f]{16}$`)
	var made []string
	for range 20 {
		p, err := mkdirFixedWidth(dir, "dal-run-")
		if err != nil {
			t.Fatal(err)
		}
		if !name.MatchString(filepath.Base(p)) || filepath.Dir(p) != dir {
			t.Errorf("made %s", p)
		}
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v", p, fi, err)
		}
		if slices.Contains(made, p) {
			t.Errorf("%s made twice", p)
		}
		made = append(made, p)
	}
	if _, err := mkdirFixedWidth(filepath.Join(dir, "missing"), "x"); err == nil {
		t.Error("a directory made in a missing parent")
	}
}
