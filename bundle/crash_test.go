package bundle

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	if stage := os.Getenv("BUNDLE_CRASH_STAGE"); stage != "" {
		crashChild(stage, os.Getenv("BUNDLE_CRASH_OUT"))
		os.Exit(3) // not reached: the child kills itself
	}
	os.Exit(m.Run())
}

// crashChild commits a bundle at out and is killed (SIGKILL, as by the
// OOM killer or kill -9) when Commit reaches stage.
func crashChild(stage, out string) {
	commitHook = func(s string) {
		if s == stage {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	w, err := Create(out)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(4)
	}
	for rel, data := range smallFiles {
		if err := w.WriteFile(rel, []byte(data)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(4)
		}
	}
	if err := w.Commit(fullManifest(), testKey(1)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(4)
	}
	os.Exit(0)
}

// TestKilledDuringCommit kills a real process at each stage of Commit:
// before the rename there is no bundle at out (only a staging directory,
// which Leftovers finds and which can be removed), after it a complete
// one.
func TestKilledDuringCommit(t *testing.T) {
	t.Parallel()
	for _, out := range []string{"run", "run.tar.zst"} {
		for _, stage := range []string{"hashed", "manifest", "synced", "published"} {
			t.Run(out+"/"+stage, func(t *testing.T) {
				t.Parallel()
				out := filepath.Join(t.TempDir(), out)
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), "BUNDLE_CRASH_STAGE="+stage, "BUNDLE_CRASH_OUT="+out)
				var stderr strings.Builder
				cmd.Stderr = &stderr
				err := cmd.Run()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != unix.SIGKILL {
					t.Fatalf("child did not die by SIGKILL: %v %s", err, stderr.String())
				}
				left, _ := Leftovers(out)
				if stage == "published" {
					b, err := Open(out, OpenOptions{})
					if err != nil {
						t.Fatalf("killed after publishing: %v", err)
					}
					b.Close()
					if len(left) != 0 {
						t.Fatalf("published but left %v", left)
					}
					return
				}
				if exists(out) {
					t.Fatalf("killed at %s: something exists at out", stage)
				}
				if _, err := Open(out, OpenOptions{}); !errors.Is(err, ErrNotBundle) {
					t.Fatalf("Open: %v", err)
				}
				if len(left) != 1 {
					t.Fatalf("Leftovers = %v", left)
				}
				if err := os.RemoveAll(left[0]); err != nil {
					t.Fatal(err)
				}
				// The name is free again.
				makeBundle(t, out)
			})
		}
	}
}
